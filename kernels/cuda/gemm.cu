// gemm_cuda and its kernel ladder (contract: kernels/cuda/gemm.h; rung 0, cuBLAS, and the timings live
// in bench/cuda/bench_gemm.cu). Rungs 1-3 and the host side are here; rung 4 (TF32) is gemm_tf32.cu, and
// the operand tiles and split-K slice the two share are gemm_tiles.h. Every rung honours the whole contract: the four transpose combinations,
// leading dimensions above the minimum, alpha, beta (beta = 0 never reads C), any M, N, K >= 0.
// Shared host-side rules: M or N = 0 launches nothing; K = 0 or alpha = 0 is C = beta * C (0 when
// beta = 0) by gemm_scale_kernel, so A and B are not read then (as in BLAS).
//
// Out-of-range elements of an operand tile are loaded as zeros, so edge blocks run the same loops as
// interior ones; only the stores to C are guarded.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>

#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_tiles.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.h"

namespace bastion {

using namespace gemm_detail;

namespace {

struct GemmArgs {
  bool trans_a, trans_b;
  int M, N, K;
  float alpha;
  const float* A;
  int64_t lda;
  const float* B;
  int64_t ldb;
  float beta;
  float* C;
  int64_t ldc;
  CudaStream stream;
};

// ---- device helpers shared by the rungs ------------------------------------------------------------

// op(A)[m][k] and op(B)[k][n] in the stored layouts of gemm.h.
__device__ __forceinline__ float op_a_at(const float* A, int64_t lda, bool trans_a, int m, int k) {
  return trans_a ? A[static_cast<int64_t>(k) * lda + m] : A[static_cast<int64_t>(m) * lda + k];
}
__device__ __forceinline__ float op_b_at(const float* B, int64_t ldb, bool trans_b, int k, int n) {
  return trans_b ? B[static_cast<int64_t>(n) * ldb + k] : B[static_cast<int64_t>(k) * ldb + n];
}

__global__ void gemm_scale_kernel(int M, int N, float beta, float* C, int64_t ldc) {
  const int64_t total = static_cast<int64_t>(M) * N, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total; idx += stride) {
    float* c = C + idx / N * ldc + idx % N;
    *c = beta == 0.0f ? 0.0f : beta * *c;
  }
}

// C = alpha * (sum of the split-K slabs, in slab order) + beta * C: a fixed order, so the result does
// not depend on which slice finished first.
__global__ void gemm_split_reduce_kernel(int M, int N, int slabs, const float* W, int64_t ldw, int64_t slab,
                                         float alpha, float beta, float* C, int64_t ldc) {
  const int64_t total = static_cast<int64_t>(M) * N;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t m = e / N, n = e % N;
    float sum = 0.0f;
    for (int z = 0; z < slabs; ++z) sum += W[z * slab + m * ldw + n];
    float* c = C + m * ldc + n;
    *c = blend(sum, alpha, beta, c);
  }
}

// ---- rung 1: naive ---------------------------------------------------------------------------------
// One thread per element of C; x runs along N so that a warp's loads of op(B) (when B is not
// transposed) and its stores to C are coalesced.
constexpr int kNaiveBlockX = 32, kNaiveBlockY = 8;

__global__ void gemm_naive_kernel(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                                  int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= M || n >= N) return;  // no barrier in this kernel, so threads may leave early
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += op_a_at(A, lda, trans_a, m, k) * op_b_at(B, ldb, trans_b, k, n);
  float* c = C + static_cast<int64_t>(m) * ldc + n;
  *c = blend(acc, alpha, beta, c);
}

// ---- rung 2: shared-memory 32x32 tiles ---------------------------------------------------------------
// A block of 32x8 threads computes a 32x32 tile of C, 4 rows per thread (256 threads rather than
// 32x32: a quarter of the threads, each reusing its op(B) value 4 times). Tiles are loaded with
// threadIdx.x along the dimension that is contiguous in memory, whichever the transpose, and written
// into smem[row][k] / smem[k][col]; the +1 column makes those column-wise writes hit 32 distinct banks.
constexpr int kSmemTile = 32, kSmemRows = 8, kSmemRowsPerThread = kSmemTile / kSmemRows;

