// conv2d on the GPU (contract: kernels/cuda/conv.h, math and layouts: kernels/cpu/conv.h).
// Rung 1: im2col per chunk of samples + gemm_cuda + one scatter kernel (output NCHW, bias added).
// Rung 2: implicit GEMM, the im2col gather fused into the shared-memory tile loads of a register-blocked
// GEMM; no workspace. Every sum has a fixed order (no float atomics), so results are deterministic.
//
// Index widths: offsets inside one sample, one chunk's columns and the weight fit 32 bits (checked on the
// host; a chunk is bounded by the workspace cap), sample offsets are 64-bit.
#include "kernels/cuda/conv.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "kernels/cuda/gemm.h"
#include "kernels/cuda/launch.h"

// nvcc needs the unroll to keep the register tiles in registers; g++ (the emulated build) warns on
// CUDA's pragma, and there it only matters for speed.
#if defined(BASTION_CUDA_EMULATION)
#define CONV_UNROLL
#else
#define CONV_UNROLL _Pragma("unroll")
#endif

namespace bastion {

namespace {

constexpr int kThreads = 256;

// The geometry as 32-bit ints, passed by value to the kernels.
struct ConvDims {
  int C, H, W, K, R, S, stride, padding, OH, OW;
  __host__ __device__ int plane() const { return H * W; }
  __host__ __device__ int sample() const { return C * H * W; }
  __host__ __device__ int rs() const { return R * S; }
  __host__ __device__ int crs() const { return C * R * S; }
  __host__ __device__ int P() const { return OH * OW; }
};

void check_fits_int(int64_t value, const char* what) {
  BASTION_CHECK(value >= 0 && value <= INT_MAX, "conv2d_cuda: ", what, " = ", value, " exceeds 32-bit indexing");
}

ConvDims device_dims(const Conv2dGeometry& g) {
  check_fits_int(g.C * g.H * g.W, "C*H*W");
  check_fits_int(g.K * g.crs(), "K*C*R*S");
  check_fits_int(g.K * g.out_plane(), "K*OH*OW");
  const auto i32 = [](int64_t v) { return static_cast<int>(v); };
  return {i32(g.C), i32(g.H),      i32(g.W),       i32(g.K),  i32(g.R),
          i32(g.S), i32(g.stride), i32(g.padding), i32(g.OH), i32(g.OW)};
}

// ---- rung 1 building blocks ----

// cols[row, n*P + p] for row = (c, r, s): one thread per column element, consecutive threads along p so
// the writes coalesce.
__global__ void im2col_kernel(float* cols, const float* in, ConvDims d, int64_t n_begin, int n_count) {
  const int P = d.P(), row_len = n_count * P;
  const int64_t total = static_cast<int64_t>(d.crs()) * row_len;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total; i += stride) {
    const int row = static_cast<int>(i / row_len), col = static_cast<int>(i - static_cast<int64_t>(row) * row_len);
    const int n = col / P, p = col - n * P, oh = p / d.OW, ow = p - oh * d.OW;
    const int c = row / d.rs(), rs = row - c * d.rs(), r = rs / d.S, s = rs - r * d.S;
    const int ih = oh * d.stride - d.padding + r, iw = ow * d.stride - d.padding + s;
    const bool inside = ih >= 0 && ih < d.H && iw >= 0 && iw < d.W;
    cols[i] = inside ? in[(n_begin + n) * d.sample() + (c * d.H + ih) * d.W + iw] : 0.0f;
  }
}

// One thread per input element of samples [n_begin, n_begin + n_count): the sum of the column entries
// that im2col copied from it, in (r, s) order, the order col2im_add_cpu adds them (so the two agree
// bitwise). `accumulate` adds to in_grad (col2im_add_cuda); otherwise the sum is assigned (the backward,
// which saves a fill).
__global__ void col2im_gather_kernel(float* in_grad, const float* cols, ConvDims d, int64_t n_begin, int n_count,
                                     bool accumulate) {
  const int P = d.P(), row_len = n_count * P;
  const int64_t total = static_cast<int64_t>(n_count) * d.sample();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total; i += stride) {
    const int n = static_cast<int>(i / d.sample()), within = static_cast<int>(i - static_cast<int64_t>(n) * d.sample());
    const int c = within / d.plane(), hw = within - c * d.plane(), h = hw / d.W, w = hw - h * d.W;
    float* dst = in_grad + n_begin * d.sample() + i;
    float total_grad = accumulate ? *dst : 0.0f;
    for (int r = 0; r < d.R; ++r) {
      const int th = h + d.padding - r;  // = oh * stride for the output row that reads (h, w) through r
      if (th < 0 || th % d.stride != 0 || th / d.stride >= d.OH) continue;
      for (int s = 0; s < d.S; ++s) {
        const int tw = w + d.padding - s;
        if (tw < 0 || tw % d.stride != 0 || tw / d.stride >= d.OW) continue;
        const int row = (c * d.R + r) * d.S + s, col = n * P + (th / d.stride) * d.OW + tw / d.stride;
        total_grad += cols[static_cast<int64_t>(row) * row_len + col];
      }
    }
    *dst = total_grad;
  }
}

