// Shared pieces of gemm.cu's rung 3 (register-2d) and gemm_tf32.cu's rung 4 (TF32 wmma): the 128x128
// block's operand tiles, the split-K slice, the blend into C and the pick of a kernel instance for the
// run-time flags. Internal to those two files; the contract is kernels/cuda/gemm.h.
#pragma once

#include <cstdint>

#include "kernels/cuda/launch.h"

// nvcc needs the unroll to keep the register tiles in registers; g++ (the emulated build) warns on
// CUDA's pragma, and there it only matters for speed.
#if defined(BASTION_CUDA_EMULATION)
#define GEMM_UNROLL
#else
#define GEMM_UNROLL _Pragma("unroll")
#endif

namespace bastion::gemm_detail {

// The kernels' common signature after the host has fixed the transposes; the last two are the split-K
// slice (k_chunk, c_slab): see enter_k_slice.
using GemmKernel = void (*)(int, int, int, float, const float*, int64_t, const float*, int64_t, float, float*,
                            int64_t, int, int64_t);

// The new value of C[i][j]; C's old value is read only when beta != 0 (it may be NaN otherwise).
__device__ __forceinline__ float blend(float acc, float alpha, float beta, const float* c) {
  return beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
}

// ---- operand tiles of rungs 3 and 4 ----------------------------------------------------------------
// A (128 x 8) slice of op(A) (rows m, columns k) or of op(B)^T (rows n) is loaded by 256 threads, four
// consecutive elements each along the dimension that is contiguous in memory: K when the operand is
// "K-contiguous" (A not transposed, B transposed), else M or N. It is stored K-major, tile[k][mn], for
// both operands (A is thus transposed in shared memory), so the inner product reads 4 consecutive
// rows of C's block as one float4. Rows are 128 + 4 floats: the K-contiguous layout stores column-wise
// (tile[k4 + i][mn] for mn = 0..15 and k4 = 0, 4 in one warp), and the 4-float pad puts k4 = 4 sixteen
// banks away from k4 = 0, so those stores are conflict-free; 132 * 4 bytes also keeps rows 16-byte
// aligned for float4 and 32-byte aligned every 8 rows for wmma.
constexpr int kTileMN = 128, kTileK = 8, kTileThreads = 256, kTileStride = kTileMN + 4;

// Vector: 16-byte loads where the operand's pointer and leading dimension allow (checked on the host);
// scalar loads otherwise and at the edges of the matrix.
template <bool kContiguousK, bool kVector>
__device__ __forceinline__ float4 load_operand_quad(const float* src, int64_t ld, int extent, int K, int mn0, int k0) {
  const int t = threadIdx.x;
  const int mn = kContiguousK ? mn0 + t / 2 : mn0 + t % 32 * 4;
  const int k = kContiguousK ? k0 + t % 2 * 4 : k0 + t / 32;
  const bool line_ok = kContiguousK ? mn < extent : k < K;    // the row of memory holding the quad
  const int first = kContiguousK ? k : mn, limit = kContiguousK ? K : extent;  // along that row
  if (!line_ok) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const float* p = kContiguousK ? src + static_cast<int64_t>(mn) * ld + k : src + static_cast<int64_t>(k) * ld + mn;
  if (kVector && first + 3 < limit) return __ldg(reinterpret_cast<const float4*>(p));
  float v[4];
  GEMM_UNROLL
  for (int i = 0; i < 4; ++i) v[i] = first + i < limit ? __ldg(p + i) : 0.0f;
  return make_float4(v[0], v[1], v[2], v[3]);
}

template <bool kContiguousK>
__device__ __forceinline__ void store_operand_quad(float (*tile)[kTileStride], float4 v) {
  const int t = threadIdx.x;
  if (kContiguousK) {
    const int mn = t / 2, k = t % 2 * 4;
    tile[k][mn] = v.x;
    tile[k + 1][mn] = v.y;
    tile[k + 2][mn] = v.z;
    tile[k + 3][mn] = v.w;
  } else {
    *reinterpret_cast<float4*>(&tile[t / 32][t % 32 * 4]) = v;
  }
}

// Split K (rungs 3 and 4): block z sums only k in [z * k_chunk, min(K, (z + 1) * k_chunk)), into its own
// (M, N) slab of C, c_slab floats after the previous one; the host then adds the slabs in z order
// (gemm_split_reduce_kernel). k_chunk is a multiple of 16, so the moved operand pointers keep the
// 16-byte alignment the host checked. Only the kSplitK instances call it: with the slice arithmetic
// compiled in, the unsplit 4096^3 product ran 5 % slower on an H100 (interleaved A/B, 2026-11-26).
template <bool kTransA, bool kTransB>
__device__ __forceinline__ void enter_k_slice(int& K, const float*& A, int64_t lda, const float*& B, int64_t ldb,
                                              float*& C, int k_chunk, int64_t c_slab) {
  const int k_begin = static_cast<int>(blockIdx.z) * k_chunk;
  K = K - k_begin < k_chunk ? K - k_begin : k_chunk;
  A += kTransA ? static_cast<int64_t>(k_begin) * lda : k_begin;
  B += kTransB ? k_begin : static_cast<int64_t>(k_begin) * ldb;
  C += blockIdx.z * c_slab;
}

// The instance of a tiled kernel for the run-time flags; Pick<kTransA, kTransB, kVector>::get(split_k)
// names the instance of one rung.
template <template <bool, bool, bool> class Pick>
GemmKernel pick_tiled_kernel(bool trans_a, bool trans_b, bool vector, bool split_k) {
  if (trans_a) {
    if (trans_b) return vector ? Pick<true, true, true>::get(split_k) : Pick<true, true, false>::get(split_k);
    return vector ? Pick<true, false, true>::get(split_k) : Pick<true, false, false>::get(split_k);
  }
  if (trans_b) return vector ? Pick<false, true, true>::get(split_k) : Pick<false, true, false>::get(split_k);
  return vector ? Pick<false, false, true>::get(split_k) : Pick<false, false, false>::get(split_k);
}

using TiledKernelFor = GemmKernel (*)(bool trans_a, bool trans_b, bool vector, bool split_k);

#if !defined(BASTION_CUDA_EMULATION)
// Rung 4's instances (gemm_tf32.cu); the emulator has no tensor cores, and there rung 4 runs rung 3.
GemmKernel gemm_tf32_kernel_for(bool trans_a, bool trans_b, bool vector, bool split_k);
#endif

}  // namespace bastion::gemm_detail
