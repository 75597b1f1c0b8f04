// batchnorm on the GPU (contract: kernels/cuda/batchnorm.h, math: kernels/cpu/batchnorm.h).
// x viewed as (N, C, L); channel c's M = N*L values are flattened as m = n*L + i (neighbouring threads
// read neighbouring addresses of a run when L > 1, and BatchNorm1d's L = 1 still has M values to share).
//
// Each channel is cut into S slices of consecutive m (batch_norm_slices): the grid is (S, C), one block
// per slice, so a layer with few channels still fills the GPU. (One block per channel ran the first
// ResNet18 stage, 64 channels of 131,072 values, on 64 of an H100's 132 SMs: 7.4 of a 34 ms step.)
//
// Determinism: a block sums its slice in double, each thread its strided share in index order, then the
// threads in a fixed tree (warp butterfly, then the warps in order); a per-channel kernel adds the S
// slice sums in slice order. S depends only on the geometry, so a run repeats bit for bit on any GPU;
// the result differs from the CPU twin's sequential sum only in double rounding.
// Training statistics are two-pass like the CPU twin (mean, then the sum of squared deviations).
#include "kernels/cuda/batchnorm.h"

#include <algorithm>

#include "kernels/cuda/launch.h"

namespace bastion {

namespace {

constexpr int kThreads = 256;
constexpr int kWarpSize = 32;
constexpr int kWarps = kThreads / kWarpSize;
constexpr unsigned kFullMask = 0xffffffffu;
// Slicing: about 4 blocks per SM of a 132-SM H100 in all, none with fewer than 1024 values. Fixed
// numbers, not the device's, so that the summation order is the same on every GPU.
constexpr int64_t kTargetBlocks = 528, kMinSliceValues = 1024, kMaxSlices = 1024;

__device__ __forceinline__ double warp_sum(double value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(kFullMask, value, offset);
  return value;
}

// Sum of `value` over the block, returned to every thread. All threads must call it (two __syncthreads).
// A second call may follow at once: its first write to warp_sums comes after every thread has passed
// this call's second barrier, and only warp 0 reads warp_sums, before that barrier.
__device__ double block_sum(double value) {
  __shared__ double warp_sums[kWarps];
  __shared__ double total;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  value = warp_sum(value);
  if (lane == 0) warp_sums[warp] = value;
  __syncthreads();
  if (warp == 0) {
    double partial = lane < kWarps ? warp_sums[lane] : 0.0;
    partial = warp_sum(partial);
    if (lane == 0) total = partial;
  }
  __syncthreads();
  return total;
}

// Slice blockIdx.x of channel blockIdx.y: values [begin, end) of the channel's M.
struct Slice {
  int64_t c, begin, end;
};

__device__ __forceinline__ Slice block_slice(const BatchNormGeometry& g) {
  const int64_t M = g.N * g.L, slices = gridDim.x, chunk = (M + slices - 1) / slices;
  const int64_t begin = blockIdx.x * chunk;
  return {static_cast<int64_t>(blockIdx.y), begin, begin + chunk < M ? begin + chunk : M};
}

// Calls visit(offset) for this thread's values of the slice (m = begin + threadIdx.x, step kThreads),
// in order. (n, i) advance by a fixed step instead of a division per value.
template <class Visit>
__device__ __forceinline__ void for_each_value(const BatchNormGeometry& g, const Slice& s, Visit visit) {
  int64_t m = s.begin + threadIdx.x;
  if (m >= s.end) return;
  int64_t n = m / g.L, i = m - n * g.L;
  const int64_t dn = kThreads / g.L, di = kThreads % g.L;
  for (; m < s.end; m += kThreads) {
    visit((n * g.C + s.c) * g.L + i);
    n += dn, i += di;
    if (i >= g.L) i -= g.L, ++n;
  }
}

// partials[c * S + s] = sum over the slice of x (mean == nullptr) or of (x - mean[c])^2.
__global__ void batch_norm_slice_sums_kernel(double* partials, const float* x, const double* mean,
                                             BatchNormGeometry g) {
  const Slice s = block_slice(g);
  const double centre = mean != nullptr ? mean[s.c] : 0.0;
  double sum = 0.0;
  for_each_value(g, s, [&](int64_t offset) {
    const double d = x[offset] - centre;
    sum += mean != nullptr ? d * d : d;
  });
  sum = block_sum(sum);
  if (threadIdx.x == 0) partials[s.c * gridDim.x + blockIdx.x] = sum;
}

// One thread per channel: the slice sums in slice order.
__device__ __forceinline__ double channel_total(const double* partials, int64_t c, int slices, int stride = 1,
                                               int which = 0) {
  double total = 0.0;
  for (int s = 0; s < slices; ++s) total += partials[(c * slices + s) * stride + which];
  return total;
}

__global__ void batch_norm_mean_kernel(double* mean, const double* partials, BatchNormGeometry g, int slices) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c < g.C) mean[c] = channel_total(partials, c, slices) / static_cast<double>(g.N * g.L);
}