// out[n0 + n, k, p] = tmp[k, n*P + p] + bias[k], one thread per output element (coalesced writes).
__global__ void scatter_bias_kernel(float* out, const float* tmp, const float* bias, int K, int P, int nb) {
  const int64_t total = static_cast<int64_t>(nb) * K * P;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total; i += stride) {
    const int n = static_cast<int>(i / (static_cast<int64_t>(K) * P));
    const int kp = static_cast<int>(i - static_cast<int64_t>(n) * K * P), k = kp / P, p = kp - k * P;
    out[i] = tmp[static_cast<int64_t>(k) * nb * P + n * P + p] + (bias != nullptr ? bias[k] : 0.0f);
  }
}

// dyt[k, n*P + p] = grad_out[n, k, p]: the chunk's output gradient in the GEMM's (K, nb*P) order.
__global__ void gather_grad_out_kernel(float* dyt, const float* grad_out, int K, int P, int nb) {
  const int64_t total = static_cast<int64_t>(nb) * K * P;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total; i += stride) {
    const int n = static_cast<int>(i / (static_cast<int64_t>(K) * P));
    const int kp = static_cast<int>(i - static_cast<int64_t>(n) * K * P), k = kp / P, p = kp - k * P;
    dyt[static_cast<int64_t>(k) * nb * P + n * P + p] = grad_out[i];
  }
}

// grad_bias[k] = sum over n, p of grad_out[n, k, p]: one block per k; each thread sums a fixed strided
// subset, then a fixed shuffle tree and a fixed pass over the warp sums (deterministic).
__global__ void bias_grad_kernel(float* grad_bias, const float* grad_out, int64_t N, int K, int P) {
  __shared__ float warp_sums[kThreads / 32];
  const int k = blockIdx.x;
  const int64_t count = N * P;
  float total = 0.0f;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t n = j / P;
    total += grad_out[(n * K + k) * P + (j - n * P)];
  }
  for (int offset = 16; offset > 0; offset /= 2) total += __shfl_down_sync(0xffffffffu, total, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = total;
  __syncthreads();
  if (threadIdx.x == 0) {
    float block_total = 0.0f;
    for (int w = 0; w < kThreads / 32; ++w) block_total += warp_sums[w];
    grad_bias[k] = block_total;
  }
}

void im2col_launch(float* cols, const float* in, const Conv2dGeometry& g, int64_t n_begin, int64_t n_count,
                   CudaStream stream) {
  check_fits_int(g.crs() * n_count * g.out_plane(), "C*R*S*n_count*OH*OW (columns)");
  const int64_t total = g.crs() * n_count * g.out_plane();
  if (total == 0) return;
  cuda_launch("im2col_kernel", im2col_kernel, dim3(cuda_grid_stride_blocks(total, kThreads)), dim3(kThreads), stream,
              cols, in, device_dims(g), n_begin, static_cast<int>(n_count));
}

void col2im_launch(float* in_grad, const float* cols, const Conv2dGeometry& g, int64_t n_begin, int64_t n_count,
                   bool accumulate, CudaStream stream) {
  check_fits_int(g.crs() * n_count * g.out_plane(), "C*R*S*n_count*OH*OW (columns)");
  const int64_t total = n_count * g.C * g.H * g.W;
  if (total == 0) return;
  cuda_launch("col2im_gather_kernel", col2im_gather_kernel, dim3(cuda_grid_stride_blocks(total, kThreads)),
              dim3(kThreads), stream, in_grad, cols, device_dims(g), n_begin, static_cast<int>(n_count), accumulate);
}

}  // namespace

// ---- rung 1: im2col + GEMM ----

int64_t conv2d_cuda_chunk_samples(const Conv2dGeometry& g, int64_t max_workspace_floats) {
  const int64_t per_sample = std::max<int64_t>(g.out_plane() * (g.crs() + g.K), 1);
  return std::clamp<int64_t>(max_workspace_floats / per_sample, 1, std::max<int64_t>(g.N, 1));
}

