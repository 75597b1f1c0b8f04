#!/usr/bin/env bash
# CPU seconds per FL round of one experiment config with overrides: the cost of a column that has no
# preset yet (docs/reproduction.md, "The CIFAR-10 columns not yet run"). As scripts/cpu_preset_round.sh
# does for a preset row: runs `bastion run CONFIG --set ... --threads 1 --set eval.every=1000000
# --set eval.report=last` with rounds=1 and rounds=N (default 3) and prints (CPU of N rounds - CPU of 1
# round) / (N - 1), user + system time, so other work on the cores does not count; loading, set-up and the
# final evaluation are in both runs and cancel.
#   scripts/cpu_config_round.sh configs/papers/pfedsam-mnist-base.toml --set data.dataset=cifar10 --set model.name=lenet
# Usage: scripts/cpu_config_round.sh CONFIG [--set KEY=VALUE ...]   (ROUNDS=N; needs build/bastion, BASTION_BIN overrides)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/cpu_config_round.sh CONFIG [--set KEY=VALUE ...]" >&2; exit 2; }
config="$1"
shift
bin="${BASTION_BIN:-build/bastion}" rounds="${ROUNDS:-3}"
[ "$rounds" -ge 2 ] || { echo "cpu_config_round: ROUNDS must be at least 2" >&2; exit 2; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

cpu_seconds() {  # N [--set ...]: user + system seconds of one run of N rounds
  local n="$1"
  shift
  rm -rf "$out/run"
  /usr/bin/time -f "%U %S" -o "$out/time" "$bin" run "$config" "$@" --set "rounds=$n" --set eval.every=1000000 \
    --set eval.report=last --threads 1 --out "$out/run" > "$out/log" 2>&1 || { cat "$out/log" >&2; exit 1; }
  awk '{ printf "%.3f", $1 + $2 }' "$out/time"
}

one=$(OMP_NUM_THREADS=1 cpu_seconds 1 "$@")
many=$(OMP_NUM_THREADS=1 cpu_seconds "$rounds" "$@")
awk -v a="$one" -v b="$many" -v n="$rounds" \
  'BEGIN { printf "cpu_1 %.3f s, cpu_%d %.3f s, cpu_per_round %.3f s\n", a, n, b, (b - a) / (n - 1) }'
