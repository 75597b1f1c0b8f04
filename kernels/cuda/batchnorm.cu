// batchnorm on the GPU (contract: kernels/cuda/batchnorm.h, math: kernels/cpu/batchnorm.h).
// x viewed as (N, C, L); one block per channel c walks that channel's M = N*L values, flattened as
// m = n*L + i so that neighbouring threads read neighbouring addresses of a run when L > 1 and the block
// still has M values to share when L = 1 (BatchNorm1d).
//
// Determinism: each thread sums its strided share of the channel in double in index order, then the
// block adds the per-thread sums in a fixed tree (warp butterfly, then the warps' sums in warp order).
// The order depends only on kThreads, so a run repeats bit for bit; it differs from the CPU twin's
// sequential sum only in double rounding, far below the float outputs' resolution.
// Training statistics are two-pass like the CPU twin (mean, then the sum of squared deviations).
#include "kernels/cuda/batchnorm.h"
#include "kernels/cuda/launch.h"

namespace bastion {

namespace {

constexpr int kThreads = 256;  // 8 warps per channel: enough loads in flight for a channel of a few 10^4 values
constexpr int kWarpSize = 32;
constexpr int kWarps = kThreads / kWarpSize;
constexpr unsigned kFullMask = 0xffffffffu;

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

// Offset of the m-th value (m = n*L + i) of channel c.
__device__ __forceinline__ int64_t channel_offset(const BatchNormGeometry& g, int64_t c, int64_t m) {
  const int64_t n = m / g.L, i = m - n * g.L;
  return (n * g.C + c) * g.L + i;
}

// Grid: one block per channel. Training computes the batch statistics and updates the running ones
// (thread 0); eval reads the running ones. Every thread then normalises its share of the channel.
__global__ void batch_norm_forward_kernel(float* y, float* save_mean, float* save_invstd, const float* x,
                                          const float* gamma, const float* beta, float* running_mean,
                                          float* running_var, BatchNormGeometry g, bool training, float momentum,
                                          float eps) {
  const int64_t c = blockIdx.x, M = g.N * g.L;
  double mean = 0.0, var = 0.0;
  if (training) {  // uniform over the block: the barriers inside block_sum are reached by all threads
    double sum = 0.0;
    for (int64_t m = threadIdx.x; m < M; m += kThreads) sum += x[channel_offset(g, c, m)];
    mean = block_sum(sum) / static_cast<double>(M);
    double squares = 0.0;
    for (int64_t m = threadIdx.x; m < M; m += kThreads) {
      const double deviation = x[channel_offset(g, c, m)] - mean;
      squares += deviation * deviation;
    }
    var = block_sum(squares) / static_cast<double>(M);
    if (threadIdx.x == 0) {
      const double unbiased = M > 1 ? var * M / (M - 1) : var;
      running_mean[c] = static_cast<float>((1.0 - momentum) * running_mean[c] + momentum * mean);
      running_var[c] = static_cast<float>((1.0 - momentum) * running_var[c] + momentum * unbiased);
    }
  } else {
    mean = running_mean[c];
    var = running_var[c];
  }
  const float invstd = static_cast<float>(1.0 / sqrt(var + eps));
  if (threadIdx.x == 0) {
    save_mean[c] = static_cast<float>(mean);
    save_invstd[c] = invstd;
  }
  const float a = gamma[c] * invstd, b = beta[c] - static_cast<float>(mean) * a;
  for (int64_t m = threadIdx.x; m < M; m += kThreads) {
    const int64_t offset = channel_offset(g, c, m);
    y[offset] = x[offset] * a + b;
  }
}

// Grid: one block per channel. The two sums are needed for dgamma, dbeta, and for dx in training (the
// batch statistics depend on x); eval dx alone skips them. Null outputs are skipped.
__global__ void batch_norm_backward_kernel(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                                           const float* gamma, const float* save_mean, const float* save_invstd,
                                           BatchNormGeometry g, bool training) {
  const int64_t c = blockIdx.x, M = g.N * g.L;
  const float mean = save_mean[c], invstd = save_invstd[c];
  double sum_dy = 0.0, sum_dy_xhat = 0.0;
  if (dgamma != nullptr || dbeta != nullptr || (dx != nullptr && training)) {  // uniform over the block
    for (int64_t m = threadIdx.x; m < M; m += kThreads) {
      const int64_t offset = channel_offset(g, c, m);
      sum_dy += dy[offset];
      sum_dy_xhat += dy[offset] * (x[offset] - mean) * invstd;  // float product, as the CPU twin
    }
    sum_dy = block_sum(sum_dy);
    sum_dy_xhat = block_sum(sum_dy_xhat);
  }
  if (threadIdx.x == 0 && dbeta != nullptr) dbeta[c] = static_cast<float>(sum_dy);
  if (threadIdx.x == 0 && dgamma != nullptr) dgamma[c] = static_cast<float>(sum_dy_xhat);
  if (dx == nullptr) return;  // after the last barrier: no thread is left waiting
  const float k = gamma[c] * invstd;
  const float mean_dy = training ? static_cast<float>(sum_dy / M) : 0.0f;
  const float mean_dy_xhat = training ? static_cast<float>(sum_dy_xhat / M) : 0.0f;
  for (int64_t m = threadIdx.x; m < M; m += kThreads) {
    const int64_t offset = channel_offset(g, c, m);
    dx[offset] = k * (dy[offset] - mean_dy - (x[offset] - mean) * invstd * mean_dy_xhat);
  }
}

}  // namespace

void batch_norm_forward_cuda(float* y, float* save_mean, float* save_invstd, const float* x, const float* gamma,
                             const float* beta, float* running_mean, float* running_var, const BatchNormGeometry& g,
                             bool training, float momentum, float eps, CudaStream stream) {
  if (g.C == 0) return;
  cuda_launch("batch_norm_forward_kernel", batch_norm_forward_kernel, dim3(static_cast<unsigned>(g.C)), dim3(kThreads),
              stream, y, save_mean, save_invstd, x, gamma, beta, running_mean, running_var, g, training, momentum, eps);
}

void batch_norm_backward_cuda(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                              const float* gamma, const float* save_mean, const float* save_invstd,
                              const BatchNormGeometry& g, bool training, CudaStream stream) {
  if (g.C == 0 || (dx == nullptr && dgamma == nullptr && dbeta == nullptr)) return;
  cuda_launch("batch_norm_backward_kernel", batch_norm_backward_kernel, dim3(static_cast<unsigned>(g.C)),
              dim3(kThreads), stream, dx, dgamma, dbeta, dy, x, gamma, save_mean, save_invstd, g, training);
}

}  // namespace bastion
