// gemm_cuda: the contract of gemm_cpu (kernels/cpu/gemm.h) on device pointers, plus a stream:
// C = alpha * op(A) @ op(B) + beta * C, row-major float32, beta = 0 ASSIGNS C (old contents may be NaN).
//
// Precision: FP32 (default) is exact float32 arithmetic (FMA, K summed in order within a thread);
// TF32 runs the products on tensor cores with 10-bit mantissas (relative error ~1e-3, like PyTorch's
// allow_tf32), chosen with gemm_cuda_set_precision. The emulated build has no tensor cores and runs
// FP32 whatever the setting.
//
// The kernel ladder (bench/cuda/bench_gemm.cu; rung 0 there is cuBLAS):
//   1 naive        one thread per C element, K loop from global memory
//   2 smem-tiled   32x32 tiles of A and B staged in shared memory
//   3 register-2d  128x128 block tile, 8x8 outputs per thread, float4 loads, transposed A tile
//                  (gemm_cuda's FP32 path)
//   4 tf32-wmma    tensor-core tiles (nvcuda::wmma, m16n16k8 TF32), FP32 accumulate (gemm_cuda's TF32 path)
//
// Split K (rungs 3 and 4): when C has fewer than 132 tiles of 128x128 and K is deep, as in a
// convolution's weight gradient (K = batch x output positions, C = filters x C*R*S), the K range is cut
// into slices run as separate blocks, each into its own partial C, and the partials are added in slice
// order. Deterministic, but a split product sums in another order than an unsplit one.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda.h"

namespace bastion {

enum class GemmPrecision { FP32, TF32 };
void gemm_cuda_set_precision(GemmPrecision precision);
GemmPrecision gemm_cuda_precision();

void gemm_cuda(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc, CudaStream stream);

// How gemm_cuda and rungs 3 and 4 cut K for an (M, N, K) product: `slices` slices of `k_chunk` (a
// multiple of 16; the last may be shorter); slices = 1 is no split.
struct GemmSplitK {
  int slices;
  int k_chunk;
};
GemmSplitK gemm_cuda_split_k(int64_t M, int64_t N, int64_t K);

// One rung of the ladder above (1..gemm_cuda_variant_count()); same contract as gemm_cuda.
int gemm_cuda_variant_count();
const char* gemm_cuda_variant_name(int variant);
bool gemm_cuda_variant_emulated(int variant);  // false for rungs the emulator cannot run (tensor cores)
void gemm_cuda_variant(int variant, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                       const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                       CudaStream stream);

}  // namespace bastion
