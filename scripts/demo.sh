#!/usr/bin/env bash
# The README's demo command: install dependencies, build, train LeNet on Fashion-MNIST for 3 epochs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
exec build/bastion train --dataset fmnist --model lenet --epochs 3 --batch 64 --lr 0.01 --momentum 0.9 --threads "$(nproc)" "$@"
