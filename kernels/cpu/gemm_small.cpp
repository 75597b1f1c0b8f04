// gemm_small: which instruction set's small-batch GEMM this CPU runs (contract in gemm_small.h). Compiled
// with the build's own flags: the instruction-set files are the only ones built for AVX2 or AVX-512.
#include "kernels/cpu/gemm_small.h"

#include <cstdio>
#include <cstdlib>

namespace bastion {

void gemm_small_unsupported(bool trans_a, bool trans_b) {
  std::fprintf(stderr, "bastion internal error: gemm_small_cpu called for trans_a %d trans_b %d\n", trans_a, trans_b);
  std::abort();
}

bool gemm_small_supports(bool trans_a, bool trans_b) { return !(trans_a && trans_b); }

GemmSmallIsa gemm_small_isa() {
  static const GemmSmallIsa isa = gemm_small_avx512_available() ? GemmSmallIsa::avx512
                                  : gemm_small_avx2_available() ? GemmSmallIsa::avx2
                                                                : GemmSmallIsa::none;
  return isa;
}

bool gemm_small_available() { return gemm_small_isa() != GemmSmallIsa::none; }

void gemm_small_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                    int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  switch (gemm_small_isa()) {
    case GemmSmallIsa::avx512:
      gemm_small_avx512_cpu(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
      return;
    case GemmSmallIsa::avx2:
      gemm_small_avx2_cpu(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
      return;
    case GemmSmallIsa::none:
      break;
  }
  std::fprintf(stderr, "bastion internal error: gemm_small_cpu called on a CPU without AVX2 + FMA\n");
  std::abort();
}

}  // namespace bastion
