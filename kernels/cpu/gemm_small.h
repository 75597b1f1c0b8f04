// gemm_small: C = alpha * op(A) @ op(B) + beta * C, row-major float32, the same contract as gemm_cpu
// (kernels/cpu/gemm.h: shapes, leading dimensions, beta = 0 ASSIGNS and never reads C), for the
// small-batch GEMMs of a linear layer, where one of M or K is a batch of 32-64 rows:
//   forward      y  = x @ W^T    NT  (M = batch)      dot-product blocks: 3 rows of A x 8 rows of B,
//                                                      16 lanes along K, reduced across lanes once at the end
//   dx           dx = dy @ W     NN  (M = batch)      broadcast blocks: 6 rows of C x 64 columns, one
//   weight grad  dW += dy^T @ x  TN  (K = batch)      scalar of op(A) times a 64-wide row of B per k
// The batch-sized operands (x, dy) are read where they lie, never packed. The panel of B that several blocks
// reuse (rows of W, or columns of x for dW) is stored into an L1 buffer by the first block that reads it,
// while that block computes, because rows 4 KiB apart alias in L1; no separate packing pass, no transposes.
// Stack use per thread: up to 44 KiB (broadcast) or 33 KiB (dot) of such buffers.
// TT is not supported (no layer issues it); gemm_cpu sends it to OpenBLAS.
// Each element of C is summed over k in one fixed order by one thread; threads take whole
// register blocks (shape-determined), so results are bitwise independent of set_num_threads().
// AVX-512F only: gemm_small_available() says whether it was compiled in (x86-64) and the CPU has it.
// PyTorch equivalent: torch.addmm(C, A, B, beta=, alpha=) (with .T for transposes).
#pragma once

#include <cstdint>

namespace bastion {

bool gemm_small_available();
bool gemm_small_supports(bool trans_a, bool trans_b);  // NN, TN, NT
void gemm_small_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                    int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace bastion
