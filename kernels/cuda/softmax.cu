// The softmax family on the GPU (contract: kernels/cuda/softmax.h, math: kernels/cpu/softmax.h).
// One warp per row of the (N, C) matrix: lanes stride over the row's columns, the row maximum and the
// sums meet in warp butterflies (every lane ends with the same value, bit for bit, since the tree is the
// same for all lanes and float addition commutes). Sums are accumulated in double, as on the CPU.
//
// The two losses need the batch mean as a device scalar and kernels must not allocate, so there is no
// room for per-row partial losses: each loss is computed by a single block of kLossThreads threads whose
// warps take rows w, w + kLossWarps, ... and sum their rows' losses in row order; thread 0 then adds the
// warps' sums in warp order. The order depends only on kLossThreads, so the loss is deterministic. The
// cost is one SM for the whole batch (estimated, not yet measured: tens of microseconds at N*C ~ 10^5,
// small beside a network's forward); the backward kernels (one warp per row over the whole GPU) are
// unaffected. If it ever shows in a profile, a caller-provided workspace of N floats for the per-row
// losses would let the forward spread over the GPU and a second one-block kernel sum them in order.
//
// Exponentials use expf (at most 2 ulp, CUDA C Programming Guide, table of single-precision
// functions; not __expf, whose error grows with |x| and |x| reaches ~100 for confident logits) where
// the CPU twin uses exp in double: the results differ by a few float roundings (tests/test_cuda_softmax.cpp).
#include "kernels/cuda/launch.h"
#include "kernels/cuda/softmax.h"

namespace bastion {

namespace {

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kThreads = 256;  // the row kernels: 8 rows per block
constexpr int kRowsPerBlock = kThreads / kWarpSize;
constexpr int kLossThreads = 1024;  // the loss kernels: one block, the largest, to spread the batch widest
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

// log sum_c exp(row[c] * inv_scale), shifted by the row maximum so large logits do not overflow.
// Called by all 32 lanes of a warp (it shuffles); every lane returns the same value.
__device__ float row_log_total(const float* row, float inv_scale, int64_t C, int lane) {
  float max_value = -INFINITY;
  for (int64_t c = lane; c < C; c += kWarpSize) max_value = fmaxf(max_value, row[c] * inv_scale);
  max_value = warp_max(max_value);
  double total = 0.0;
  for (int64_t c = lane; c < C; c += kWarpSize) total += expf(row[c] * inv_scale - max_value);
  total = warp_sum(total);
  return max_value + static_cast<float>(log(total));
}

// Grid: ceil(N / kRowsPerBlock) blocks; warp w of block b owns row b*kRowsPerBlock + w.
__device__ __forceinline__ int64_t warp_row() {
  return static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
}

__global__ void log_softmax_forward_kernel(float* out, const float* x, int64_t N, int64_t C) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = warp_row();
  if (row < N) {  // uniform over the warp, so the shuffles inside see all 32 lanes
    const float* xr = x + row * C;
    const float log_total = row_log_total(xr, 1.0f, C, lane);
    for (int64_t c = lane; c < C; c += kWarpSize) out[row * C + c] = xr[c] - log_total;
  }
}

__global__ void log_softmax_backward_kernel(float* dx, const float* grad_out, const float* out, int64_t N, int64_t C) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = warp_row();
  if (row < N) {
    const float* g = grad_out + row * C;
    const float* o = out + row * C;
    double total = 0.0;
    for (int64_t c = lane; c < C; c += kWarpSize) total += g[c];
    const float sum_g = static_cast<float>(warp_sum(total));
    for (int64_t c = lane; c < C; c += kWarpSize) dx[row * C + c] = g[c] - expf(o[c]) * sum_g;
  }
}

// One block (see the top of the file). Writes probs and loss = mean_n(-log softmax(x)[n, y[n]]).
__global__ void cross_entropy_forward_kernel(float* loss, float* probs, const float* x, const int32_t* y, int64_t N,
                                             int64_t C) {
  __shared__ double warp_losses[kLossWarps];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  double warp_loss = 0.0;
  for (int64_t row = warp; row < N; row += kLossWarps) {  // uniform over the warp
    const float* xr = x + row * C;
    const float log_total = row_log_total(xr, 1.0f, C, lane);
    for (int64_t c = lane; c < C; c += kWarpSize) probs[row * C + c] = expf(xr[c] - log_total);
    warp_loss -= xr[y[row]] - log_total;  // the float log-probability of the label, as the CPU twin
  }
  if (lane == 0) warp_losses[warp] = warp_loss;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int w = 0; w < kLossWarps; ++w) total += warp_losses[w];
    *loss = N > 0 ? static_cast<float>(total / static_cast<double>(N)) : 0.0f;
  }
}

// dx = (probs - onehot(y)) * g / N, one thread per element (grid-stride).
__global__ void cross_entropy_backward_kernel(float* dx, const float* probs, const int32_t* y, const float* grad,
                                              int64_t N, int64_t C) {
  const float scale = *grad / static_cast<float>(N);  // N > 0: the launcher skips empty batches
  const int64_t total = N * C, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t row = i / C, c = i - row * C;
    float value = probs[i] * scale;
    if (c == y[row]) value -= scale;
    dx[i] = value;
  }
}

