#!/usr/bin/python3
"""PyTorch GPU twin of a Bastion FL round on the device (`bastion run configs/bench/fl-round.toml --device cuda`).

MAINTAINER-ONLY SCRIPT. Bastion itself has no Python; this exists only to put a plain PyTorch federated
loop beside Bastion's device run in bench/RESULTS.md (issue 36). Run it on the GPU machine:

    python3 bench/reference/pytorch_cuda_fl_round.py --model lenet --data DIR_WITH_FMNIST_GZ [--rounds 4]
    python3 bench/reference/pytorch_cuda_fl_round.py --model resnet18 [--rounds 3]      # random CIFAR-shaped data

One round = FedAvg over `--clients` clients (10), each: load the global state, a fresh SGD(lr 0.01,
momentum 0.9), `--epochs` (2) epochs over its `--samples` (600 for LeNet, 500 for ResNet18) samples in
shuffled batches of 64 (last batch partial), then the global state becomes the mean of the clients'
states (BatchNorm statistics included). This is what Bastion's `sgd` client and `fedavg` server rule do;
Bastion also computes each upload on the host and writes rounds.csv, which this loop does not.
`--data-on device` (default) keeps every client's samples on the GPU (the fastest plain loop);
`--data-on host` copies each batch from pinned host memory, as Bastion does from its host loader.
Models: the LeNet of pytorch_fl_round.py (nn/models.cpp's) and the CIFAR ResNet18 of
pytorch_cuda_train_step.py. Exact FP32 (no TF32), cudnn.benchmark on.
Prints the median wall time of the timed rounds (after one warm-up round), each round ending in a
synchronize.
"""
import argparse
import gzip
import os
import statistics
import time

import torch
import torch.nn.functional as F

from pytorch_cuda_train_step import ResNet18
from pytorch_fl_round import LeNet  # the CPU twin's LeNet: nn/models.cpp's


def fmnist(folder, count):
    with gzip.open(os.path.join(folder, "train-images-idx3-ubyte.gz")) as f:
        images = torch.frombuffer(bytearray(f.read()[16:]), dtype=torch.uint8)
    with gzip.open(os.path.join(folder, "train-labels-idx1-ubyte.gz")) as f:
        labels = torch.frombuffer(bytearray(f.read()[8:]), dtype=torch.uint8)
    x = images.view(-1, 1, 28, 28)[:count].float() / 255.0
    return (x - 0.2860) / 0.3530, labels[:count].long()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["lenet", "resnet18"], default="lenet")
    parser.add_argument("--data", help="folder with Fashion-MNIST's train-*.gz (lenet); resnet18 uses random data")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--samples", type=int, default=0, help="per client (default 600 lenet, 500 resnet18)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=4, help="timed rounds, after one warm-up round")
    parser.add_argument("--data-on", choices=["device", "host"], default="device")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)
    device = torch.device("cuda")
    samples = args.samples or (600 if args.model == "lenet" else 500)
    total = args.clients * samples
    if args.model == "lenet":
        x, y = fmnist(args.data, total)
        model = LeNet().to(device)
    else:
        x, y = torch.randn(total, 3, 32, 32), torch.randint(0, 10, (total,))
        model = ResNet18().to(device)
    x, y = (x.to(device), y.to(device)) if args.data_on == "device" else (x.pin_memory(), y.pin_memory())
    global_state = {k: v.clone() for k, v in model.state_dict().items()}

    def client(k):
        model.load_state_dict(global_state)
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        for _ in range(args.epochs):
            order = torch.randperm(samples) + k * samples
            for b in range(0, samples, args.batch):
                idx = order[b:b + args.batch]
                if args.data_on == "device":
                    xb, yb = x[idx.to(device)], y[idx.to(device)]
                else:
                    xb, yb = x[idx].to(device, non_blocking=True), y[idx].to(device, non_blocking=True)
                opt.zero_grad(set_to_none=False)
                F.cross_entropy(model(xb), yb).backward()
                opt.step()
        return model.state_dict()

    def one_round():
        total_state = None
        for k in range(args.clients):
            state = client(k)
            if total_state is None:
                total_state = {n: v.detach().clone().double() for n, v in state.items()}
            else:
                for n, v in state.items():
                    total_state[n] += v.double()
        for n, v in total_state.items():
            global_state[n] = (v / args.clients).to(global_state[n].dtype)
        torch.cuda.synchronize()

    one_round()  # warm-up: cudnn.benchmark's searches, the caching allocator
    times = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        one_round()
        times.append(time.perf_counter() - start)
    steps = args.clients * args.epochs * ((samples + args.batch - 1) // args.batch)
    median = statistics.median(times)
    print(f"pytorch {torch.__version__} {torch.cuda.get_device_name()} fl-round {args.model} {args.clients} clients x "
          f"{samples} x {args.epochs} epochs, batch {args.batch}, data on {args.data_on}: median {median:.3f} s/round "
          f"(min {min(times):.3f}, {len(times)} rounds), {steps} steps, {median / steps * 1e3:.3f} ms/step")


if __name__ == "__main__":
    main()