__global__ void gemm_smem_kernel(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                                 int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  __shared__ float a_tile[kSmemTile][kSmemTile + 1];  // [m][k]
  __shared__ float b_tile[kSmemTile][kSmemTile + 1];  // [k][n]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int m0 = blockIdx.y * kSmemTile, n0 = blockIdx.x * kSmemTile;
  float acc[kSmemRowsPerThread] = {};
  for (int k0 = 0; k0 < K; k0 += kSmemTile) {
    for (int r = ty; r < kSmemTile; r += kSmemRows) {
      // (r, tx) = (slow, contiguous) position in the stored matrix
      const int a_m = m0 + (trans_a ? tx : r), a_k = k0 + (trans_a ? r : tx);
      const float a = a_m < M && a_k < K ? op_a_at(A, lda, trans_a, a_m, a_k) : 0.0f;
      a_tile[a_m - m0][a_k - k0] = a;
      const int b_k = k0 + (trans_b ? tx : r), b_n = n0 + (trans_b ? r : tx);
      const float b = b_k < K && b_n < N ? op_b_at(B, ldb, trans_b, b_k, b_n) : 0.0f;
      b_tile[b_k - k0][b_n - n0] = b;
    }
    __syncthreads();
    for (int k = 0; k < kSmemTile; ++k) {
      const float b = b_tile[k][tx];
      GEMM_UNROLL
      for (int i = 0; i < kSmemRowsPerThread; ++i) acc[i] += a_tile[ty + i * kSmemRows][k] * b;
    }
    __syncthreads();  // the next iteration overwrites the tiles
  }
  GEMM_UNROLL
  for (int i = 0; i < kSmemRowsPerThread; ++i) {
    const int m = m0 + ty + i * kSmemRows, n = n0 + tx;
    if (m >= M || n >= N) continue;
    float* c = C + static_cast<int64_t>(m) * ldc + n;
    *c = blend(acc[i], alpha, beta, c);
  }
}

// ---- rung 3: register-2d (gemm_cuda's FP32 path) ---------------------------------------------------
// A 128x128 block of C per 256 threads, 8x8 outputs per thread held in registers: the 2x2 corners
// (rows row + {0..3, 64..67}, columns col + {0..3, 64..67}) so that the float4 reads of a warp from
// shared memory are consecutive (no bank conflicts). Lanes form 4x8 patches and the warps a 4x2 grid,
// so a warp's reads per k are 4 distinct float4 of A and 8 of B, one shared-memory wavefront each.
// Double-buffered: the next K slice is loaded into registers while the current one is multiplied, then
// stored into the other buffer, so one __syncthreads per slice suffices. K summed in order (FMA).
// The design is that of siboehm/SGEMM_CUDA's kernels 6-10 (vectorised 2D block tiling, warp-level
// layout, double buffering) with BK = 8.
constexpr int kThreadTile = 8, kQuarter = 4, kHalfTile = kTileMN / 2;

struct alignas(16) RegisterTiles {  // float4 reads and writes
  float a[2][kTileK][kTileStride];  // [buffer][k][m]
  float b[2][kTileK][kTileStride];  // [buffer][k][n]
};

__device__ __forceinline__ void multiply_slice(float (&acc)[kThreadTile][kThreadTile], const float (*a)[kTileStride],
                                               const float (*b)[kTileStride], int row, int col) {
  GEMM_UNROLL
  for (int k = 0; k < kTileK; ++k) {
    const float4 a0 = *reinterpret_cast<const float4*>(&a[k][row]);
    const float4 a1 = *reinterpret_cast<const float4*>(&a[k][row + kHalfTile]);
    const float4 b0 = *reinterpret_cast<const float4*>(&b[k][col]);
    const float4 b1 = *reinterpret_cast<const float4*>(&b[k][col + kHalfTile]);
    const float av[kThreadTile] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    const float bv[kThreadTile] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
    GEMM_UNROLL
    for (int i = 0; i < kThreadTile; ++i) {
      GEMM_UNROLL
      for (int j = 0; j < kThreadTile; ++j) acc[i][j] += av[i] * bv[j];
    }
  }
}

