#!/usr/bin/env bash
# Cost of the SAM family's client step against a plain SGD step (bench/RESULTS.md "SAM client step"):
# seconds per FL round of configs/bench/fl-round-rules.toml (10 clients x 600 Fashion-MNIST samples x 2
# local epochs, LeNet, batch 64, lr 0.01) for sgd (momentum 0, no clipping) and for each SAM rule with
# its defaults otherwise (no final head tuning; fedsam..fedsmoo: gradient clipping 10 before and after the ascent; mofedsam,
# fedfsa: the momentum term from round 2; fedspeed, fedsmoo: the prox term and the server's h_i).
# One thread, rules interleaved within each repeat so machine drift hits all alike. The figure per run
# is the median over rounds 2..11 of train_s + aggregate_s from timing.csv.
# Usage: scripts/bench_sam_step.sh [REPEATS]   (default 3; needs build/bastion)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats="${1:-3}"
rules="${BENCH_RULES:-sgd fedsam mofedsam fedfsa fedspeed fedsmoo}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

round_seconds() {  # median of train_s + aggregate_s over rounds 2..11 of a timing.csv
  awk -F, 'NR > 2 && NR < 13 { print $2 + $3 }' "$1" | sort -g | awk '{ v[NR] = $1 } END { print (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }'
}

printf "%-9s %-7s %s\n" rule repeat s_per_round
for r in $(seq 1 "$repeats"); do
  for rule in $rules; do
    dir="$out/$rule-$r"
    tune=()  # the SAM family's final head tuning is evaluation, not a round: off
    [ "$rule" != sgd ] && tune=(--set "clients.$rule.tune=none")
    ${BASTION_BIN:-build/bastion} run configs/bench/fl-round-rules.toml --quiet --out "$dir" --threads 1 \
      --set "clients.rule=$rule" --set "clients.$rule.epochs=2" --set "clients.$rule.batch=64" \
      --set "clients.$rule.lr=0.01" --set "clients.$rule.momentum=0" "${tune[@]}" > /dev/null
    printf "%-9s %-7s %s\n" "$rule" "$r" "$(round_seconds "$dir/timing.csv")"
  done
done
