#include "kernels/cpu/gemm.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_small.h"

#include <omp.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
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

// gemm_cpu's parallel split (OpenBLAS build): C is cut into panels of kPanelColumns columns (or, when
// C is narrow, kPanelRows rows); products under kMinPanelWork multiply-adds stay one call, where the
// split would cost more than it gains. All three depend on nothing but the shape.
constexpr int64_t kPanelColumns = 512;
constexpr int64_t kPanelRows = 128;
constexpr int64_t kMinPanelWork = int64_t{1} << 18;

// When gemm_cpu takes the AVX-512 small-batch path (kernels/cpu/gemm_small.h) instead of OpenBLAS: a
// linear layer's three GEMMs at a batch of at most kSmallBatch rows, where the ladder in bench/RESULTS.md
// ("The small-batch GEMM ladder", 2026-11-28, Intel Xeon) measured it faster. There it won on all of
// cnn-fedfsa's fc1 and fc2 GEMMs at batch 48 and 10, and lost where a layer is thin: fc3's 10 outputs
// (forward N = 10, input gradient K = 10) and the weight gradient of a batch of 10 rows (K = 10), whose
// blocks are mostly edge and epilogue. So the batch side is at most kSmallBatch and the other two
// dimensions at least kSmallMinWidth. The weight gradient only when it is assigned (beta = 0): added into
// the gradient, as linear layers do (beta = 1), OpenBLAS was as fast or faster (fc2 0.85-0.91x, fc1
// 0.95-1.04x, the .bwd_weight_acc rows); at beta 0 OpenBLAS zeroes C in a pass of its own and loses.
constexpr int64_t kSmallBatch = 64;
constexpr int64_t kSmallMinWidth = 32;
// The forward (y = x W^T) also up to kSmallForwardRows rows when the layer is at least kSmallForwardMinDepth
// deep: the evaluation's batches of 128 and their tails. bench_kernels, 2026-11-29 (bench/RESULTS.md, "The
// evaluation's forwards on the small path"): the small path 1.15-1.33x as fast as OpenBLAS on fc2 at 128 and
// 82 rows, 1.25-1.27x on mlp's and LeNet's fc1 at 128, but 0.82x on cnn-fedfsa's fc1 (K = 192) in one of two
// runs; a FedFSA Table 1 round's evaluation 1.13x.
constexpr int64_t kSmallForwardRows = 128;
constexpr int64_t kSmallForwardMinDepth = 256;

// On AVX2 (no AVX-512), the ladder of 2026-11-30 (bench/RESULTS.md, "The small-batch GEMM on AVX2", AMD EPYC
// Zen 3) measured the dot form (NT) faster than OpenBLAS's Haswell kernels where op(A) has at most 48 rows and
// K is deep: cnn-fedfsa's fc2 and fc3 forwards at batch 48 (1.20x, 1.98x) and 10 (1.52x), the convolutions'
// weight gradients with 6-32 output channels (1.07-3.96x); even or slower at 64 rows (mlp and LeNet fc1
// forwards 1.03x and 0.97x, 64-channel weight gradients 0.84-0.87x) and at K = 192 (fc1, 0.81x). Its broadcast
// form (NN, TN) lost on the large shapes (fc2's input gradient 0.87x, weight gradient 0.67x), so it is not taken.
constexpr int64_t kAvx2DotRows = 48;
constexpr int64_t kAvx2DotMinDepth = 256;

bool avx512_path_wins(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float beta) {
  if (!trans_a && trans_b)  // y = x W^T
    return (M <= kSmallBatch || (M <= kSmallForwardRows && K >= kSmallForwardMinDepth)) && N >= kSmallMinWidth &&
           K >= kSmallMinWidth;
  if (!trans_a) return M <= kSmallBatch && N >= kSmallMinWidth && K >= kSmallMinWidth;      // dx = dy W
  return beta == 0.0f && K <= kSmallBatch && K >= kSmallMinWidth && M >= kSmallMinWidth &&  // dW = dy^T x
         N >= kSmallMinWidth;
}

