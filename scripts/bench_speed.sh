#!/usr/bin/env bash
# The CPU-speed comparison of bench/RESULTS.md ("CPU speed"), in one interleaved run: the training step
# of every bench_train model at 1 thread for a BEFORE and an AFTER build and PyTorch, ROUNDS times in
# turn, then the FL round (scripts/bench_fl_round.sh for both builds, bench/reference/pytorch_fl_round.py)
# and the FL evaluation (bench_train's evaluate/*). Raw outputs go to OUT; the medians and ratios are
# read off them (bench/RESULTS.md shows the table and the command).
# Usage: scripts/bench_speed.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR OUT [ROUNDS]
#   each build dir holds bench/bench_train and bastion (Release); needs /usr/bin/python3 with torch.
# PyTorch runs OpenBLAS's kernels that Bastion runs (scripts/openblas_core_lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/openblas_core_lib.sh
. scripts/openblas_core_lib.sh
torch_core="$(openblas_twin_core /usr/bin/python3)"
before="$1" after="$2" out="$3" rounds="${4:-2}"
mkdir -p "$out"
steps='train_step/.*/threads:1'
for r in $(seq 1 "$rounds"); do
  for build in before after; do
    dir="$before"
    [ "$build" = after ] && dir="$after"
    "$dir/bench/bench_train" --benchmark_filter="$steps" --benchmark_min_time=0.5 \
      --benchmark_format=json > "$out/train_${build}_$r.json"
  done
  env ${torch_core:+OPENBLAS_CORETYPE=$torch_core} /usr/bin/python3 bench/reference/pytorch_train_step.py \
    --threads 1 --passes 3 --json > "$out/torch_$r.json"
done
"$after/bench/bench_train" --benchmark_filter='evaluate' --benchmark_min_time=1 --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true --benchmark_format=json > "$out/evaluate_after.json"
for build in before after; do
  dir="$before"
  [ "$build" = after ] && dir="$after"
  BASTION_BIN="$dir/bastion" scripts/bench_fl_round.sh "$rounds" > "$out/fl_round_$build.txt"
done
env ${torch_core:+OPENBLAS_CORETYPE=$torch_core} /usr/bin/python3 bench/reference/pytorch_fl_round.py --rounds 8 \
  --threads 1 > "$out/fl_round_torch.txt"
echo "raw results in $out"
