#!/usr/bin/env bash
#   scripts/gpu_checks.sh [all | profile | ab OLD_BUNDLE | fl | presets | server-pool]
# Runs on the lent GPU machine, over the bundle that scripts/gpu_bundle.sh made here: the CUDA test suite,
# the GEMM and convolution ladders, the ResNet18 train step beside PyTorch eager, LeNet on Fashion-MNIST
# with --device cuda, and compute-sanitizer over the agreement tests. One log per step under $OUT
# (or ./gpu-out); a summary table last. Each step has its own time limit so one slow step cannot eat
# the lease.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out" /tmp/gpu
rm -f "$out/summary.log"
export PATH="$PATH:/usr/local/cuda/bin"
tar -xJf "$root/.gpu/bundle.tar.xz" -C /tmp/gpu || exit 2
lib_dir_of() { local f; f=$(find /usr /opt -name "$1" 2>/dev/null | head -1); [ -n "$f" ] && dirname "$f"; }
export LD_LIBRARY_PATH="/tmp/gpu/lib:$(lib_dir_of 'libcudnn_cnn.so.9*'):$(lib_dir_of 'libcublas.so.13*'):/usr/local/cuda/lib64"
bin=/tmp/gpu/bin
step() {  # step NAME SECONDS COMMAND...: appends to $out/NAME.log, records the exit status
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "### $*" >> "$out/$name.log"
  timeout "$limit" "$@" >> "$out/$name.log" 2>&1
  local rc=$?
  printf '%-10s rc %3d  %4d s  %s\n' "$name" "$rc" $((SECONDS - t0)) "$*" | tee -a "$out/summary.log"
}
{ nvidia-smi; nvcc --version; echo "commit $(cat "$root/.gpu/commit")"; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH";
  ldd $bin/bench_conv $bin/bench_gemm | grep -E 'cud|cublas|not found'; } > "$out/env.log" 2>&1
