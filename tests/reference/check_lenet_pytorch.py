#!/usr/bin/env python3
"""Maintainer-only check: Bastion's saved LeNet loads into PyTorch's equivalent module unchanged.

Bastion itself has no Python; this script needs Debian's python3-torch and python3-numpy:
    build/bastion train --dataset fmnist --model lenet --epochs 3 --save /tmp/lenet.safetensors
    /usr/bin/python3 tests/reference/check_lenet_pytorch.py /tmp/lenet.safetensors [FMNIST_DIR]

It parses the safetensors file with the standard library (the `safetensors` package is not in
Debian), builds torch modules named exactly like Bastion's (conv1, conv2, fc1, fc2, fc3), calls
load_state_dict(strict=True) -- so any renamed, missing or reshaped tensor fails -- applies the
normalisation recorded in the file's metadata, and prints PyTorch's test accuracy. It exits 1 when
the accuracy differs from the `--expect` value (Bastion's test_acc) by more than 0.0005.
"""
import argparse
import gzip
import json
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class LeNet(nn.Module):
    def __init__(self, channels, size, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        side = ((size - 4) // 2 - 4) // 2
        self.fc1 = nn.Linear(16 * side * side, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (header_len,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + header_len])
    data = blob[8 + header_len:]
    metadata = header.pop("__metadata__", {})
    dtypes = {"F32": np.float32, "I64": np.int64}
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype=dtypes[info["dtype"]]).reshape(info["shape"])
        tensors[name] = torch.from_numpy(array.copy())
    return tensors, metadata


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic, count = struct.unpack(">II", raw[:8])
    if magic == 2051:
        rows, cols = struct.unpack(">II", raw[8:16])
        return np.frombuffer(raw[16:], dtype=np.uint8).reshape(count, 1, rows, cols)
    return np.frombuffer(raw[8:], dtype=np.uint8)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("weights")
    parser.add_argument("data_dir", nargs="?", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--expect", type=float, help="Bastion's test_acc for the same weights")
    args = parser.parse_args()

    tensors, metadata = read_safetensors(args.weights)
    assert metadata["model"] == "lenet", metadata
    classes = int(metadata["num_classes"])
    mean = json.loads(metadata["mean"])
    std = json.loads(metadata["std"])
    model = LeNet(1, 28, classes)
    model.load_state_dict(tensors, strict=True)
    model.eval()

    images = read_idx(f"{args.data_dir}/t10k-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    labels = torch.from_numpy(read_idx(f"{args.data_dir}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
    x = (torch.from_numpy(images) - mean[0]) / std[0]
    with torch.no_grad():
        predicted = torch.cat([model(x[i:i + 1000]).argmax(1) for i in range(0, len(x), 1000)])
    accuracy = (predicted == labels).float().mean().item()
    print(f"metadata={metadata}")
    print(f"pytorch_test_acc={accuracy:.4f}")
    if args.expect is not None and abs(accuracy - args.expect) > 0.0005:
        print(f"MISMATCH: Bastion reported {args.expect:.4f}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