// Row i of the thread's 8x8 tile, four columns starting at C[m][n], blended into C.
template <bool kVector>
__device__ __forceinline__ void store_c_quad(float* C, int64_t ldc, int M, int N, int m, int n, float4 v,
                                             float alpha, float beta) {
  if (m >= M) return;
  float* c = C + static_cast<int64_t>(m) * ldc + n;
  if (kVector && n + 3 < N) {
    float4 out = make_float4(alpha * v.x, alpha * v.y, alpha * v.z, alpha * v.w);
    if (beta != 0.0f) {
      const float4 old = *reinterpret_cast<const float4*>(c);
      out = make_float4(out.x + beta * old.x, out.y + beta * old.y, out.z + beta * old.z, out.w + beta * old.w);
    }
    *reinterpret_cast<float4*>(c) = out;
    return;
  }
  const float vals[4] = {v.x, v.y, v.z, v.w};
  GEMM_UNROLL
  for (int j = 0; j < 4; ++j)
    if (n + j < N) c[j] = blend(vals[j], alpha, beta, c + j);
}

template <bool kTransA, bool kTransB, bool kVector, bool kSplitK>
__global__ void __launch_bounds__(kTileThreads, 2)
    gemm_register_kernel(int M, int N, int K, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
                         float beta, float* C, int64_t ldc, int k_chunk, int64_t c_slab) {
  if constexpr (kSplitK) enter_k_slice<kTransA, kTransB>(K, A, lda, B, ldb, C, k_chunk, c_slab);
  __shared__ RegisterTiles tiles;
  const int m0 = blockIdx.y * kTileMN, n0 = blockIdx.x * kTileMN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = (warp / 2 * 4 + lane / 8) * kQuarter, col = (warp % 2 * 8 + lane % 8) * kQuarter;
  float acc[kThreadTile][kThreadTile] = {};

  float4 a_next = load_operand_quad<!kTransA, kVector>(A, lda, M, K, m0, 0);
  float4 b_next = load_operand_quad<kTransB, kVector>(B, ldb, N, K, n0, 0);
  store_operand_quad<!kTransA>(tiles.a[0], a_next);
  store_operand_quad<kTransB>(tiles.b[0], b_next);
  __syncthreads();
  const int slices = (K + kTileK - 1) / kTileK;
  for (int s = 0; s < slices; ++s) {
    const int cur = s & 1;
    const bool more = s + 1 < slices;  // uniform over the block: every thread reaches the same barriers
    if (more) {
      a_next = load_operand_quad<!kTransA, kVector>(A, lda, M, K, m0, (s + 1) * kTileK);
      b_next = load_operand_quad<kTransB, kVector>(B, ldb, N, K, n0, (s + 1) * kTileK);
    }
    multiply_slice(acc, tiles.a[cur], tiles.b[cur], row, col);
    if (more) {
      store_operand_quad<!kTransA>(tiles.a[cur ^ 1], a_next);
      store_operand_quad<kTransB>(tiles.b[cur ^ 1], b_next);
    }
    __syncthreads();
  }

  GEMM_UNROLL
  for (int i = 0; i < kThreadTile; ++i) {
    const int m = m0 + row + (i < kQuarter ? i : kHalfTile + i - kQuarter);
    const float* r = acc[i];
    store_c_quad<kVector>(C, ldc, M, N, m, n0 + col, make_float4(r[0], r[1], r[2], r[3]), alpha, beta);
    store_c_quad<kVector>(C, ldc, M, N, m, n0 + col + kHalfTile, make_float4(r[4], r[5], r[6], r[7]), alpha, beta);
  }
}

// ---- host side -----------------------------------------------------------------------------------

std::atomic<GemmPrecision> g_precision{GemmPrecision::FP32};

constexpr int kVariantCount = 4;
const char* const kVariantNames[kVariantCount] = {"naive", "smem-tiled", "register-2d", "tf32-wmma"};

constexpr int64_t kMaxGridY = 65535;

// float4 access to all three matrices: 16-byte aligned bases and leading dimensions that keep every
// row 16-byte aligned.
bool vector_access_ok(const GemmArgs& g) {
  return cuda_aligned16(g.A) && cuda_aligned16(g.B) && cuda_aligned16(g.C) && g.lda % 4 == 0 && g.ldb % 4 == 0 && g.ldc % 4 == 0;
}