// Training: the variance from the squares' slice sums and the running-statistics update; eval: the
// running statistics. Then save_mean / save_invstd and the affine map y = x * scale + shift.
__global__ void batch_norm_finish_forward_kernel(float* scale_shift, float* save_mean, float* save_invstd,
                                                 const double* mean, const double* partials, const float* gamma,
                                                 const float* beta, float* running_mean, float* running_var,
                                                 BatchNormGeometry g, int slices, bool training, float momentum,
                                                 float eps) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= g.C) return;
  const int64_t M = g.N * g.L;
  double m = running_mean[c], var = running_var[c];
  if (training) {
    m = mean[c];
    var = channel_total(partials, c, slices) / static_cast<double>(M);
    const double unbiased = M > 1 ? var * M / (M - 1) : var;
    running_mean[c] = static_cast<float>((1.0 - momentum) * running_mean[c] + momentum * m);
    running_var[c] = static_cast<float>((1.0 - momentum) * running_var[c] + momentum * unbiased);
  }
  const float invstd = static_cast<float>(1.0 / sqrt(var + eps));
  save_mean[c] = static_cast<float>(m);
  save_invstd[c] = invstd;
  const float a = gamma[c] * invstd;
  scale_shift[2 * c] = a;
  scale_shift[2 * c + 1] = beta[c] - static_cast<float>(m) * a;
}

__global__ void batch_norm_apply_kernel(float* y, const float* x, const float* scale_shift, BatchNormGeometry g) {
  const Slice s = block_slice(g);
  const float a = scale_shift[2 * s.c], b = scale_shift[2 * s.c + 1];
  for_each_value(g, s, [&](int64_t offset) { y[offset] = x[offset] * a + b; });
}

// partials[2 (c S + s)] = the slice's sum of dy, [+1] its sum of dy * xhat (a float product, as the CPU twin).
__global__ void batch_norm_backward_sums_kernel(double* partials, const float* dy, const float* x,
                                                const float* save_mean, const float* save_invstd,
                                                BatchNormGeometry g) {
  const Slice s = block_slice(g);
  const float mean = save_mean[s.c], invstd = save_invstd[s.c];
  double sum_dy = 0.0, sum_dy_xhat = 0.0;
  for_each_value(g, s, [&](int64_t offset) {
    sum_dy += dy[offset];
    sum_dy_xhat += dy[offset] * (x[offset] - mean) * invstd;
  });
  sum_dy = block_sum(sum_dy);
  sum_dy_xhat = block_sum(sum_dy_xhat);
  if (threadIdx.x == 0) {
    partials[2 * (s.c * gridDim.x + blockIdx.x)] = sum_dy;
    partials[2 * (s.c * gridDim.x + blockIdx.x) + 1] = sum_dy_xhat;
  }
}

// dbeta, dgamma (when asked for) and dx's per-channel factors: k = gamma * invstd, and in training the
// means of dy and dy * xhat (eval: 0, the statistics do not depend on x). partials may be null (eval dx).
__global__ void batch_norm_finish_backward_kernel(float* factors, float* dgamma, float* dbeta, const double* partials,
                                                  const float* gamma, const float* save_invstd, BatchNormGeometry g,
                                                  int slices, bool training) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= g.C) return;
  const double sum_dy = partials != nullptr ? channel_total(partials, c, slices, 2, 0) : 0.0;
  const double sum_dy_xhat = partials != nullptr ? channel_total(partials, c, slices, 2, 1) : 0.0;
  if (dbeta != nullptr) dbeta[c] = static_cast<float>(sum_dy);
  if (dgamma != nullptr) dgamma[c] = static_cast<float>(sum_dy_xhat);
  const int64_t M = g.N * g.L;
  factors[3 * c] = gamma[c] * save_invstd[c];
  factors[3 * c + 1] = training ? static_cast<float>(sum_dy / M) : 0.0f;
  factors[3 * c + 2] = training ? static_cast<float>(sum_dy_xhat / M) : 0.0f;
}

__global__ void batch_norm_dx_kernel(float* dx, const float* dy, const float* x, const float* save_mean,
                                     const float* save_invstd, const float* factors, BatchNormGeometry g) {
  const Slice s = block_slice(g);
  const float mean = save_mean[s.c], invstd = save_invstd[s.c];
  const float k = factors[3 * s.c], mean_dy = factors[3 * s.c + 1], mean_dy_xhat = factors[3 * s.c + 2];
  for_each_value(g, s, [&](int64_t offset) {
    dx[offset] = k * (dy[offset] - mean_dy - (x[offset] - mean) * invstd * mean_dy_xhat);
  });
}