int64_t conv2d_cuda_workspace_floats(const Conv2dGeometry& g, int64_t max_workspace_floats) {
  return conv2d_cuda_chunk_samples(g, max_workspace_floats) * g.out_plane() * (g.crs() + g.K);
}

void im2col_cuda(float* cols, const float* in, const Conv2dGeometry& g, int64_t n_begin, int64_t n_count,
                 CudaStream stream) {
  im2col_launch(cols, in, g, n_begin, n_count, stream);
}

void col2im_add_cuda(float* in_grad, const float* cols, const Conv2dGeometry& g, int64_t n_begin, int64_t n_count,
                     CudaStream stream) {
  col2im_launch(in_grad, cols, g, n_begin, n_count, /*accumulate=*/true, stream);
}

void conv2d_forward_cuda(float* out, const float* in, const float* weight, const float* bias, const Conv2dGeometry& g,
                         float* workspace, CudaStream stream, int64_t max_workspace_floats) {
  const int64_t P = g.out_plane(), chunk = conv2d_cuda_chunk_samples(g, max_workspace_floats);
  float* cols = workspace;
  float* tmp = workspace + chunk * P * g.crs();
  check_fits_int(chunk * P * g.K, "K*chunk*OH*OW");
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const int64_t nb = std::min(chunk, g.N - n0);
    im2col_launch(cols, in, g, n0, nb, stream);
    gemm_cuda(false, false, g.K, nb * P, g.crs(), 1.0f, weight, g.crs(), cols, nb * P, 0.0f, tmp, nb * P, stream);
    const int64_t total = nb * g.K * P;
    if (total == 0) continue;
    cuda_launch("scatter_bias_kernel", scatter_bias_kernel, dim3(cuda_grid_stride_blocks(total, kThreads)),
                dim3(kThreads), stream, out + n0 * g.K * P, tmp, bias, static_cast<int>(g.K), static_cast<int>(P),
                static_cast<int>(nb));
  }
}

void conv2d_backward_cuda(float* grad_in, float* grad_weight, float* grad_bias, const float* grad_out,
                          const float* in, const float* weight, const Conv2dGeometry& g, float* workspace,
                          CudaStream stream, int64_t max_workspace_floats) {
  const int64_t P = g.out_plane(), chunk = conv2d_cuda_chunk_samples(g, max_workspace_floats);
  float* cols = workspace;
  float* dyt = workspace + chunk * P * g.crs();
  check_fits_int(chunk * P * g.K, "K*chunk*OH*OW");
  // The chunk loop assigns grad_weight (beta = 0 on the first chunk); an empty batch has no chunk.
  if (grad_weight != nullptr && g.N == 0) cuda_fill(grad_weight, 0.0f, g.K * g.crs(), stream);
  if (grad_bias != nullptr && g.K > 0)
    cuda_launch("bias_grad_kernel", bias_grad_kernel, dim3(static_cast<unsigned>(g.K)), dim3(kThreads), stream,
                grad_bias, grad_out, g.N, static_cast<int>(g.K), static_cast<int>(P));
  if (grad_weight == nullptr && grad_in == nullptr) return;
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const int64_t nb = std::min(chunk, g.N - n0);
    // One sample's gradient is already in (K, P) order: no gather.
    const float* dy = grad_out + n0 * g.K * P;
    if (nb > 1) {
      cuda_launch("gather_grad_out_kernel", gather_grad_out_kernel,
                  dim3(cuda_grid_stride_blocks(nb * g.K * P, kThreads)), dim3(kThreads), stream, dyt, dy,
                  static_cast<int>(g.K), static_cast<int>(P), static_cast<int>(nb));
      dy = dyt;
    }
    if (grad_weight != nullptr) {
      im2col_launch(cols, in, g, n0, nb, stream);
      gemm_cuda(false, true, g.K, g.crs(), nb * P, 1.0f, dy, nb * P, cols, nb * P, n0 == 0 ? 0.0f : 1.0f, grad_weight,
                g.crs(), stream);
    }
    if (grad_in != nullptr) {
      gemm_cuda(true, false, g.crs(), nb * P, g.K, 1.0f, weight, g.crs(), dy, nb * P, 0.0f, cols, nb * P, stream);
      col2im_launch(grad_in, cols, g, n0, nb, /*accumulate=*/false, stream);
    }
  }
}