dim3 tile_grid(const GemmArgs& g, int tile_m, int tile_n) {
  const int64_t blocks_m = cuda_ceil_div(g.M, tile_m);
  BASTION_CHECK(blocks_m <= kMaxGridY, "gemm_cuda: M = ", g.M, " needs ", blocks_m,
                " row blocks, more than the grid's y limit ", kMaxGridY);
  return dim3(cuda_ceil_div(g.N, tile_n), static_cast<unsigned>(blocks_m));
}

template <bool kTransA, bool kTransB, bool kVector>
struct RegisterKernel {
  static GemmKernel get(bool split_k) {
    return split_k ? gemm_register_kernel<kTransA, kTransB, kVector, true>
                   : gemm_register_kernel<kTransA, kTransB, kVector, false>;
  }
};

GemmKernel gemm_register_kernel_for(bool trans_a, bool trans_b, bool vector, bool split_k) {
  return pick_tiled_kernel<RegisterKernel>(trans_a, trans_b, vector, split_k);
}

void launch_naive(const GemmArgs& g) {
  cuda_launch("gemm_naive_kernel", gemm_naive_kernel, tile_grid(g, kNaiveBlockY, kNaiveBlockX),
              dim3(kNaiveBlockX, kNaiveBlockY), g.stream, g.trans_a, g.trans_b, g.M, g.N, g.K, g.alpha, g.A, g.lda,
              g.B, g.ldb, g.beta, g.C, g.ldc);
}

void launch_smem(const GemmArgs& g) {
  cuda_launch("gemm_smem_kernel", gemm_smem_kernel, tile_grid(g, kSmemTile, kSmemTile), dim3(kSmemTile, kSmemRows),
              g.stream, g.trans_a, g.trans_b, g.M, g.N, g.K, g.alpha, g.A, g.lda, g.B, g.ldb, g.beta, g.C, g.ldc);
}

// Row length of a split-K slab: N rounded up to 4 floats, so the slabs' rows stay 16-byte aligned.
int64_t split_slab_ld(int64_t N) { return (N + 3) / 4 * 4; }

// Runs a 128x128-tile kernel (rung 3 or 4) on g, split over K when C has too few tiles to fill the GPU.
// Split: the slices write their partial products into slabs of scratch, then gemm_split_reduce_kernel
// adds them into C.
void launch_tiled(const char* name, TiledKernelFor kernel_for, const GemmArgs& g) {
  const GemmSplitK split = gemm_cuda_split_k(g.M, g.N, g.K);
  const bool split_k = split.slices > 1;
  const int64_t ldw = split_slab_ld(g.N), slab = split_k ? static_cast<int64_t>(g.M) * ldw : 0;
  CudaScratch<float> work(slab * split.slices);
  GemmArgs run = g;  // split: each slice assigns its own slab
  if (split_k) run.alpha = 1.0f, run.beta = 0.0f, run.C = work.ptr, run.ldc = ldw;
  dim3 grid = tile_grid(g, kTileMN, kTileMN);
  grid.z = static_cast<unsigned>(split.slices);
  const GemmKernel kernel = kernel_for(run.trans_a, run.trans_b, vector_access_ok(run), split_k);
  cuda_launch(name, kernel, grid, dim3(kTileThreads), g.stream, run.M, run.N, run.K,
              run.alpha, run.A, run.lda, run.B, run.ldb, run.beta, run.C, run.ldc, split.k_chunk, slab);
  if (!split_k) return;
  constexpr int kThreads = 256;
  cuda_launch("gemm_split_reduce_kernel", gemm_split_reduce_kernel,
              dim3(cuda_grid_stride_blocks(static_cast<int64_t>(g.M) * g.N, kThreads)), dim3(kThreads), g.stream,
              g.M, g.N, split.slices, static_cast<const float*>(work.ptr), ldw, slab, g.alpha, g.beta, g.C, g.ldc);
}

void launch_register(const GemmArgs& g) { launch_tiled("gemm_register_kernel", gemm_register_kernel_for, g); }

// The emulator has no tensor cores: there rung 4 is rung 3 (gemm_cuda_variant_emulated(4) is false).
void launch_tf32(const GemmArgs& g) {
#if defined(BASTION_CUDA_EMULATION)
  launch_register(g);
#else
  launch_tiled("gemm_tf32_kernel", gemm_tf32_kernel_for, g);
#endif
}