dim3 slice_grid(const BatchNormGeometry& g) {
  return dim3(static_cast<unsigned>(batch_norm_slices(g)), static_cast<unsigned>(g.C));
}

dim3 channel_blocks(const BatchNormGeometry& g) { return dim3(cuda_ceil_div(g.C, kThreads)); }

}  // namespace

int64_t batch_norm_slices(const BatchNormGeometry& g) {
  const int64_t M = g.N * g.L;
  const int64_t wanted = std::min({(kTargetBlocks + g.C - 1) / std::max<int64_t>(g.C, 1), M / kMinSliceValues,
                                   kMaxSlices});
  return std::max<int64_t>(wanted, 1);
}

void batch_norm_forward_cuda(float* y, float* save_mean, float* save_invstd, const float* x, const float* gamma,
                             const float* beta, float* running_mean, float* running_var, const BatchNormGeometry& g,
                             bool training, float momentum, float eps, CudaStream stream) {
  if (g.C == 0) return;
  BASTION_CHECK(g.C <= 65535, "batch_norm_forward_cuda: ", g.C, " channels, more than the grid's y limit 65535");
  const int slices = static_cast<int>(batch_norm_slices(g));
  // Evaluation mode normalises with the running statistics: no batch sums, so no scratch for them.
  CudaScratch<double> partials(training ? g.C * slices : 0), mean(training ? g.C : 0);
  CudaScratch<float> scale_shift(2 * g.C);
  if (training) {
    cuda_launch("batch_norm_slice_sums_kernel", batch_norm_slice_sums_kernel, slice_grid(g), dim3(kThreads), stream,
                partials.ptr, x, static_cast<const double*>(nullptr), g);
    cuda_launch("batch_norm_mean_kernel", batch_norm_mean_kernel, channel_blocks(g), dim3(kThreads), stream, mean.ptr,
                static_cast<const double*>(partials.ptr), g, slices);
    cuda_launch("batch_norm_slice_sums_kernel", batch_norm_slice_sums_kernel, slice_grid(g), dim3(kThreads), stream,
                partials.ptr, x, static_cast<const double*>(mean.ptr), g);
  }
  cuda_launch("batch_norm_finish_forward_kernel", batch_norm_finish_forward_kernel, channel_blocks(g), dim3(kThreads),
              stream, scale_shift.ptr, save_mean, save_invstd, static_cast<const double*>(mean.ptr),
              static_cast<const double*>(partials.ptr), gamma, beta, running_mean, running_var, g, slices, training,
              momentum, eps);
  cuda_launch("batch_norm_apply_kernel", batch_norm_apply_kernel, slice_grid(g), dim3(kThreads), stream, y, x,
              static_cast<const float*>(scale_shift.ptr), g);
}

void batch_norm_backward_cuda(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                              const float* gamma, const float* save_mean, const float* save_invstd,
                              const BatchNormGeometry& g, bool training, CudaStream stream) {
  if (g.C == 0 || (dx == nullptr && dgamma == nullptr && dbeta == nullptr)) return;
  BASTION_CHECK(g.C <= 65535, "batch_norm_backward_cuda: ", g.C, " channels, more than the grid's y limit 65535");
  const int slices = static_cast<int>(batch_norm_slices(g));
  const bool need_sums = dgamma != nullptr || dbeta != nullptr || (dx != nullptr && training);
  CudaScratch<double> partials(need_sums ? 2 * g.C * slices : 0);  // null without sums: the finish reads none
  CudaScratch<float> factors(3 * g.C);
  if (need_sums)
    cuda_launch("batch_norm_backward_sums_kernel", batch_norm_backward_sums_kernel, slice_grid(g), dim3(kThreads),
                stream, partials.ptr, dy, x, save_mean, save_invstd, g);
  cuda_launch("batch_norm_finish_backward_kernel", batch_norm_finish_backward_kernel, channel_blocks(g),
              dim3(kThreads), stream, factors.ptr, dgamma, dbeta,
              static_cast<const double*>(partials.ptr), gamma, save_invstd, g, slices, training);
  if (dx != nullptr)
    cuda_launch("batch_norm_dx_kernel", batch_norm_dx_kernel, slice_grid(g), dim3(kThreads), stream, dx, dy, x,
                save_mean, save_invstd, static_cast<const float*>(factors.ptr), g);
}

}  // namespace bastion