// ---- rung 2: implicit GEMM ----
//
// out (K, N*P) = weight (K, CRS) @ cols (CRS, N*P) with cols never stored: a block computes a BM x BN tile
// of out (filters x output positions), walking CRS in steps of kTileK. Each step, the threads copy the
// weight tile (transposed, so a row of filters is contiguous) and the column tile, gathered from the
// input as im2col would, into shared memory; each thread then accumulates an 8x8 sub-tile in registers
// (rows ty*4 + {0..3} and BM/2 + ty*4 + {0..3}, columns likewise, so the float4 shared-memory reads of a
// warp hit distinct banks). The next step's global loads are issued into registers before the current
// step's arithmetic (two shared-memory buffers, one __syncthreads per step). Each output is one FMA
// chain over crs in order, plus the bias: deterministic, the summation order of a plain dot product.

namespace {

constexpr int kTileK = 8;
// Pads a row of the weight tile by 4 floats: the two threads that store one filter's 8 crs values write
// rows kk and kk + 4 of the same column, which would otherwise fall into the same bank.
constexpr int kWeightPad = 4;
// Auto tile: the largest tile whose grid still has this many blocks (two per SM of a 132-SM H100, so the
// last wave is not a lone partial one); smaller tiles cost shared-memory bandwidth per FMA.
constexpr int64_t kMinBlocksForLargeTile = 264;

template <int BM, int BN>
struct ImplicitGemmShape {
  static constexpr int kThreads = (BM / 8) * (BN / 8);
  static constexpr int kWeightPerThread = BM * kTileK / kThreads;  // consecutive crs of one filter
  static constexpr int kColumnPerThread = BN * kTileK / kThreads;  // consecutive crs of one column
  static_assert(kTileK % kWeightPerThread == 0 && kTileK % kColumnPerThread == 0, "tile loads must split evenly");
};

// The two shared-memory buffers of each tile; 16-byte aligned for the float4 reads.
template <int BM, int BN>
struct alignas(16) ImplicitGemmTiles {
  float weight[2][kTileK][BM + kWeightPad];  // [crs][filter]
  float column[2][kTileK][BN];               // [crs][output position]
};

// What one thread loads each step: its filter row and output column, fixed for the whole CRS walk.
struct TileLoader {
  const float* weight_row;  // weight + filter * CRS (valid when filter_ok)
  const float* in_sample;   // in + n * C*H*W (valid when column_ok)
  int weight_col, column_row;
  int ih0, iw0;             // top-left input pixel of this thread's output position
  bool filter_ok, column_ok;
};

template <int BM, int BN>
__device__ TileLoader make_loader(const float* in, const float* weight, const ConvDims& d, int columns) {
  using Shape = ImplicitGemmShape<BM, BN>;
  constexpr int kWeightThreadsPerRow = kTileK / Shape::kWeightPerThread;
  const int tid = threadIdx.x;
  TileLoader t;
  const int filter = blockIdx.y * BM + tid / kWeightThreadsPerRow;
  t.filter_ok = filter < d.K;
  t.weight_row = weight + static_cast<int64_t>(t.filter_ok ? filter : 0) * d.crs();
  t.weight_col = tid % kWeightThreadsPerRow * Shape::kWeightPerThread;
  const int column = blockIdx.x * BN + tid % BN;
  t.column_ok = column < columns;
  const int P = d.P(), n = t.column_ok ? column / P : 0, p = column - n * P, oh = p / d.OW, ow = p - oh * d.OW;
  t.in_sample = in + static_cast<int64_t>(n) * d.sample();
  t.column_row = tid / BN * Shape::kColumnPerThread;
  t.ih0 = oh * d.stride - d.padding;
  t.iw0 = ow * d.stride - d.padding;
  return t;
}

// Global -> registers for the step starting at crs k0 (zeros outside the matrices and in the padding).
template <int BM, int BN>
__device__ void load_tile(float* weight_regs, float* column_regs, const TileLoader& t, const ConvDims& d, int k0) {
  using Shape = ImplicitGemmShape<BM, BN>;
  const int crs_total = d.crs();
  CONV_UNROLL
  for (int i = 0; i < Shape::kWeightPerThread; ++i) {
    const int crs = k0 + t.weight_col + i;
    weight_regs[i] = t.filter_ok && crs < crs_total ? __ldg(t.weight_row + crs) : 0.0f;
  }
  // Two divisions per step; the thread's following crs values step (c, r, s) by one.
  const int crs = k0 + t.column_row;
  int c = crs / d.rs(), r = (crs - c * d.rs()) / d.S, s = crs - c * d.rs() - r * d.S;
  CONV_UNROLL
  for (int i = 0; i < Shape::kColumnPerThread; ++i) {
    const int ih = t.ih0 + r, iw = t.iw0 + s;
    const bool inside = t.column_ok && c < d.C && ih >= 0 && ih < d.H && iw >= 0 && iw < d.W;
    column_regs[i] = inside ? __ldg(t.in_sample + (c * d.H + ih) * d.W + iw) : 0.0f;
    if (++s == d.S) {
      s = 0;
      if (++r == d.R) {
        r = 0;
        ++c;
      }
    }
  }
}

template <int BM, int BN>
__device__ void store_tile(float (*weight_tile)[BM + kWeightPad], float (*column_tile)[BN], const float* weight_regs,
                           const float* column_regs, const TileLoader& t) {
  using Shape = ImplicitGemmShape<BM, BN>;
  constexpr int kWeightThreadsPerRow = kTileK / Shape::kWeightPerThread;
  const int filter_in_tile = threadIdx.x / kWeightThreadsPerRow, column_in_tile = threadIdx.x % BN;
  CONV_UNROLL
  for (int i = 0; i < Shape::kWeightPerThread; ++i) weight_tile[t.weight_col + i][filter_in_tile] = weight_regs[i];
  CONV_UNROLL
  for (int i = 0; i < Shape::kColumnPerThread; ++i) column_tile[t.column_row + i][column_in_tile] = column_regs[i];
}

// acc[i][j] += weight_tile[kk][row i] * column_tile[kk][column j] over the step's kTileK values of crs.
template <int BM, int BN>
__device__ void multiply_tile(float (*acc)[8], const float (*weight_tile)[BM + kWeightPad],
                              const float (*column_tile)[BN], int ty, int tx) {
  CONV_UNROLL
  for (int kk = 0; kk < kTileK; ++kk) {
    const float4 a0 = *reinterpret_cast<const float4*>(&weight_tile[kk][ty * 4]);
    const float4 a1 = *reinterpret_cast<const float4*>(&weight_tile[kk][BM / 2 + ty * 4]);
    const float4 b0 = *reinterpret_cast<const float4*>(&column_tile[kk][tx * 4]);
    const float4 b1 = *reinterpret_cast<const float4*>(&column_tile[kk][BN / 2 + tx * 4]);
    const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
    CONV_UNROLL
    for (int i = 0; i < 8; ++i)
      CONV_UNROLL
      for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
  }
}

// out[n, k, p] = acc + bias[k] for this thread's 8x8 sub-tile; four consecutive columns are one float4
// when P % 4 == 0 (then they lie in one sample) and out is 16-byte aligned.
template <int BM, int BN>
__device__ void store_output(float* out, const float* bias, const float (*acc)[8], const ConvDims& d, int columns,
                             bool vector_store, int ty, int tx) {
  const int P = d.P();
  CONV_UNROLL
  for (int i = 0; i < 8; ++i) {
    const int k = blockIdx.y * BM + (i < 4 ? ty * 4 + i : BM / 2 + ty * 4 + i - 4);
    if (k >= d.K) continue;
    const float b = bias != nullptr ? bias[k] : 0.0f;
    CONV_UNROLL
    for (int half = 0; half < 2; ++half) {
      const int column0 = blockIdx.x * BN + half * (BN / 2) + tx * 4;
      const float* v = &acc[i][half * 4];
      if (vector_store && column0 < columns) {
        const int n = column0 / P, p = column0 - n * P;
        *reinterpret_cast<float4*>(out + (static_cast<int64_t>(n) * d.K + k) * P + p) =
            make_float4(v[0] + b, v[1] + b, v[2] + b, v[3] + b);
        continue;
      }
      for (int j = 0; j < 4; ++j) {
        const int column = column0 + j;
        if (column >= columns) break;
        const int n = column / P, p = column - n * P;
        out[(static_cast<int64_t>(n) * d.K + k) * P + p] = v[j] + b;
      }
    }
  }
}

// At least 2 blocks per SM: caps the 128x128 kernel at 128 registers (135 uncapped, which left one
// 8-warp block per SM) at the cost of a 4-byte spill (ptxas -v, CUDA 13.0, sm_90); untimed choice.
template <int BM, int BN>
__global__ void __launch_bounds__(ImplicitGemmShape<BM, BN>::kThreads, 2)
    conv_implicit_gemm_kernel(float* out, const float* in, const float* weight, const float* bias, ConvDims d,
                              int columns, bool vector_store) {
  using Shape = ImplicitGemmShape<BM, BN>;
  __shared__ ImplicitGemmTiles<BM, BN> tiles;
  const int tx = threadIdx.x % (BN / 8), ty = threadIdx.x / (BN / 8);
  const TileLoader loader = make_loader<BM, BN>(in, weight, d, columns);
  float acc[8][8] = {};
  float weight_regs[Shape::kWeightPerThread], column_regs[Shape::kColumnPerThread];
  const int steps = (d.crs() + kTileK - 1) / kTileK;
  load_tile<BM, BN>(weight_regs, column_regs, loader, d, 0);
  store_tile<BM, BN>(tiles.weight[0], tiles.column[0], weight_regs, column_regs, loader);
  __syncthreads();
  for (int step = 0; step < steps; ++step) {
    const int buffer = step % 2;
    const bool more = step + 1 < steps;
    if (more) load_tile<BM, BN>(weight_regs, column_regs, loader, d, (step + 1) * kTileK);
    multiply_tile<BM, BN>(acc, tiles.weight[buffer], tiles.column[buffer], ty, tx);
    // The other buffer was last read in step - 1, which every thread finished before the barrier ending it.
    if (more)
      store_tile<BM, BN>(tiles.weight[1 - buffer], tiles.column[1 - buffer], weight_regs, column_regs, loader);
    __syncthreads();
  }
  store_output<BM, BN>(out, bias, acc, d, columns, vector_store, ty, tx);
}

template <int BM, int BN>
void launch_implicit_gemm(float* out, const float* in, const float* weight, const float* bias, const ConvDims& d,
                          int columns, CudaStream stream) {
  const bool vector_store = d.P() % 4 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  const dim3 grid(cuda_ceil_div(columns, BN), cuda_ceil_div(d.K, BM));
  cuda_launch("conv_implicit_gemm_kernel", conv_implicit_gemm_kernel<BM, BN>, grid,
              dim3(ImplicitGemmShape<BM, BN>::kThreads), stream, out, in, weight, bias, d, columns, vector_store);
}

ConvTile auto_tile(int64_t K, int64_t columns) {
  const auto blocks = [&](int64_t bm, int64_t bn) { return (K + bm - 1) / bm * ((columns + bn - 1) / bn); };
  if (K > 64 && blocks(128, 128) >= kMinBlocksForLargeTile) return ConvTile::Tile128x128;
  if (blocks(64, 128) >= kMinBlocksForLargeTile) return ConvTile::Tile64x128;
  return ConvTile::Tile64x64;
}

}  // namespace