// Checks the contract's preconditions and the kernels' int range; returns the arguments with int sizes.
GemmArgs checked_args(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                      int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc, CudaStream stream) {
  constexpr int64_t kMaxDim = std::numeric_limits<int>::max();
  BASTION_CHECK(M >= 0 && N >= 0 && K >= 0 && M <= kMaxDim && N <= kMaxDim && K <= kMaxDim,
                "gemm_cuda: sizes must lie in [0, 2^31): M ", M, " N ", N, " K ", K);
  BASTION_CHECK(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N, "gemm_cuda: leading dimensions lda ",
                lda, " ldb ", ldb, " ldc ", ldc, " too small for M ", M, " N ", N, " K ", K, " trans_a ", trans_a,
                " trans_b ", trans_b);
  return {trans_a, trans_b, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A, lda, B, ldb,
          beta, C, ldc, stream};
}

// Runs one rung on checked arguments, after the cases no rung needs to see (empty C, nothing to sum).
void run_variant(int variant, const GemmArgs& g) {
  if (g.M == 0 || g.N == 0) return;
  if (g.K == 0 || g.alpha == 0.0f) {
    constexpr int kThreads = 256;
    cuda_launch("gemm_scale_kernel", gemm_scale_kernel,
                dim3(cuda_grid_stride_blocks(static_cast<int64_t>(g.M) * g.N, kThreads)), dim3(kThreads), g.stream,
                g.M, g.N, g.beta, g.C, g.ldc);
    return;
  }
  switch (variant) {
    case 1: launch_naive(g); return;
    case 2: launch_smem(g); return;
    case 3: launch_register(g); return;
    case 4: launch_tf32(g); return;
  }
  BASTION_FAIL("gemm_cuda_variant: no rung ", variant, " (1..", kVariantCount, ")");
}

}  // namespace

void gemm_cuda_set_precision(GemmPrecision precision) { g_precision.store(precision); }
GemmPrecision gemm_cuda_precision() { return g_precision.load(); }

void gemm_cuda(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc, CudaStream stream) {
  const int rung = gemm_cuda_precision() == GemmPrecision::TF32 ? 4 : 3;
  run_variant(rung, checked_args(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stream));
}

// Fixed constants, not the device's SM count: the split decides the summation order, and a product
// should round the same on every GPU. 264 blocks are two per SM of a 132-SM H100 (the kernels' launch
// bounds allow two); a slice shorter than 512 would spend more on its slab than it saves.
GemmSplitK gemm_cuda_split_k(int64_t M, int64_t N, int64_t K) {
  constexpr int64_t kTargetBlocks = 264, kMinSliceDepth = 512, kMaxSlices = 64, kSliceAlign = 16;
  constexpr int64_t kMaxWorkspaceFloats = int64_t{1} << 24;  // 64 MiB
  const int64_t tiles = static_cast<int64_t>(cuda_ceil_div(M, kTileMN)) * cuda_ceil_div(N, kTileMN);
  if (tiles == 0 || tiles * 2 > kTargetBlocks) return {1, static_cast<int>(K)};
  const int64_t slab = M * split_slab_ld(N);
  const int64_t wanted = std::min({kTargetBlocks / tiles, K / kMinSliceDepth, kMaxSlices, kMaxWorkspaceFloats / slab});
  if (wanted < 2) return {1, static_cast<int>(K)};
  const int64_t chunk = ((K + wanted - 1) / wanted + kSliceAlign - 1) / kSliceAlign * kSliceAlign;
  return {static_cast<int>((K + chunk - 1) / chunk), static_cast<int>(chunk)};
}

int gemm_cuda_variant_count() { return kVariantCount; }

const char* gemm_cuda_variant_name(int variant) {
  BASTION_CHECK(variant >= 1 && variant <= kVariantCount, "gemm_cuda_variant_name: no rung ", variant);
  return kVariantNames[variant - 1];
}

bool gemm_cuda_variant_emulated(int variant) {
  BASTION_CHECK(variant >= 1 && variant <= kVariantCount, "gemm_cuda_variant_emulated: no rung ", variant);
  return variant != 4;
}

void gemm_cuda_variant(int variant, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                       const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                       CudaStream stream) {
  BASTION_CHECK(variant >= 1 && variant <= kVariantCount, "gemm_cuda_variant: no rung ", variant, " (1..",
                kVariantCount, ")");
  run_variant(variant, checked_args(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stream));
}

}  // namespace bastion
