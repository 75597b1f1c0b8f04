#!/usr/bin/env bash
# The README's demo command: install dependencies, build, run configs/demo.toml (FedAvg under a
# continuous BadNets attack on Fashion-MNIST, 100 clients; about 70 s on 2 cores). Prints a progress
# line per round, where the results and the plot are, and `acc=.. asr=..` last. Extra arguments go to
# `bastion run` (e.g. --set rounds=10).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
exec build/bastion run configs/demo.toml --out results/demo --overwrite --threads "$(nproc)" "$@"
