#!/usr/bin/env bash
# Seconds per FL round (bench/RESULTS.md): 10 clients x 600 Fashion-MNIST samples x 2 local epochs,
# LeNet, batch 64 (configs/bench/fl-round.toml), for the sgd and the sam client step, with 1 and 2
# threads, interleaved (sgd/sam alternate) so machine drift hits both alike. The figure per run is the
# median over rounds 2..11 of train_s + aggregate_s from timing.csv (round 1 warms caches up; round 12
# also evaluates). Usage: scripts/bench_fl_round.sh [REPEATS]   (default 3; needs build/bastion)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats="${1:-3}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

round_seconds() {  # median of train_s + aggregate_s over rounds 2..11 of a timing.csv
  awk -F, 'NR > 2 && NR < 13 { print $2 + $3 }' "$1" | sort -g | awk '{ v[NR] = $1 } END { print (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }'
}

printf "%-4s %-7s %-7s %s\n" step threads repeat s_per_round
for r in $(seq 1 "$repeats"); do
  for threads in 1 2; do
    for step in sgd sam; do
      rho=0.0
      [ "$step" = sam ] && rho=0.05
      dir="$out/$step-$threads-$r"
      ${BASTION_BIN:-build/bastion} run configs/bench/fl-round.toml --quiet --out "$dir" --threads "$threads" \
        --set "clients.sgd.rho=$rho" > /dev/null
      printf "%-4s %-7s %-7s %s\n" "$step" "$threads" "$r" "$(round_seconds "$dir/timing.csv")"
    done
  done
done