void conv2d_forward_implicit_gemm_cuda(float* out, const float* in, const float* weight, const float* bias,
                                       const Conv2dGeometry& g, CudaStream stream, ConvTile tile) {
  const ConvDims d = device_dims(g);
  check_fits_int(g.N * g.out_plane(), "N*OH*OW (columns)");
  const int columns = static_cast<int>(g.N * g.out_plane());
  if (columns == 0 || g.K == 0) return;
  if (tile == ConvTile::Auto) tile = auto_tile(g.K, columns);
  switch (tile) {
    case ConvTile::Tile128x128: return launch_implicit_gemm<128, 128>(out, in, weight, bias, d, columns, stream);
    case ConvTile::Tile64x128: return launch_implicit_gemm<64, 128>(out, in, weight, bias, d, columns, stream);
    default: return launch_implicit_gemm<64, 64>(out, in, weight, bias, d, columns, stream);
  }
}

// ---- variants ----

int conv2d_forward_cuda_variant_count() { return 2; }

const char* conv2d_forward_cuda_variant_name(int variant) {
  switch (variant) {
    case 1: return "im2col+gemm";
    case 2: return "implicit-gemm";
    default: BASTION_FAIL("conv2d_forward_cuda_variant: no variant ", variant, " (1..2)");
  }
}

void conv2d_forward_cuda_variant(int variant, float* out, const float* in, const float* weight, const float* bias,
                                 const Conv2dGeometry& g, float* workspace, CudaStream stream) {
  switch (variant) {
    case 1: return conv2d_forward_cuda(out, in, weight, bias, g, workspace, stream);
    case 2: return conv2d_forward_implicit_gemm_cuda(out, in, weight, bias, g, stream);
    default: BASTION_FAIL("conv2d_forward_cuda_variant: no variant ", variant, " (1..2)");
  }
}

}  // namespace bastion