bool small_path_wins(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float beta) {
  if (!gemm_small_supports(trans_a, trans_b)) return false;
  switch (gemm_small_isa()) {
    case GemmSmallIsa::avx512:
      return avx512_path_wins(trans_a, trans_b, M, N, K, beta);
    case GemmSmallIsa::avx2:
      return !trans_a && trans_b && M <= kAvx2DotRows && K >= kAvx2DotMinDepth;
    case GemmSmallIsa::none:
      break;
  }
  return false;
}

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

void gemm_one_thread_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                         const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (gemm_has_openblas()) {
    gemm_openblas_cpu(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
  } else {
    gemm_blocked_cpu(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
  }
}

void gemm_openblas_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                       int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
#ifdef BASTION_HAVE_OPENBLAS
  // OpenBLAS's own threads would make results depend on the thread count (see gemm_cpu), so it runs
  // single-threaded, set once, here, before the first call.
  static const bool single_threaded = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)single_threaded;
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

// Deterministic threading: OpenBLAS 0.3.21's threaded driver changes the order of the K sum with the
// thread count for some kernels and shapes (on this machine's default Prescott kernels, 1 vs 2 threads
// differ in the last bits for 3x57344x72 and 10x10x100000; tests/test_kernels_cpu.cpp's determinism test
// failed). So OpenBLAS always runs single-threaded and the parallelism is ours: C is split into panels
// whose bounds depend only on the shape, each panel is one sequential OpenBLAS call, and the result is
// the same whichever thread computes a panel and however many there are.
void gemm_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (alpha != 0.0f && small_path_wins(trans_a, trans_b, M, N, K, beta)) {  // splits C into panels itself
    gemm_small_cpu(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
#ifdef BASTION_HAVE_OPENBLAS
  const bool by_columns = N >= 2 * kPanelColumns, by_rows = !by_columns && M >= 2 * kPanelRows;
  if (M * N * K < kMinPanelWork || (!by_columns && !by_rows)) {
    gemm_openblas_cpu(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  if (by_columns) {  // columns j0.. of C need columns j0.. of op(B)
    const int64_t panels = (N + kPanelColumns - 1) / kPanelColumns;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t j0 = p * kPanelColumns, width = std::min(kPanelColumns, N - j0);
      gemm_openblas_cpu(trans_a, trans_b, M, width, K, alpha, A, lda, trans_b ? B + j0 * ldb : B + j0, ldb, beta,
                        C + j0, ldc);
    }
  } else {  // rows i0.. of C need rows i0.. of op(A)
    const int64_t panels = (M + kPanelRows - 1) / kPanelRows;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t i0 = p * kPanelRows, height = std::min(kPanelRows, M - i0);
      gemm_openblas_cpu(trans_a, trans_b, height, N, K, alpha, trans_a ? A + i0 : A + i0 * lda, lda, B, ldb, beta,
                        C + i0 * ldc, ldc);
    }
  }
#else
  gemm_blocked_cpu(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

const char* gemm_select_blas_core(char** argv) {
#ifdef BASTION_HAVE_OPENBLAS
  const char* core = openblas_get_corename();
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || argv == nullptr) return core;
  const bool fell_back = std::strcmp(core, "Prescott") == 0 || std::strcmp(core, "Core2") == 0 ||
                         std::strcmp(core, "Nehalem") == 0 || std::strcmp(core, "Unknown") == 0;
  const char* wanted = cpu_has_avx512f() ? "SkylakeX" : cpu_has_avx2_fma() ? "Haswell" : nullptr;
  if (!fell_back || wanted == nullptr) return core;
  setenv("OPENBLAS_CORETYPE", wanted, 1);
  execv("/proc/self/exe", argv);
  return core;  // exec failed: keep running with the detected kernels
#else
  (void)argv;
  return "none";
#endif
}

void set_num_threads(int threads) {
  BASTION_CHECK(threads >= 1, "thread count must be at least 1, got ", threads);
  omp_set_num_threads(threads);  // OpenBLAS stays single-threaded: gemm_cpu splits the work itself
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace bastion
