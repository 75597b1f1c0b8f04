#!/usr/bin/env bash
# Fuzzes the data readers, the experiment config, presets, safetensors, checkpoints and model names with
# libFuzzer + ASan + UBSan: scripts/fuzz.sh [SECONDS_PER_TARGET] (default 60).
# Configures ${FUZZ_BUILD_DIR:-build-fuzz} with clang and BASTION_FUZZ=ON (a tree configured before is used
# as it is), builds the ten targets in tests/fuzz/, and runs them ${FUZZ_JOBS:-nproc} at a time (one worker
# each) on a scratch copy of their committed corpus (tests/fuzz/corpus/<target>/ is never written to).
# Prints each target's executions from libFuzzer's final stats. Exits non-zero when any target crashed,
# leaked, hit a sanitizer report, an allocation over the limit or a timeout; the reproducer is copied to
# ${FUZZ_BUILD_DIR}/crashes/ and its path printed (replay: build-fuzz/tests/fuzz/fuzz_<target> <file>).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
build_dir="${FUZZ_BUILD_DIR:-build-fuzz}"
jobs="${FUZZ_JOBS:-$(nproc)}"
targets=(idx cifar wisdm image_folder matlab config preset safetensors checkpoint model_name)

# clang with its libFuzzer/sanitizer runtimes and LLVM's OpenMP, on top of the normal build deps.
scripts/setup.sh clang libclang-rt-14-dev libomp-14-dev

# A tree configured before (CI's sanitizer tree, which also builds the test suite) is used as it is; it
# must have BASTION_FUZZ=ON.
if [ -f "$build_dir/CMakeCache.txt" ]; then
  if ! grep -q '^BASTION_FUZZ:BOOL=ON$' "$build_dir/CMakeCache.txt"; then
    echo "fuzz.sh: $build_dir is configured without BASTION_FUZZ=ON; remove it or name another FUZZ_BUILD_DIR" >&2
    exit 2
  fi
else
  cmake -S . -B "$build_dir" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBASTION_FUZZ=ON -DBASTION_CUDA=OFF -DBASTION_MPI=OFF -DBASTION_BUILD_BENCH=OFF \
    -DBUILD_TESTING=OFF >/dev/null
fi
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]/#/fuzz_}"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$build_dir/crashes"

# One target on a scratch copy of its corpus; its exit status goes to $scratch/<target>.status.
fuzz_one() {
  local target="$1" corpus="$scratch/corpus-$1" status=0
  cp -r "tests/fuzz/corpus/$target" "$corpus"
  local args=("$corpus" -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -timeout=30 -workers=1
              -print_final_stats=1 -artifact_prefix="$scratch/$target-")
  [ -f "tests/fuzz/$target.dict" ] && args+=(-dict="tests/fuzz/$target.dict")
  "$build_dir/tests/fuzz/fuzz_$target" "${args[@]}" >"$scratch/$target.log" 2>&1 || status=$?
  echo "$status" >"$scratch/$target.status"
}

# $jobs targets at a time (one core each): the same seconds per target as one after another, in
# 1/$jobs of the wall time (CI's 2 cores: 10 targets x 60 s in about 5 min instead of 10).
echo "== ${#targets[@]} fuzz targets, ${seconds}s each, $jobs at a time"
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  fuzz_one "$target" &
done
wait

failed=()
summary=()
for target in "${targets[@]}"; do
  status="$(cat "$scratch/$target.status" 2>/dev/null || echo "none (the runner died)")"
  executions="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$scratch/$target.log" | grep -o '[0-9]*$' || true)"
  summary+=("fuzz_$target: ${executions:-?} executions, exit $status")
  if [ "$status" != 0 ]; then
    failed+=("$target")
    echo "== fuzz_$target FAILED (exit $status):"
    tail -n 60 "$scratch/$target.log"
    for artifact in "$scratch/$target-"*; do
      [ -e "$artifact" ] || continue
      cp "$artifact" "$build_dir/crashes/"
      echo "reproducer: $build_dir/crashes/$(basename "$artifact")"
    done
  fi
done
printf '%s\n' "${summary[@]}"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzzing FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzzing passed: no crash in ${#targets[@]} targets"
