// gemm_small: C = alpha * op(A) @ op(B) + beta * C, row-major float32, the same contract as gemm_cpu
// (kernels/cpu/gemm.h: shapes, leading dimensions, beta = 0 ASSIGNS and never reads C), for the
// small-batch GEMMs of a linear layer, where one of M or K is a batch of 32-64 rows:
//   forward      y  = x @ W^T    NT  (M = batch)      dot-product blocks: MR rows of A x NR rows of B, the
//                                                      vector's lanes along K, reduced across lanes once at the end
//   dx           dx = dy @ W     NN  (M = batch)      broadcast blocks: MR rows of C x NV vectors of columns,
//   weight grad  dW += dy^T @ x  TN  (K = batch)      one scalar of op(A) times a row of B's panel per k
// The batch-sized operands (x, dy) are read where they lie, never packed. The panel of B that several blocks
// reuse (rows of W, or columns of x for dW) is stored into an L1 buffer by the first block that reads it,
// while that block computes, because rows 4 KiB apart alias in L1; no separate packing pass, no transposes.
// The blocking is written once (gemm_small_blocks.h) and instantiated for two instruction sets:
//   AVX-512F     (gemm_small_avx512.cpp)  16 lanes; dot 3 x 8, broadcast 6 x 64 columns
//   AVX2 + FMA   (gemm_small_avx2.cpp)     8 lanes; dot 3 x 4, broadcast 6 x 16 columns
// Both files are compiled for their set on every x86-64 build and chosen at run time: gemm_small_cpu runs
// the widest this CPU has (gemm_small_isa()); the other entry points name one set, for tests and benchmarks,
// and may be called only where that set's _available() says true.
// TT is not supported (no layer issues it); gemm_cpu sends it to OpenBLAS.
// Each element of C is summed over k in one fixed order by one thread; threads take whole
// register blocks (shape-determined), so results are bitwise independent of set_num_threads(). The two
// instruction sets sum in different orders (lanes of K, slice depths), so their results differ in the last bits.
// PyTorch equivalent: torch.addmm(C, A, B, beta=, alpha=) (with .T for transposes).
#pragma once

#include <cstdint>

namespace bastion {

enum class GemmSmallIsa { none, avx2, avx512 };

GemmSmallIsa gemm_small_isa();  // AVX-512F if the CPU has it, else AVX2 + FMA, else none (not x86-64 too)
bool gemm_small_available();    // gemm_small_isa() != none
bool gemm_small_supports(bool trans_a, bool trans_b);  // NN, TN, NT
void gemm_small_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                    int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

bool gemm_small_avx512_available();
void gemm_small_avx512_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
bool gemm_small_avx2_available();
void gemm_small_avx2_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                         int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Prints the trans flags and aborts: an internal error (gemm_cpu never sends TT here).
[[noreturn]] void gemm_small_unsupported(bool trans_a, bool trans_b);

}  // namespace bastion