// One block (see the top of the file). Writes log_ps, log_pt and
// loss = T^2 * mean_n sum_c pt * (log pt - log ps).
__global__ void kl_div_forward_kernel(float* loss, float* log_ps, float* log_pt, const float* student,
                                      const float* teacher, float T, float inv_scale, int64_t N, int64_t C) {
  __shared__ double warp_losses[kLossWarps];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  // This lane's columns of this warp's rows, in row order.
  double lane_loss = 0.0;
  for (int64_t row = warp; row < N; row += kLossWarps) {  // uniform over the warp
    const float* s = student + row * C;
    const float* t = teacher + row * C;
    const float log_total_s = row_log_total(s, inv_scale, C, lane);
    const float log_total_t = row_log_total(t, inv_scale, C, lane);
    for (int64_t c = lane; c < C; c += kWarpSize) {
      const float ls = s[c] * inv_scale - log_total_s, lt = t[c] * inv_scale - log_total_t;
      log_ps[row * C + c] = ls;
      log_pt[row * C + c] = lt;
      lane_loss += static_cast<double>(expf(lt)) * (static_cast<double>(lt) - ls);
    }
  }
  const double warp_loss = warp_sum(lane_loss);
  if (lane == 0) warp_losses[warp] = warp_loss;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int w = 0; w < kLossWarps; ++w) total += warp_losses[w];
    *loss = N > 0 ? static_cast<float>(total * T * T / static_cast<double>(N)) : 0.0f;
  }
}

// One warp per row: kl_n first, then
//   ds = g*T/N * (ps - pt),   dt = g*T/N * pt * ((log pt - log ps) - kl_n);  null outputs skipped.
__global__ void kl_div_backward_kernel(float* d_student, float* d_teacher, const float* log_ps, const float* log_pt,
                                       float T, const float* grad, int64_t N, int64_t C) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = warp_row();
  if (row < N) {
    const float scale = *grad * T / static_cast<float>(N);
    const float* ls = log_ps + row * C;
    const float* lt = log_pt + row * C;
    double kl = 0.0;
    for (int64_t c = lane; c < C; c += kWarpSize) kl += static_cast<double>(expf(lt[c])) * (lt[c] - ls[c]);
    const float kl_n = static_cast<float>(warp_sum(kl));
    for (int64_t c = lane; c < C; c += kWarpSize) {
      const float pt = expf(lt[c]);
      if (d_student != nullptr) d_student[row * C + c] = scale * (expf(ls[c]) - pt);
      if (d_teacher != nullptr) d_teacher[row * C + c] = scale * pt * ((lt[c] - ls[c]) - kl_n);
    }
  }
}

unsigned row_blocks(int64_t N) { return cuda_ceil_div(N, kRowsPerBlock); }

}  // namespace

void log_softmax_forward_cuda(float* out, const float* x, int64_t N, int64_t C, CudaStream stream) {
  if (N == 0 || C == 0) return;
  cuda_launch("log_softmax_forward_kernel", log_softmax_forward_kernel, dim3(row_blocks(N)), dim3(kThreads), stream,
              out, x, N, C);
}

void log_softmax_backward_cuda(float* dx, const float* grad_out, const float* out, int64_t N, int64_t C,
                               CudaStream stream) {
  if (N == 0 || C == 0) return;
  cuda_launch("log_softmax_backward_kernel", log_softmax_backward_kernel, dim3(row_blocks(N)), dim3(kThreads), stream,
              dx, grad_out, out, N, C);
}

void cross_entropy_forward_cuda(float* loss, float* probs, const float* x, const int32_t* y, int64_t N, int64_t C,
                                CudaStream stream) {
  // Launched even for N = 0: the kernel writes the loss 0, as the CPU twin returns.
  cuda_launch("cross_entropy_forward_kernel", cross_entropy_forward_kernel, dim3(1), dim3(kLossThreads), stream, loss,
              probs, x, y, N, C);
}

void cross_entropy_backward_cuda(float* dx, const float* probs, const int32_t* y, const float* grad, int64_t N,
                                 int64_t C, CudaStream stream) {
  if (N == 0 || C == 0) return;
  cuda_launch("cross_entropy_backward_kernel", cross_entropy_backward_kernel,
              dim3(cuda_grid_stride_blocks(N * C, kThreads)), dim3(kThreads), stream, dx, probs, y, grad, N, C);
}

void kl_div_forward_cuda(float* loss, float* log_ps, float* log_pt, const float* student, const float* teacher, float T,
                         int64_t N, int64_t C, CudaStream stream) {
  // 1/T in float on the host, as the CPU twin scales its logits, so both see the same scaled values.
  cuda_launch("kl_div_forward_kernel", kl_div_forward_kernel, dim3(1), dim3(kLossThreads), stream, loss, log_ps, log_pt,
              student, teacher, T, 1.0f / T, N, C);
}

void kl_div_backward_cuda(float* d_student, float* d_teacher, const float* log_ps, const float* log_pt, float T,
                          const float* grad, int64_t N, int64_t C, CudaStream stream) {
  if (N == 0 || C == 0 || (d_student == nullptr && d_teacher == nullptr)) return;
  cuda_launch("kl_div_backward_kernel", kl_div_backward_kernel, dim3(row_blocks(N)), dim3(kThreads), stream, d_student,
              d_teacher, log_ps, log_pt, T, grad, N, C);
}

}  // namespace bastion
