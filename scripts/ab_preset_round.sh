#!/usr/bin/env bash
# A/B of two bastion binaries on one preset row's FL round, interleaved (A, B, A, B, ...) so machine drift
# hits both alike: `bastion reproduce PRESET --row ROW --seeds 1 --set rounds=N --threads 1` per binary
# and repeat. Per run and cell: the median over rounds 2..N-1 of train_s + aggregate_s (timing.csv;
# round 1 warms caches, the last round holds a preset's final tuning). Prints every figure, then per
# cell the median over repeats for A and B and the ratio A/B (> 1: B is faster), and whether every
# rounds.csv of B equals A's byte for byte (a speed change must not change a result).
# Usage: scripts/ab_preset_round.sh PRESET ROW BIN_A BIN_B [REPEATS] [ROUNDS]   (defaults 3 and 4)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 4 ] || { echo "usage: scripts/ab_preset_round.sh PRESET ROW BIN_A BIN_B [REPEATS] [ROUNDS]" >&2; exit 2; }
preset="$1" row="$2" bin_a="$3" bin_b="$4" repeats="${5:-3}" rounds="${6:-4}"
[ "$rounds" -ge 3 ] || { echo "ab_preset_round: ROUNDS must be at least 3" >&2; exit 2; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# shellcheck source=scripts/preset_round_lib.sh
. scripts/preset_round_lib.sh  # median, preset_round

for repeat in $(seq 1 "$repeats"); do
  for side in a b; do
    bin="$bin_a"; [ "$side" = b ] && bin="$bin_b"
    preset_round "$side" "$repeat" "$bin" "$preset" "$row" "$rounds" "$out/$side-$repeat" "$out/figures"
  done
done

printf "\n%-32s %10s %10s %8s\n" cell A_s B_s A/B
for cell in $(awk '{ print $3 }' "$out/figures" | sort -u); do
  a="$(awk -v c="$cell" '$1 == "a" && $3 == c { print $4 }' "$out/figures" | median)"
  b="$(awk -v c="$cell" '$1 == "b" && $3 == c { print $4 }' "$out/figures" | median)"
  printf "%-32s %10s %10s %8.3f\n" "$cell" "$a" "$b" "$(echo "$a / $b" | bc -l)"
done

same=yes
for rounds_csv in "$out"/a-1/runs/*/rounds.csv; do
  cell="$(basename "$(dirname "$rounds_csv")")"
  for repeat in $(seq 1 "$repeats"); do
    cmp -s "$rounds_csv" "$out/b-$repeat/runs/$cell/rounds.csv" || { same=no; echo "rounds.csv differs: $cell, B repeat $repeat"; }
  done
done
echo "rounds.csv of B identical to A: $same"
