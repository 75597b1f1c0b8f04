// Rung 4 of gemm_cuda's ladder (gemm.cu has rungs 1-3 and the host side): TF32 tensor cores through
// wmma, gemm_cuda's TF32 path. Not emulated: the emulated build compiles this file empty.
#if !defined(BASTION_CUDA_EMULATION)
#include <mma.h>

#include "kernels/cuda/gemm_tiles.h"

namespace bastion::gemm_detail {

namespace {

// Same operand tiles as rung 3 with BK = 16 (two 8-deep slices per buffer); each of the 8 warps owns
// a 64x32 piece of the 128x128 block as 4x2 accumulators of m16n16k8. The K-major tiles are what wmma
// reads directly: tile[k][m] is op(A) column-major, tile[k][n] is op(B) row-major, ld 132 (a multiple
// of 4, and 16-row offsets stay 32-byte aligned). Results go through a per-warp 16x16 staging tile so
// the edges can be guarded and beta applied element-wise.
constexpr int kWmmaK = 16, kWmmaFrag = 16, kWmmaStep = 8, kWarps = kTileThreads / 32;
constexpr int kWarpRows = 64, kWarpCols = 32;
constexpr int kFragRows = kWarpRows / kWmmaFrag, kFragCols = kWarpCols / kWmmaFrag;

struct alignas(128) WmmaTiles {
  float a[2][kWmmaK][kTileStride];
  float b[2][kWmmaK][kTileStride];
  float stage[kWarps][kWmmaFrag * kWmmaFrag];
};

template <bool kTransA, bool kTransB, bool kVector>
__device__ __forceinline__ void load_wmma_slice(float4 (&next)[4], const float* A, int64_t lda, const float* B,
                                                int64_t ldb, int M, int N, int K, int m0, int n0, int k0) {
  GEMM_UNROLL
  for (int half = 0; half < 2; ++half) {
    next[half] = load_operand_quad<!kTransA, kVector>(A, lda, M, K, m0, k0 + half * kTileK);
    next[2 + half] = load_operand_quad<kTransB, kVector>(B, ldb, N, K, n0, k0 + half * kTileK);
  }
}

template <bool kTransA, bool kTransB>
__device__ __forceinline__ void store_wmma_slice(WmmaTiles& t, int buffer, const float4 (&next)[4]) {
  GEMM_UNROLL
  for (int half = 0; half < 2; ++half) {
    store_operand_quad<!kTransA>(&t.a[buffer][half * kTileK], next[half]);
    store_operand_quad<kTransB>(&t.b[buffer][half * kTileK], next[2 + half]);
  }
}

using Tf32Accumulator = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 8, float>;

// One 16-deep buffer into the warp's 4x2 accumulators, products in TF32.
__device__ __forceinline__ void multiply_wmma_slice(Tf32Accumulator (&acc)[kFragRows][kFragCols],
                                                    const float (*a_tile)[kTileStride],
                                                    const float (*b_tile)[kTileStride], int wm, int wn) {
  using namespace nvcuda;
  GEMM_UNROLL
  for (int kk = 0; kk < kWmmaK; kk += kWmmaStep) {
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major> a[kFragRows];
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b[kFragCols];
    GEMM_UNROLL
    for (int i = 0; i < kFragRows; ++i) {
      wmma::load_matrix_sync(a[i], &a_tile[kk][wm + i * kWmmaFrag], kTileStride);
      for (int e = 0; e < a[i].num_elements; ++e) a[i].x[e] = wmma::__float_to_tf32(a[i].x[e]);
    }
    GEMM_UNROLL
    for (int j = 0; j < kFragCols; ++j) {
      wmma::load_matrix_sync(b[j], &b_tile[kk][wn + j * kWmmaFrag], kTileStride);
      for (int e = 0; e < b[j].num_elements; ++e) b[j].x[e] = wmma::__float_to_tf32(b[j].x[e]);
    }
    GEMM_UNROLL
    for (int i = 0; i < kFragRows; ++i) {
      GEMM_UNROLL
      for (int j = 0; j < kFragCols; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
  }
}

template <bool kTransA, bool kTransB, bool kVector, bool kSplitK>
__global__ void __launch_bounds__(kTileThreads, 2)
    gemm_tf32_kernel(int M, int N, int K, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
                     float beta, float* C, int64_t ldc, int k_chunk, int64_t c_slab) {
  if constexpr (kSplitK) enter_k_slice<kTransA, kTransB>(K, A, lda, B, ldb, C, k_chunk, c_slab);
  using namespace nvcuda;
  __shared__ WmmaTiles tiles;
  const int m0 = blockIdx.y * kTileMN, n0 = blockIdx.x * kTileMN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / 4 * kWarpRows, wn = warp % 4 * kWarpCols;
  Tf32Accumulator acc[kFragRows][kFragCols];
  GEMM_UNROLL
  for (int i = 0; i < kFragRows; ++i) {
    GEMM_UNROLL
    for (int j = 0; j < kFragCols; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  }

  float4 next[4];
  load_wmma_slice<kTransA, kTransB, kVector>(next, A, lda, B, ldb, M, N, K, m0, n0, 0);
  store_wmma_slice<kTransA, kTransB>(tiles, 0, next);
  __syncthreads();
  const int slices = (K + kWmmaK - 1) / kWmmaK;
  for (int s = 0; s < slices; ++s) {
    const int cur = s & 1;
    const bool more = s + 1 < slices;
    if (more) load_wmma_slice<kTransA, kTransB, kVector>(next, A, lda, B, ldb, M, N, K, m0, n0, (s + 1) * kWmmaK);
    multiply_wmma_slice(acc, tiles.a[cur], tiles.b[cur], wm, wn);
    if (more) store_wmma_slice<kTransA, kTransB>(tiles, cur ^ 1, next);
    __syncthreads();
  }

  float* stage = tiles.stage[warp];
  GEMM_UNROLL  // constant indices keep the accumulators in registers
  for (int i = 0; i < kFragRows; ++i) {
    GEMM_UNROLL
    for (int j = 0; j < kFragCols; ++j) {
      wmma::store_matrix_sync(stage, acc[i][j], kWmmaFrag, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < kWmmaFrag * kWmmaFrag; e += 32) {
        const int m = m0 + wm + i * kWmmaFrag + e / kWmmaFrag, n = n0 + wn + j * kWmmaFrag + e % kWmmaFrag;
        if (m >= M || n >= N) continue;
        float* c = C + static_cast<int64_t>(m) * ldc + n;
        *c = blend(stage[e], alpha, beta, c);
      }
      __syncwarp();  // the next store_matrix_sync overwrites the staging tile
    }
  }
}

template <bool kTransA, bool kTransB, bool kVector>
struct Tf32Kernel {
  static GemmKernel get(bool split_k) {
    return split_k ? gemm_tf32_kernel<kTransA, kTransB, kVector, true>
                   : gemm_tf32_kernel<kTransA, kTransB, kVector, false>;
  }
};

}  // namespace

GemmKernel gemm_tf32_kernel_for(bool trans_a, bool trans_b, bool vector, bool split_k) {
  return pick_tiled_kernel<Tf32Kernel>(trans_a, trans_b, vector, split_k);
}

}  // namespace bastion::gemm_detail
#endif  // !BASTION_CUDA_EMULATION
