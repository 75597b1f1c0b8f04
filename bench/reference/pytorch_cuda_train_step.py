#!/usr/bin/python3
"""PyTorch eager twin of bench/cuda/bench_train_step.cpp: one SGD training step on the GPU, timed.

MAINTAINER-ONLY SCRIPT. Bastion itself has no Python; this exists only to put PyTorch's numbers next to
Bastion's CUDA backend in bench/RESULTS.md. Run it on the GPU machine (its python3 has PyTorch):

    python3 bench/reference/pytorch_cuda_train_step.py [--batch 128] [--steps 30] [--tf32]

Model: CIFAR ResNet18 as in Bastion's zoo (nn/models.cpp, nn/layers.cpp): 3x3 stride-1 stem conv 3->64
without bias, BN, ReLU, no max-pool; four stages of two torchvision BasicBlocks (conv3x3-BN-ReLU-
conv3x3-BN + shortcut, 1x1 conv + BN when the shape changes), widths 64/128/256/512, strides 1/2/2/2;
global average pool; fc 512->10. One step = zero_grad; F.cross_entropy(model(x), y).backward();
opt.step() with SGD(lr 0.01, momentum 0.9, weight_decay 5e-4); x ~ N(0, 1) (3x32x32), y uniform in
[0, 10), the same batch every step. TF32 is off unless --tf32 (Bastion's default GEMM is exact FP32).
cudnn.benchmark is on (PyTorch's fastest eager setting). 5 warm-up steps, then each step timed between
CUDA events; prints the median and minimum step time and samples/s.
"""
import argparse
import statistics

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, 0, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, cin = [], 64
        for width, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers.append(nn.Sequential(BasicBlock(cin, width, stride), BasicBlock(width, width, 1)))
            cin = width
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.layers(F.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--tf32", action="store_true")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)
    device = torch.device("cuda")
    model = ResNet18().to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(args.batch, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (args.batch,), device=device)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(5):
        step()
    times = []
    for _ in range(args.steps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        loss = step()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    median = statistics.median(times)
    print(f"pytorch {torch.__version__} {torch.cuda.get_device_name()} resnet18 batch {args.batch} "
          f"{'tf32' if args.tf32 else 'fp32'}: median {median:.3f} ms  min {min(times):.3f} ms  "
          f"{args.batch / (median * 1e-3):.0f} samples/s  final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