# The CLI tests run the binary at the path it was built at here (BASTION_BINARY), /work/main/build.
built_at=$(cat "$root/.gpu/built_at" 2>/dev/null || echo "$root/build/bastion")
[ -e "$built_at" ] || { mkdir -p "$(dirname "$built_at")" && ln -s "$bin/bastion" "$built_at"; }
# Random bytes in CIFAR-10's binary format under /tmp/cifar, for timing only: CIFAR-10 (163 MB) is larger
# than what travels to this machine, and a round's time does not depend on the pixels.
random_cifar() {
  python3 - <<'PY'
import os, numpy as np
d = "/tmp/cifar/cifar-10-batches-bin"; os.makedirs(d, exist_ok=True); rng = np.random.default_rng(1)
for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
    rows = rng.integers(0, 256, size=(10000, 3073), dtype=np.uint8); rows[:, 0] %= 10
    rows.tofile(os.path.join(d, name))
PY
}
if [ "${1:-all}" = presets ]; then  # the GPU-scale presets' device cost (issue 36): 2 rounds of cells
  step tests 120 $bin/bastion_tests --gtest_filter='Cuda*:FlDevice.*:*SavesCudaTensors*' --gtest_brief=1
  random_cifar
  preset_cost() {  # preset_cost NAME SECONDS ARGS...: `bastion reproduce` on the device; every run's timing.csv kept
    local name=$1 limit=$2; shift 2
    step presets "$limit" $bin/bastion reproduce "$@" --seeds 1 --device cuda --data-dir /tmp/cifar --overwrite \
      --set rounds=2 --set eval.every=2 --out "/tmp/preset-$name"
    for t in /tmp/preset-"$name"/runs/*/timing.csv; do
      [ -f "$t" ] && cp "$t" "$out/timing-$name-$(basename "$(dirname "$t")").csv"
    done
  }
  preset_cost fedcpa 200 fedcpa-table3 --row fedcpa --row no-defense
  preset_cost fedcap 150 fedcap-table3-cifar10 --row sf
  cat "$out/summary.log"; exit 0
fi
if [ "${1:-all}" = server-pool ]; then  # FedCPA's host-side server step with 1 and 8 threads, interleaved
  random_cifar
  for round in 1 2; do
    for threads in 1 8; do
      step pool 120 $bin/bastion reproduce fedcpa-table3 --row fedcpa --seeds 1 --device cuda --data-dir /tmp/cifar \
        --overwrite --set rounds=2 --set eval.every=2 --threads "$threads" --out "/tmp/pool-$threads-$round"
      cp /tmp/pool-"$threads-$round"/runs/*/timing.csv "$out/timing-threads$threads-$round.csv" 2>/dev/null
    done
  done
  cat "$out/summary.log"; exit 0
fi
if [ "${1:-all}" = ab ]; then  # ab OLD_BUNDLE: ResNet18 step and 4096^3 GEMM rungs 3 and 4, interleaved
  mkdir -p /tmp/gpu-old && tar -xJf "$2" -C /tmp/gpu-old || exit 2
  step tests 120 $bin/bastion_tests --gtest_filter='Cuda*' --gtest_brief=1
  for round in 1 2 3; do
    for b in /tmp/gpu-old/bin $bin; do
      for precision in fp32 tf32; do step train 45 $b/bench_train_step resnet18 128 30 $precision; done
      for rung in 3 4; do step gemm 30 $b/bench_gemm $rung; done
    done
  done
  exit 0
fi
if [ "${1:-all}" = fl ]; then  # federated runs on the device (issue 36): tests, then the FL round beside PyTorch
  { find / -maxdepth 6 -iname '*cifar-10*' -not -path '/proc/*' 2>/dev/null | head -5; } > "$out/cifar-search.log"
  step tests 300 $bin/bastion_tests --gtest_filter='Cuda*:FlDevice.*:*SavesCudaTensors*' --gtest_brief=1
  fl_round() {  # fl_round NAME SECONDS SETTINGS...: configs/bench/fl-round.toml on the device, timing.csv kept
    local name=$1 limit=$2; shift 2
    step flround "$limit" $bin/bastion run "$root/configs/bench/fl-round.toml" --device cuda --quiet --overwrite \
      --out "/tmp/fl-$name" "$@"
    cp "/tmp/fl-$name/timing.csv" "$out/timing-$name.csv" 2>/dev/null
    cp "/tmp/fl-$name/rounds.csv" "$out/rounds-$name.csv" 2>/dev/null
  }
  fl_round lenet 120 --data-dir "$root/.gpu" --set rounds=8
  step flround 120 python3 "$root/bench/reference/pytorch_cuda_fl_round.py" --model lenet --data "$root/.gpu/fashion-mnist" --rounds 6
  step flround 120 python3 "$root/bench/reference/pytorch_cuda_fl_round.py" --model lenet --data "$root/.gpu/fashion-mnist" --rounds 6 --data-on host
  random_cifar  # ResNet18 on random CIFAR-10-format files
  fl_round resnet18 300 --data-dir /tmp/cifar --set data.dataset=cifar10 --set model.name=resnet18 \
    --set data.max_per_client=500 --set rounds=4
  step flround 240 python3 "$root/bench/reference/pytorch_cuda_fl_round.py" --model resnet18 --rounds 3
  cat "$out/summary.log"; exit 0
fi
if [ "${1:-all}" = profile ]; then  # per-kernel GPU time of the ResNet18 step (6 steps: 5 warm-up + 1)
  step tests 120 $bin/bastion_tests --gtest_filter='CudaTraining.*' --gtest_brief=1
  step train 45 $bin/bench_train_step resnet18 32 30 fp32
  step profile 240 ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
    $bin/bench_train_step resnet18 128 1 fp32
  # GPU milliseconds per training step by kernel (the 6 profiled steps / 6), largest first.
  awk '/Invocations/ { name = $0; sub(/^ +(void )?/, "", name); sub(/\(.*/, "", name); gsub(/unnamed>::/, "", name);
                       calls = $NF; next }
       /gpu__time_duration.sum/ && name != "" { f = $2 == "ns" ? 1e-6 : $2 == "us" ? 1e-3 : 1;
                       ms[name] += $5 * f * calls / 6; n[name] += calls / 6; total += $5 * f * calls / 6; name = "" }
       END { for (k in ms) printf "%9.3f ms %5d  %s\n", ms[k], n[k], k; printf "%9.3f ms total\n", total }' \
    "$out/profile.log" | sort -rn | tee "$out/profile-table.log"
  cat "$out/summary.log"; exit 0
fi
step tests 120 $bin/bastion_tests --gtest_filter='Cuda*:*SavesCudaTensors*' --gtest_brief=1
step gemm 45 $bin/bench_gemm all
step gemm 45 $bin/bench_gemm all 1024 1024 1024
step gemm 45 $bin/bench_gemm all 2048 2048 2048
step gemm 45 $bin/bench_gemm all 64 576 131072  # ResNet18's first-stage weight gradient (split K)
step conv 60 $bin/bench_conv all all
step train 45 $bin/bench_train_step resnet18 128 30 fp32
step train 45 $bin/bench_train_step resnet18 128 30 tf32
step train 60 python3 "$root/bench/reference/pytorch_cuda_train_step.py" --batch 128 --steps 30
step train 60 python3 "$root/bench/reference/pytorch_cuda_train_step.py" --batch 128 --steps 30 --tf32
step train 60 $bin/bastion train --dataset fmnist --model lenet --epochs 3 --device cuda --data-dir "$root/.gpu"
step tests 90 compute-sanitizer --tool memcheck --error-exitcode 9 $bin/bastion_tests \
  --gtest_filter='CudaAgreement.*' --gtest_brief=1
cat "$out/summary.log"
