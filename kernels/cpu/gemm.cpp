#include "kernels/cpu/gemm.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "tensor/error.h"

#ifdef BASTION_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace bastion {

namespace {

// Block sizes of the fallback: a (kBlockK x kBlockN) panel of op(B) is packed contiguous so the inner
// loop streams it with unit stride; 256 x 512 floats = 512 KiB fits the 2 MiB L2 of the build machine.
constexpr int64_t kBlockK = 256;
constexpr int64_t kBlockN = 512;

void scale_c(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    float* row = C + i * ldc;
    if (beta == 0.0f) {
      std::fill_n(row, N, 0.0f);
    } else if (beta != 1.0f) {
      for (int64_t j = 0; j < N; ++j) row[j] *= beta;
    }
  }
}

}  // namespace

void gemm_blocked_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                      int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  scale_c(M, N, beta, C, ldc);
  if (M == 0 || N == 0 || K == 0 || alpha == 0.0f) return;
  std::vector<float> packed_b(static_cast<size_t>(kBlockK * kBlockN));
  for (int64_t k0 = 0; k0 < K; k0 += kBlockK) {
    const int64_t kb = std::min(kBlockK, K - k0);
    for (int64_t j0 = 0; j0 < N; j0 += kBlockN) {
      const int64_t nb = std::min(kBlockN, N - j0);
      for (int64_t k = 0; k < kb; ++k)
        for (int64_t j = 0; j < nb; ++j)
          packed_b[k * nb + j] = trans_b ? B[(j0 + j) * ldb + (k0 + k)] : B[(k0 + k) * ldb + (j0 + j)];
      for (int64_t i = 0; i < M; ++i) {
        float* c_row = C + i * ldc + j0;
        for (int64_t k = 0; k < kb; ++k) {
          const float a = alpha * (trans_a ? A[(k0 + k) * lda + i] : A[i * lda + (k0 + k)]);
          const float* b_row = packed_b.data() + k * nb;
          for (int64_t j = 0; j < nb; ++j) c_row[j] += a * b_row[j];
        }
      }
    }
  }
}

bool gemm_has_openblas() {
#ifdef BASTION_HAVE_OPENBLAS
  return true;
#else
  return false;
#endif
}

void gemm_openblas_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                       int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
#ifdef BASTION_HAVE_OPENBLAS
  if (M == 0 || N == 0) return;
  if (K == 0) {  // BLAS leaves C untouched for K = 0 only when beta = 1; make beta = 0 assign.
    scale_c(M, N, beta, C, ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda), B,
              static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
#else
  BASTION_FAIL("gemm_openblas_cpu: built without OpenBLAS");
#endif
}

void gemm_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
#ifdef BASTION_HAVE_OPENBLAS
  gemm_openblas_cpu(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
  gemm_blocked_cpu(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

void set_num_threads(int threads) {
  BASTION_CHECK(threads >= 1, "thread count must be at least 1, got ", threads);
  omp_set_num_threads(threads);
#ifdef BASTION_HAVE_OPENBLAS
  openblas_set_num_threads(threads);
#endif
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace bastion
