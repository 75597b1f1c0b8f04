#!/usr/bin/env bash
# CPU seconds per FL round of one row of a paper preset, for machines where other work shares the cores:
# wall time then counts the time the run waits for a core, CPU time (user + system of the process) does
# not. Runs `bastion reproduce PRESET --row ROW --seeds 1 --threads 1 --set eval.every=1000000` (and
# eval.report=last, which a preset that reports the mean of its last K rounds needs then) with rounds=1
# and with rounds=N (default 3) and prints, per repeat, (CPU of the N-round run - CPU of the 1-round run)
# / (N - 1): loading, set-up, the final evaluation and a preset's final tuning step are in both runs and
# cancel, and no other round evaluates, so the figure is training and aggregation, as bench_preset_round.sh's
# train_s + aggregate_s. A preset with several columns runs one cell per column; the figure is their sum.
# Repeats run interleaved with a second binary given in BASTION_BIN_B, so an A/B sees the same load.
#   scripts/cpu_preset_round.sh fedfsa-table1 FedFSA 3 2
# Usage: scripts/cpu_preset_round.sh PRESET ROW [ROUNDS] [REPEATS]   (needs build/bastion; BASTION_BIN overrides)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: scripts/cpu_preset_round.sh PRESET ROW [ROUNDS] [REPEATS]" >&2; exit 2; }
preset="$1" row="$2" rounds="${3:-3}" repeats="${4:-1}"
[ "$rounds" -ge 2 ] || { echo "cpu_preset_round: ROUNDS must be at least 2" >&2; exit 2; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

cpu_seconds() {  # BIN N: user + system seconds of one run of N rounds
  rm -rf "$out/run"
  /usr/bin/time -f "%U %S" -o "$out/time" "$1" reproduce "$preset" --row "$row" --seeds 1 --set "rounds=$2" \
    --set eval.every=1000000 --set eval.report=last --threads 1 --out "$out/run" > "$out/log" 2>&1 ||
    { cat "$out/log" >&2; exit 1; }
  awk '{ printf "%.3f", $1 + $2 }' "$out/time"
}

printf "%-7s %-40s %10s %10s %12s\n" repeat binary cpu_1 "cpu_$rounds" cpu_per_round
for r in $(seq 1 "$repeats"); do
  for bin in "${BASTION_BIN:-build/bastion}" ${BASTION_BIN_B:-}; do
    one="$(cpu_seconds "$bin" 1)"
    many="$(cpu_seconds "$bin" "$rounds")"
    printf "%-7s %-40s %10s %10s %12s\n" "$r" "$bin" "$one" "$many" \
      "$(awk -v a="$one" -v b="$many" -v n="$rounds" 'BEGIN { printf "%.3f", (b - a) / (n - 1) }')"
  done
done
