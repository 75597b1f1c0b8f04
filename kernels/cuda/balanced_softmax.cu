// The balanced-softmax cross-entropy on the GPU (contract: kernels/cuda/balanced_softmax.h, math:
// kernels/cpu/balanced_softmax.h). The forward is kernels/cuda/softmax.cu's cross-entropy forward on the
// shifted logits s = x + log_prior, with the same layout: one block of kLossThreads threads, warp w takes
// rows w, w + kLossWarps, ..., the warps' losses are summed in warp order (deterministic). A class with
// log_prior = -inf has s = -inf: fmaxf ignores it and expf(-inf) = 0, so its probability is 0 (the op
// refuses labels of such classes, so each row keeps a finite s). expf (<= 2 ulp) where the CPU twin uses
// exp in double: see softmax.cu for the resulting tolerance.
// The backward is cross-entropy's dx = (probs - onehot(y)) * g / N on the balanced probabilities, so it
// calls cross_entropy_backward_cuda rather than repeating that kernel.
#include "kernels/cuda/balanced_softmax.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/softmax.h"

namespace bastion {

namespace {

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kLossThreads = 1024;
constexpr int kLossWarps = kLossThreads / kWarpSize;

__device__ __forceinline__ float warp_max(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(kFullMask, value, offset));
  return value;
}

__device__ __forceinline__ double warp_sum(double value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(kFullMask, value, offset);
  return value;
}

// log sum_c exp(row[c] + log_prior[c]), shifted by the maximum. Called by all 32 lanes of a warp.
__device__ float balanced_row_log_total(const float* row, const float* log_prior, int64_t C, int lane) {
  float max_value = -INFINITY;
  for (int64_t c = lane; c < C; c += kWarpSize) max_value = fmaxf(max_value, row[c] + log_prior[c]);
  max_value = warp_max(max_value);
  double total = 0.0;
  for (int64_t c = lane; c < C; c += kWarpSize) total += expf(row[c] + log_prior[c] - max_value);
  total = warp_sum(total);
  return max_value + static_cast<float>(log(total));
}

// One block. Writes probs and loss = mean_n(-log softmax(x[n] + log_prior)[y[n]]).
__global__ void balanced_softmax_forward_kernel(float* loss, float* probs, const float* x, const int32_t* y,
                                                const float* log_prior, int64_t N, int64_t C) {
  __shared__ double warp_losses[kLossWarps];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  double warp_loss = 0.0;
  for (int64_t row = warp; row < N; row += kLossWarps) {  // uniform over the warp
    const float* xr = x + row * C;
    const float log_total = balanced_row_log_total(xr, log_prior, C, lane);
    for (int64_t c = lane; c < C; c += kWarpSize) probs[row * C + c] = expf(xr[c] + log_prior[c] - log_total);
    const int32_t label = y[row];
    warp_loss -= xr[label] + log_prior[label] - log_total;  // the float log-probability, as the CPU twin
  }
  if (lane == 0) warp_losses[warp] = warp_loss;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int w = 0; w < kLossWarps; ++w) total += warp_losses[w];
    *loss = N > 0 ? static_cast<float>(total / static_cast<double>(N)) : 0.0f;
  }
}

}  // namespace

void balanced_softmax_forward_cuda(float* loss, float* probs, const float* x, const int32_t* y, const float* log_prior,
                                   int64_t N, int64_t C, CudaStream stream) {
  // Launched even for N = 0: the kernel writes the loss 0, as the CPU twin returns.
  cuda_launch("balanced_softmax_forward_kernel", balanced_softmax_forward_kernel, dim3(1), dim3(kLossThreads), stream,
              loss, probs, x, y, log_prior, N, C);
}

void balanced_softmax_backward_cuda(float* dx, const float* probs, const int32_t* y, const float* grad, int64_t N,
                                    int64_t C, CudaStream stream) {
  cross_entropy_backward_cuda(dx, probs, y, grad, N, C, stream);
}

}  // namespace bastion
