#!/usr/bin/env bash
# Seconds per FL round of one row of a paper preset, as a user runs it: `bastion reproduce PRESET --row ROW
# --seeds 1 --set rounds=N` (default N = 3), 1 thread, each cell of the row (one per column). Prints, per
# cell, the median over rounds 2..N-1 of train_s + aggregate_s from timing.csv (round 1 warms the caches
# and the last round holds a preset's final tuning step, which is evaluation) and the last round's eval_s.
# The figure of issue 38's "FedFSA Table 1 round" (bench/RESULTS.md):
#   scripts/bench_preset_round.sh fedfsa-table1 FedFSA
# Usage: scripts/bench_preset_round.sh PRESET ROW [ROUNDS]   (needs build/bastion; BASTION_BIN overrides)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: scripts/bench_preset_round.sh PRESET ROW [ROUNDS]" >&2; exit 2; }
preset="$1" row="$2" rounds="${3:-3}"
[ "$rounds" -ge 3 ] || { echo "bench_preset_round: ROUNDS must be at least 3 (round 1 and the last are left out)" >&2; exit 2; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
"${BASTION_BIN:-build/bastion}" reproduce "$preset" --row "$row" --seeds 1 --set "rounds=$rounds" --threads 1 \
  --out "$out" > "$out/log" 2>&1 || { cat "$out/log" >&2; exit 1; }
printf "%-32s %12s %10s\n" cell s_per_round last_eval_s
for timing in "$out"/runs/*/timing.csv; do
  cell="$(basename "$(dirname "$timing")")"
  median="$(awk -F, -v last="$rounds" 'NR > 2 && $1 < last { print $2 + $3 }' "$timing" | sort -g |
            awk '{ v[NR] = $1 } END { printf "%.3f", (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }')"
  last_eval="$(awk -F, 'END { printf "%.3f", $4 }' "$timing")"
  printf "%-32s %12s %10s\n" "$cell" "$median" "$last_eval"
done
