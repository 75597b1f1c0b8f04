#!/usr/bin/env bash
# Bastion's FedFSA Table 1 round beside its PyTorch twin (issue 38's side-by-side figure), one thread
# each, interleaved (Bastion, PyTorch, Bastion, PyTorch, ...) so machine drift hits both alike.
#   Bastion: `bastion reproduce fedfsa-table1 --row FedFSA --seeds 1 --set rounds=ROUNDS --threads 1`
#            (both cells, Pat(5) and Dir(0.5)); the figure per run and cell is the median over rounds
#            2..ROUNDS-1 of train_s + aggregate_s (timing.csv), as scripts/ab_preset_round.sh reads it:
#            round 1 has no momentum term and warms caches, the last round holds the head tuning, and
#            eval_s (the per-round personalised evaluation of all 100 clients) is left out.
#   PyTorch: bench/reference/pytorch_fedfsa_round.py --threads 1 --warmup 1 --rounds ROUNDS-2 (the same
#            client work: 10 clients x 110 SAM steps, radii, momentum term, clipping, Top-C, FedAvg).
# Prints the CPU, the load average before and after, the checks (parameter count of both, SAM steps per
# round of both: Bastion's from its client_notes.csv and partition.csv), every figure, then the medians
# over repeats and the ratio PyTorch / Bastion (> 1: Bastion is faster). Figures are only worth quoting
# on a quiet machine (the load average is printed for that reason).
# Both sides run OpenBLAS's same kernels: the twin gets the OPENBLAS_CORETYPE that Bastion's CLI picks for
# itself (scripts/openblas_core_lib.sh says why).
# Usage: bench/fedfsa_round_vs_pytorch.sh [REPEATS] [ROUNDS]   (defaults 3 and 4)
#   BASTION_BIN (default build/bastion), PYTHON (default /usr/bin/python3: Debian's, with torch 1.13),
#   TWIN_DATA (fmnist | random; default fmnist), DATA_DIR (default /usr/share/datasets/fashion-mnist)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats="${1:-3}" rounds="${2:-4}"
[ "$rounds" -ge 3 ] || { echo "fedfsa_round_vs_pytorch: ROUNDS must be at least 3" >&2; exit 2; }
bin="${BASTION_BIN:-build/bastion}" python="${PYTHON:-/usr/bin/python3}"
data="${TWIN_DATA:-fmnist}" data_dir="${DATA_DIR:-/usr/share/datasets/fashion-mnist}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

# shellcheck source=scripts/preset_round_lib.sh
. scripts/preset_round_lib.sh  # median, preset_round (Bastion's side, as scripts/ab_preset_round.sh times it)
# shellcheck source=scripts/openblas_core_lib.sh
. scripts/openblas_core_lib.sh  # openblas_detected_core, openblas_twin_core

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(grep -c '^processor' /proc/cpuinfo) hardware threads$(grep -qw avx512f /proc/cpuinfo && echo ', AVX-512'); one thread per side"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
detected_core="$(openblas_detected_core "$python")" twin_core="$(openblas_twin_core "$python")"
echo "OpenBLAS kernels: detected $detected_core; both sides run ${twin_core:-$detected_core}"
echo "Bastion: $bin ($("$bin" --version 2>/dev/null | head -1)); PyTorch: $python, torch $("$python" -c 'import torch; print(torch.__version__)')"

# Check 1: parameter counts (Bastion's from `bastion train`, which prints it before training).
bastion_params="$("$bin" train --model cnn-fedfsa --dataset fmnist --epochs 0 --limit-train 48 2>&1 |
  sed -n 's/.*, \([0-9]*\) parameters,.*/\1/p' | head -1)"

for repeat in $(seq 1 "$repeats"); do
  preset_round bastion "$repeat" "$bin" fedfsa-table1 FedFSA "$rounds" "$out/bastion-$repeat" "$out/figures"
  env ${twin_core:+OPENBLAS_CORETYPE=$twin_core} "$python" bench/reference/pytorch_fedfsa_round.py --threads 1 \
    --warmup 1 --rounds $((rounds - 2)) --data "$data" --data-dir "$data_dir" > "$out/torch-$repeat.log"
  figure="$(sed -n 's/^fedfsa workers 1 x threads 1: median \([0-9.]*\) s\/round.*/\1/p' "$out/torch-$repeat.log")"
  echo "pytorch $repeat twin-$data $figure" | tee -a "$out/figures"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "PyTorch twin, repeat 1:"
sed -n 's/^round /  round /p' "$out/torch-1.log"

# Check 2: the work. Bastion's SAM steps in round 2 from the sampled clients (client_notes.csv) and their
# sizes (partition.csv): epochs x ceil(size / batch) each (drop_last = false in the preset).
twin_params="$(sed -n 's/.*: \([0-9]*\) parameters.*/\1/p' "$out/torch-1.log" | head -1)"
twin_steps="$(sed -n 's/^steps per round: \([0-9 ]*\) (.*/\1/p' "$out/torch-1.log")"
echo
echo "check: parameters  Bastion $bastion_params, twin $twin_params: $([ "$bastion_params" = "$twin_params" ] && echo same || echo DIFFERENT)"
for run in "$out"/bastion-1/runs/*/; do
  cfg="$run/config.toml"
  epochs="$(sed -n '/^\[clients.fedfsa\]/,/^\[/ s/^epochs = //p' "$cfg")"
  batch="$(sed -n '/^\[clients.fedfsa\]/,/^\[/ s/^batch = //p' "$cfg")"
  steps="$(awk -F, -v e="$epochs" -v b="$batch" 'FNR == NR { if (FNR > 1) size[$1] = $2; next }
    FNR > 1 && $1 == 2 { s += e * int((size[$2] + b - 1) / b); n++ } END { printf "%d (%d clients)", s, n }' \
    "$run/partition.csv" "$run/client_notes.csv")"
  echo "check: SAM steps in round 2, $(basename "$run"): Bastion $steps; twin per round: $twin_steps"
  echo "check: Top-C chosen in round 1, $(basename "$run"): Bastion $(awk -F, 'NR > 1 && $1 == 1 { n[$3]++ }
    END { for (k in n) printf "%s%s x%d", (c++ ? ", " : ""), k, n[k] }' "$run/client_notes.csv")"
done

printf "\n%-16s %10s %10s %16s\n" cell Bastion_s PyTorch_s PyTorch/Bastion
torch_s="$(awk '$1 == "pytorch" { print $4 }' "$out/figures" | median)"
for cell in $(awk '$1 == "bastion" { print $3 }' "$out/figures" | sort -u); do
  bastion_s="$(awk -v c="$cell" '$1 == "bastion" && $3 == c { print $4 }' "$out/figures" | median)"
  printf "%-16s %10s %10s %16.2f\n" "$cell" "$bastion_s" "$torch_s" "$(echo "$torch_s / $bastion_s" | bc -l)"
done
echo "(s per round: medians over $repeats repeats of each run's median over rounds 2..$((rounds - 1)); PyTorch's twin does one cell's work)"
