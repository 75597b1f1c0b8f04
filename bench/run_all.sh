#!/usr/bin/env bash
# Builds the benchmarks (Release) and runs all of them, interleaving Bastion and PyTorch, then prints the
# summary tables (bench/summarize.py). Raw outputs stay in $OUT_DIR for RESULTS.md and for re-analysis.
#
#   bench/run_all.sh                        everything (about 25 minutes on the 2-core build machine)
#   ROUNDS=1 REPS=3 bench/run_all.sh        a quick look
#
# Environment knobs (defaults in brackets):
#   BUILD_DIR [<repo>/build-bench]   OUT_DIR [$BUILD_DIR/results]   ROUNDS [3]   REPS [5]
#   KERNEL_CONFIGS ["default passive prescott"]   TRAIN_CONFIGS ["default skx skx-passive prescott"]
# A "config" is the environment BOTH engines run under (see config_env below). Bastion's benchmarks call
# gemm_select_blas_core() like the CLI, so with OPENBLAS_CORETYPE unset Bastion picks OpenBLAS's AVX-512
# "SkylakeX" kernels itself, while PyTorch keeps what Debian's OpenBLAS 0.3.21 detects (Prescott/SSE3 on
# this Xeon, which it does not know):
#   default      nothing set: each engine as a user gets it
#   skx          OPENBLAS_CORETYPE=SkylakeX for both (same BLAS kernels: the engine-to-engine comparison)
#   skx-passive  skx + OMP_WAIT_POLICY=passive (idle OpenMP workers sleep instead of spinning; decisive
#                for 2 threads when other processes share the 2 cores)
#   passive      OMP_WAIT_POLICY=passive only (kernels)
#   prescott     OPENBLAS_CORETYPE=Prescott for both: what Bastion would get without gemm_select_blas_core
#                (kernels: 1-thread GEMM and conv only)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-bench}"
OUT_DIR="${OUT_DIR:-$BUILD_DIR/results}"
ROUNDS="${ROUNDS:-3}"
REPS="${REPS:-5}"
KERNEL_CONFIGS="${KERNEL_CONFIGS:-default passive prescott}"
TRAIN_CONFIGS="${TRAIN_CONFIGS:-default skx skx-passive prescott}"
PYTHON=/usr/bin/python3  # Debian's interpreter, which has python3-torch
# shellcheck source=scripts/openblas_core_lib.sh
. "$ROOT/scripts/openblas_core_lib.sh"  # openblas_detected_core

ALL_CONFIGS="default skx skx-passive passive prescott"
config_env() {  # prints the env(1) arguments of a config
  case "$1" in
    default) echo "-u OPENBLAS_CORETYPE -u OMP_WAIT_POLICY" ;;
    skx) echo "-u OMP_WAIT_POLICY OPENBLAS_CORETYPE=SkylakeX" ;;
    skx-passive) echo "OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=passive" ;;
    passive) echo "-u OPENBLAS_CORETYPE OMP_WAIT_POLICY=passive" ;;
    prescott) echo "-u OMP_WAIT_POLICY OPENBLAS_CORETYPE=Prescott" ;;
    *) echo "unknown config $1" >&2; exit 1 ;;
  esac
}
kernel_filter() {  # the prescott config only needs the 1-thread GEMMs and convs (to show the fallback)
  case "$1" in
    prescott) echo "--benchmark_filter=^(gemm_openblas|conv_forward|conv_backward)/.*/threads:1/" ;;
    *) echo "--benchmark_filter=." ;;
  esac
}

GBENCH_FLAGS=(--benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true
              --benchmark_enable_random_interleaving=true --benchmark_out_format=json)

echo "== build ($BUILD_DIR)"
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release > /dev/null
make -C "$BUILD_DIR" -j2 bench_peak bench_kernels bench_train > /dev/null
BIN="$BUILD_DIR/bench"
mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR"/*.json

{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(lscpu | grep -o -w -E 'avx512f|avx2|fma' | sort -u | tr '\n' ' ')"
  echo "compiler: $(c++ --version | head -1)"
  echo "openblas: $(dpkg -l 'libopenblas0*' 2>/dev/null | awk '/^ii/ {print $2 " " $3}' | tr '\n' ' ')"
  echo "openblas core (default): $(openblas_detected_core "$PYTHON")"
  echo "torch: $($PYTHON -c 'import torch; print(torch.__version__)')"
  echo "google benchmark: $(dpkg -l libbenchmark-dev 2>/dev/null | awk '/^ii/ {print $3}')"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT_DIR/meta.txt"
: > "$OUT_DIR/configs.txt"
for c in $ALL_CONFIGS; do echo "- \`$c\`: env $(config_env $c)" >> "$OUT_DIR/configs.txt"; done

peak_run=0
run_peak() {
  peak_run=$((peak_run + 1))
  echo "== bench_peak ($peak_run)"
  "$BIN/bench_peak" --json | tee "$OUT_DIR/peak_$peak_run.json"
}

run_peak
for config in $KERNEL_CONFIGS; do
  echo "== bench_kernels [$config]"
  # shellcheck disable=SC2046
  env $(config_env "$config") "$BIN/bench_kernels" "${GBENCH_FLAGS[@]}" --benchmark_min_time=0.1 "$(kernel_filter "$config")" \
    --benchmark_out="$OUT_DIR/kernels_$config.json" > "$OUT_DIR/kernels_$config.txt"
done
run_peak
for round in $(seq 1 "$ROUNDS"); do
  for config in $TRAIN_CONFIGS; do
    echo "== round $round/$ROUNDS [$config]: bench_train, then PyTorch"
    # shellcheck disable=SC2046
    env $(config_env "$config") "$BIN/bench_train" "${GBENCH_FLAGS[@]}" --benchmark_min_time=0.3 \
      --benchmark_out="$OUT_DIR/train_${config}_$round.json" | grep train_step || true
    # shellcheck disable=SC2046
    env $(config_env "$config") "$PYTHON" "$ROOT/bench/reference/pytorch_train_step.py" --json \
      > "$OUT_DIR/pytorch_${config}_$round.json"
  done
done
run_peak
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT_DIR/meta.txt"

python3 "$ROOT/bench/summarize.py" "$OUT_DIR" | tee "$OUT_DIR/summary.md"
