#!/usr/bin/python3
"""PyTorch twin of bench/bench_train.cpp: one SGD training step at batch 64, timed.

MAINTAINER-ONLY SCRIPT. Bastion itself has no Python; this exists only to put PyTorch's numbers next to
Bastion's in bench/RESULTS.md. Run it with Debian's interpreter, which has python3-torch 1.13:

    /usr/bin/python3 bench/reference/pytorch_train_step.py [--passes 5] [--steps 200] [--pass-seconds 1]
                                                           [--threads 1 2] [--models M ...] [--eval] [--json]
                                                           [--cpu-time]

Models, identical in shapes to Bastion's zoo (nn/models.cpp), at batch 64 (cnn-fedfsa: 48):
  mlp         flatten, fc1 784->200, ReLU, fc2 200->200, ReLU, fc3 200->10
  lenet       conv1 C->6 k5, ReLU, maxpool 2, conv2 6->16 k5, ReLU, maxpool 2, flatten,
              fc1 ->120, ReLU, fc2 120->84, ReLU, fc3 84->10   (1x28x28 and 3x32x32)
  cnn-fedcap  conv 3->32 k5, ReLU, pool, conv 32->64 k5, ReLU, pool, fc 1600->64, ReLU, fc 64->10
  cnn-fedfsa  conv 1->4 k5, ReLU, pool, conv 4->12 k5, ReLU, pool, fc 192->1024->1024->10 (ReLUs)
  cnn-spmc    the LeNet trunk (3x32x32), then l1 84->84, ReLU, l2 84->256, cls 256->10
  resnet18    CIFAR ResNet18 (3x3 stem, no max-pool, BasicBlocks [2, 2, 2, 2], BatchNorm), 1 step per pass
  resnet10    the same with BasicBlocks [1, 1, 1, 1]
One step = opt.zero_grad(); F.cross_entropy(model(x), y).backward(); opt.step() with
SGD(lr=0.01, momentum=0.9); x ~ N(0, 1), y uniform in [0, 10), fixed seed, the same batch every step.
For each (model, threads in 1, 2): torch.set_num_threads(threads), 20 warm-up steps, then `passes`
passes of `steps` steps each -- fewer when the warm-up shows a pass would take longer than
--pass-seconds (at least 5 steps), so slow cases (2 threads on a loaded machine) do not take minutes,
like Google Benchmark's --benchmark_min_time on the C++ side. Prints samples/s per pass and the median
(one line per case, or one JSON object with --json, which bench/summarize.py reads).
--cpu-time divides by the process's CPU seconds (time.process_time) instead of wall seconds: on a machine
whose cores other work shares, that leaves out the time the step waits for a core; set it beside
bench_train's CPU column (Google Benchmark's CPU time per iteration).
--eval times evaluation instead, as bench_train's evaluate/* does it: model.eval(), torch.no_grad(),
forward passes of EVAL_BATCH (128) images and the argmax; one "step" is one such pass.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 64
CLASSES = 10
WARMUP_STEPS = 20
EVAL_BATCH = 128


class Mlp(nn.Module):
    def __init__(self, inputs):
        super().__init__()
        self.fc1 = nn.Linear(inputs, 200)
        self.fc2 = nn.Linear(200, 200)
        self.fc3 = nn.Linear(200, CLASSES)

    def forward(self, x):
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class LeNet(nn.Module):
    def __init__(self, channels, size):
        super().__init__()
        side = ((size - 4) // 2 - 4) // 2
        self.conv1 = nn.Conv2d(channels, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * side * side, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class FedcapCnn(nn.Module):
    def __init__(self, channels, size):
        super().__init__()
        side = ((size - 4) // 2 - 4) // 2
        self.conv1 = nn.Sequential(nn.Conv2d(channels, 32, 5), nn.ReLU(), nn.MaxPool2d(2, 2))
        self.conv2 = nn.Sequential(nn.Conv2d(32, 64, 5), nn.ReLU(), nn.MaxPool2d(2, 2))
        self.fc1 = nn.Sequential(nn.Linear(64 * side * side, 64), nn.ReLU())
        self.fc = nn.Linear(64, CLASSES)

    def forward(self, x):
        return self.fc(self.fc1(torch.flatten(self.conv2(self.conv1(x)), 1)))


class FedfsaCnn(nn.Module):
    """cnn-fedfsa at 1 channel (FedFSA's FMNIST_CNNs): conv 4, conv 12 (k5, pool 2) + FC 1024-1024-C."""

    def __init__(self, channels, size):
        super().__init__()
        side = ((size - 4) // 2 - 4) // 2
        self.conv1 = nn.Conv2d(channels, 4, 5)
        self.conv2 = nn.Conv2d(4, 12, 5)
        self.fc1 = nn.Linear(12 * side * side, 1024)
        self.fc2 = nn.Linear(1024, 1024)
        self.fc3 = nn.Linear(1024, CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class SpmcCnn(LeNet):
    """cnn-spmc: the LeNet trunk, then l1 84-84 + ReLU, l2 84-256 (no ReLU), cls 256-C."""

    def __init__(self, channels, size):
        super().__init__(channels, size)
        self.l1 = nn.Linear(84, 84)
        self.l2 = nn.Linear(84, 256)
        self.cls = nn.Linear(256, CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2)
        x = F.relu(self.fc2(F.relu(self.fc1(torch.flatten(x, 1)))))
        return self.cls(self.l2(F.relu(self.l1(x))))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet18(nn.Module):
    """CIFAR ResNet18 as nn/models.cpp: 3x3 stem without max-pool, BasicBlocks [2, 2, 2, 2], GAP, fc;
    blocks_per_stage=1 is resnet10."""

    def __init__(self, channels, size, blocks_per_stage=2):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        blocks, cin = [], 64
        for width, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            for b in range(blocks_per_stage):
                blocks.append(BasicBlock(cin, width, stride if b == 0 else 1))
                cin = width
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, CLASSES)

    def forward(self, x):
        x = self.blocks(F.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# (name, input shape, model builder, batch): the same cases as bench/bench_train.cpp.
CASES = [
    ("mlp", (1, 28, 28), lambda c, s: Mlp(c * s * s), 64),
    ("lenet", (1, 28, 28), LeNet, 64),
    ("lenet", (3, 32, 32), LeNet, 64),
    ("cnn-fedcap", (3, 32, 32), FedcapCnn, 64),
    ("cnn-fedfsa", (1, 28, 28), FedfsaCnn, 48),
    ("cnn-spmc", (3, 32, 32), SpmcCnn, 64),
    ("resnet18", (3, 32, 32), ResNet18, 64),
    ("resnet10", (3, 32, 32), lambda c, s: ResNet18(c, s, blocks_per_stage=1), 64),
]


def time_case(build, shape, batch, threads, passes, max_steps, pass_seconds, evaluate=False, clock=time.perf_counter):
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    channels, size, _ = shape
    model = build(channels, size)
    model.train(not evaluate)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, *shape)
    y = torch.randint(0, CLASSES, (batch,))

    def step():
        if evaluate:
            with torch.no_grad():
                return model(x).argmax(1).sum()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    t0 = clock()
    step()
    first = clock() - t0
    warmup = WARMUP_STEPS if first < 0.2 else 2  # ResNet18 takes seconds per step: warm up briefly
    t0 = clock()
    for _ in range(warmup):
        step()
    seconds_per_step = (clock() - t0) / warmup
    steps = max(1 if seconds_per_step > 1.0 else 5, min(max_steps, int(pass_seconds / seconds_per_step)))
    rates = []
    for _ in range(passes):
        t0 = clock()
        for _ in range(steps):
            loss = step()
        loss.item()  # eager CPU execution: already done, but keep the read inside the timed pass
        rates.append(batch * steps / (clock() - t0))
    return rates, steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200, help="steps per pass at most")
    parser.add_argument("--pass-seconds", type=float, default=1.0, help="target duration of one pass")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--models", nargs="*", help="only these models (default: all)")
    parser.add_argument("--eval", action="store_true", help="time evaluation (no_grad forward at batch 128)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cpu-time", action="store_true", help="samples per CPU second of the process")
    args = parser.parse_args()
    clock = time.process_time if args.cpu_time else time.perf_counter

    results = []
    for name, shape, build, batch in CASES:
        if args.models and name not in args.models:
            continue
        for threads in args.threads:
            if args.eval:
                batch = EVAL_BATCH
            rates, steps = time_case(build, shape, batch, threads, args.passes, args.steps, args.pass_seconds,
                                     args.eval, clock)
            case = "%s%s/%dx%dx%d/threads:%d" % ("evaluate/" if args.eval else "", name, *shape, threads)
            results.append({"case": case, "steps_per_pass": steps, "samples_per_s": rates,
                            "median": statistics.median(rates)})
            if not args.json:
                print("%-34s median %10.1f samples/s   %3d steps/pass: %s" % (
                    case, statistics.median(rates), steps, " ".join("%.1f" % r for r in rates)), flush=True)
    if args.json:
        print(json.dumps({"torch": torch.__version__, "passes": args.passes, "results": results}))


if __name__ == "__main__":
    main()
