// gemm: C = alpha * op(A) @ op(B) + beta * C, row-major, float32.
// op(A) is (M, K): A is (M, K) with lda >= K, or (K, M) with lda >= M when trans_a.
// op(B) is (K, N): B is (K, N) with ldb >= N, or (N, K) with ldb >= K when trans_b.
// C is (M, N) with ldc >= N. beta = 0 ASSIGNS C (its old contents may be NaN); beta = 1 accumulates.
// Three implementations, kept in agreement by tests/test_kernels_cpu_gemm.cpp:
//   gemm_openblas_cpu  cblas_sgemm (only when built with OpenBLAS)
//   gemm_blocked_cpu   a plain cache-blocked fallback, always built
//   gemm_small_cpu     AVX-512 or AVX2, unpacked, for small-batch linear layers (kernels/cpu/gemm_small.h)
// gemm_cpu takes the small path for the shapes where bench/RESULTS.md's ladders measured it faster (the
// rules, one per instruction set, are in gemm.cpp; never on a CPU without AVX2 + FMA), else OpenBLAS when
// present. Threads: OpenBLAS itself always runs single-threaded
// (its threaded driver sums in a thread-count-dependent order); gemm_cpu splits C into shape-determined
// panels over set_num_threads() OpenMP threads instead, so results are bitwise independent of the thread
// count. The blocked version is single-threaded (it is a fallback and a test oracle).
#pragma once

#include <cstdint>

namespace bastion {

void gemm_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void gemm_blocked_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                      int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
// C = op(A) @ op(B) + beta * C on the calling thread alone (alpha 1), OpenBLAS where the build has it, else
// gemm_blocked_cpu: for kernels that run one GEMM per OpenMP thread on shapes fixed by the layer.
void gemm_one_thread_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                         const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
bool gemm_has_openblas();
void gemm_openblas_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                       int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Debian's OpenBLAS 0.3.21 does not recognise some recent Xeons (this project's CI and benchmark
// machines among them: virtualised Sapphire Rapids) and falls back to its SSE3 "Prescott" kernels,
// which run LeNet's GEMMs 2-3x slower than its AVX-512 "SkylakeX" ones (bench/RESULTS.md).
// OpenBLAS reads OPENBLAS_CORETYPE only when it is loaded, so a program that wants the fast kernels
// calls this first thing in main(): when the environment does not set OPENBLAS_CORETYPE and OpenBLAS
// fell back to a core older than the CPU supports, it sets the variable and re-executes the program
// (once; on failure it returns and the program runs with the slow kernels). Returns the core name
// OpenBLAS uses ("none" without OpenBLAS).
const char* gemm_select_blas_core(char** argv);

// Threads used by Bastion's own OpenMP loops (gemm_cpu's panels included) in this thread. Kernels
// parallelise over independent outputs only, so results do not depend on this number.
void set_num_threads(int threads);
int num_threads();

}  // namespace bastion
