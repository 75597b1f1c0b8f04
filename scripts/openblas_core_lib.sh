# shellcheck shell=bash
# Sourced by the scripts that time PyTorch beside Bastion (bench/fedfsa_round_vs_pytorch.sh,
# scripts/bench_speed.sh; bench/run_all.sh reads the detected core), so both sides run OpenBLAS's same kernels.
#   openblas_twin_core PYTHON   prints the OPENBLAS_CORETYPE Bastion's programs run with: the one set in the
#                               environment, else what gemm_select_blas_core (kernels/cpu/gemm.cpp) picks
#                               where OpenBLAS falls back on a CPU it does not know (Prescott, Core2, Nehalem,
#                               Unknown -> SkylakeX with AVX-512, Haswell with AVX2); empty where OpenBLAS's
#                               own detection stands. Debian's PyTorch links the same libopenblas.
#   openblas_detected_core PYTHON   what OpenBLAS detects by itself
# Why: on an Emerald Rapids Xeon (model 207, unknown to OpenBLAS 0.3.21) Debian's PyTorch ran on the
# Prescott kernels, 29 GFLOP/s for cnn-fedfsa's fc2 forward (48 x 1024 x 1024) against 69 with SkylakeX
# (bench/RESULTS.md, 2026-11-29), while Bastion switched itself to SkylakeX.

openblas_detected_core() {
  "$1" -c "import ctypes; l = ctypes.CDLL('libopenblas.so.0'); l.openblas_get_corename.restype = ctypes.c_char_p
print(l.openblas_get_corename().decode())" 2>/dev/null || echo unknown
}

openblas_twin_core() {
  if [ -n "${OPENBLAS_CORETYPE:-}" ]; then echo "$OPENBLAS_CORETYPE"; return; fi
  case "$(openblas_detected_core "$1")" in
    Prescott | Core2 | Nehalem | Unknown)
      if grep -qw avx512f /proc/cpuinfo; then echo SkylakeX; elif grep -qw avx2 /proc/cpuinfo; then echo Haswell; fi ;;
  esac
}
