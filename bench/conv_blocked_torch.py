#!/usr/bin/env python3
"""PyTorch's CPU convolution on the shapes of bench/conv_blocked_ladder.cpp, for context beside it.

Forward (F.conv2d), grad_in and grad_weight (aten.convolution_backward with one output each), ResNet18's
CIFAR 3x3 layers, medians of interleaved repetitions. Usage:
  python3 bench/conv_blocked_torch.py [batch=64] [threads=1] [repetitions=5] [peak GFLOP/s=245]
"""
import statistics
import sys
import time

import torch
import torch.nn.functional as F

SHAPES = [("64,32x32,s1", 64, 32, 64, 1), ("64->128,32->16,s2", 64, 32, 128, 2), ("128,16x16,s1", 128, 16, 128, 1),
          ("128->256,16->8,s2", 128, 16, 256, 2), ("256,8x8,s1", 256, 8, 256, 1),
          ("256->512,8->4,s2", 256, 8, 512, 2), ("512,4x4,s1", 512, 4, 512, 1)]


def seconds_per_call(f, min_seconds=0.15):
    f()
    calls, start = 0, time.perf_counter()
    while True:
        f()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / calls


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    peak = float(sys.argv[4]) if len(sys.argv) > 4 else 245.0
    torch.set_num_threads(threads)
    torch.manual_seed(7)
    print(f"torch {torch.__version__}, batch {batch}, {threads} thread(s), {reps} repetitions; GFLOP/s (% of peak)")
    for name, C, H, K, stride in SHAPES:
        x = torch.randn(batch, C, H, H)
        w = torch.randn(K, C, 3, 3)
        b = torch.randn(K)
        out = F.conv2d(x, w, b, stride=stride, padding=1)
        gy = torch.randn_like(out)
        flops = 2.0 * batch * K * C * 9 * out.shape[2] * out.shape[3]

        def backward(mask):
            return lambda: torch.ops.aten.convolution_backward(gy, x, w, [K], [stride, stride], [1, 1], [1, 1], False,
                                                               [0, 0], 1, mask)

        passes = {"fwd": lambda: F.conv2d(x, w, b, stride=stride, padding=1),
                  "grad_in": backward([True, False, False]), "grad_w": backward([False, True, False])}
        times = {p: [] for p in passes}
        with torch.no_grad():
            for _ in range(reps):
                for p, f in passes.items():
                    times[p].append(seconds_per_call(f))
        for p in passes:
            g = flops / statistics.median(times[p]) * 1e-9
            print(f"{name:20s} {p:8s} {g:7.1f} ({100 * g / peak:4.0f}%)", flush=True)


if __name__ == "__main__":
    main()
