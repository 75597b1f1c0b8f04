// FedCR's Gaussian bottleneck on the GPU (contract: kernels/cuda/gaussian.h, math: kernels/cpu/gaussian.h).
// Layout: one thread per (n, j) of the (N, d) latent, grid-stride; the thread walks the S samples, whose
// rows s*N + n sit N*d apart, so a warp reads and writes 32 consecutive j of one row (coalesced).
// Precision follows the CPU twin: softplus, its slope and every KL term in double (KL's backward subtracts
// two terms that nearly cancel where the encoder matches the prior, so float there would disagree with the
// CPU by far more than rounding), sums over samples in double in the same s order. The only float
// arithmetic is z = mu + sigma * eps, which nvcc may fuse into one FMA (one rounding fewer than the CPU).
// gaussian_kl_forward_cuda is one block of kLossThreads: each thread sums its strided terms, then
// cuda_block_sum adds them in a fixed order (deterministic; another order than the CPU's row-by-row sum,
// both in double).
#include "kernels/cuda/gaussian.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.h"

namespace bastion {

namespace {

constexpr int kThreads = 256;
constexpr int kLossThreads = 1024;
constexpr double kSoftplusThreshold = 20.0;  // PyTorch: softplus(x) = x above it
constexpr double kSigmaFloor = 1e-8;         // FedCR's clamp inside the log of KL_between_normals

__device__ __forceinline__ double softplus(double x) { return x > kSoftplusThreshold ? x : log1p(exp(x)); }
__device__ __forceinline__ double softplus_slope(double x) {
  return x > kSoftplusThreshold ? 1.0 : 1.0 / (1.0 + exp(-x));
}

__device__ __forceinline__ int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// The pre-softplus input of sigma[n, j]: E[n, d + j] - alpha, in double.
__device__ __forceinline__ double sigma_input(const float* encoding, int64_t n, int64_t j, int64_t d, float alpha) {
  return static_cast<double>(encoding[n * 2 * d + d + j]) - alpha;
}

__global__ void gaussian_sample_forward_kernel(float* z, const float* encoding, const float* eps, int64_t S, int64_t N,
                                               int64_t d, float alpha) {
  const int64_t latent = N * d;
  for (int64_t i = first_index(); i < latent; i += grid_stride()) {
    const int64_t n = i / d, j = i % d;
    const float mu = encoding[n * 2 * d + j];
    const float sigma = static_cast<float>(softplus(sigma_input(encoding, n, j, d, alpha)));
    for (int64_t s = 0; s < S; ++s) z[s * latent + i] = mu + sigma * eps[s * latent + i];
  }
}

// ASSIGNS dE[n, j] = sum_s gz, dE[n, d + j] = slope * sum_s gz * eps (float * float is exact in double).
__global__ void gaussian_sample_backward_kernel(float* grad_encoding, const float* grad_z, const float* encoding,
                                                const float* eps, int64_t S, int64_t N, int64_t d, float alpha) {
  const int64_t latent = N * d;
  for (int64_t i = first_index(); i < latent; i += grid_stride()) {
    const int64_t n = i / d, j = i % d;
    double g_mu = 0.0, g_sigma = 0.0;
    for (int64_t s = 0; s < S; ++s) {
      g_mu += grad_z[s * latent + i];
      g_sigma += static_cast<double>(grad_z[s * latent + i]) * eps[s * latent + i];
    }
    grad_encoding[n * 2 * d + j] = static_cast<float>(g_mu);
    grad_encoding[n * 2 * d + d + j] = static_cast<float>(g_sigma * softplus_slope(sigma_input(encoding, n, j, d, alpha)));
  }
}

// 2 * KL_j of one latent coordinate i = n*d + j (the row's sum is halved once, by the caller).
__device__ double gaussian_kl_twice_term(const float* encoding, const float* prior_mu, const float* prior_sigma,
                                         int64_t i, int64_t d, float alpha) {
  const int64_t n = i / d, j = i % d;
  const double mu = encoding[n * 2 * d + j], sigma = softplus(sigma_input(encoding, n, j, d, alpha));
  const double pm = prior_mu[i], ps = prior_sigma[i], diff = mu - pm;
  return (ps * ps + diff * diff) / (sigma * sigma) - 1.0 + 2.0 * log(fmax(sigma, kSigmaFloor)) -
         2.0 * log(fmax(ps, kSigmaFloor));
}

// One block. Writes loss = (0.5 / N) * sum over all (n, j) of the twice-terms.
__global__ void gaussian_kl_forward_kernel(float* loss, const float* encoding, const float* prior_mu,
                                           const float* prior_sigma, int64_t N, int64_t d, float alpha) {
  double total[1] = {0.0};
  for (int64_t i = threadIdx.x; i < N * d; i += blockDim.x)
    total[0] += gaussian_kl_twice_term(encoding, prior_mu, prior_sigma, i, d, alpha);
  cuda_block_sum(total);
  if (threadIdx.x == 0) *loss = static_cast<float>(0.5 * total[0] / static_cast<double>(N));
}

__global__ void gaussian_kl_backward_kernel(float* grad_encoding, const float* encoding, const float* prior_mu,
                                            const float* prior_sigma, const float* grad, int64_t N, int64_t d,
                                            float alpha) {
  const double g = static_cast<double>(*grad) / static_cast<double>(N);
  for (int64_t i = first_index(); i < N * d; i += grid_stride()) {
    const int64_t n = i / d, j = i % d;
    const double pre = sigma_input(encoding, n, j, d, alpha);
    const double mu = encoding[n * 2 * d + j], sigma = softplus(pre);
    const double pm = prior_mu[i], ps = prior_sigma[i], diff = mu - pm;
    const double d_sigma = -(ps * ps + diff * diff) / (sigma * sigma * sigma) + (sigma > kSigmaFloor ? 1.0 / sigma : 0.0);
    grad_encoding[n * 2 * d + j] = static_cast<float>(g * diff / (sigma * sigma));
    grad_encoding[n * 2 * d + d + j] = static_cast<float>(g * d_sigma * softplus_slope(pre));
  }
}

// out[i] = mean over s of in[s*N*C + i], summed in double in s order (as the CPU twin: bitwise equal).
__global__ void sample_mean_forward_kernel(float* out, const float* in, int64_t S, int64_t rows_by_cols) {
  for (int64_t i = first_index(); i < rows_by_cols; i += grid_stride()) {
    double sum = 0.0;
    for (int64_t s = 0; s < S; ++s) sum += in[s * rows_by_cols + i];
    out[i] = static_cast<float>(sum / static_cast<double>(S));
  }
}

// ASSIGNS grad_in[k] = grad_out[k mod N*C] * inv_samples over all S*N*C entries.
__global__ void sample_mean_backward_kernel(float* grad_in, const float* grad_out, float inv_samples, int64_t S,
                                            int64_t rows_by_cols) {
  for (int64_t k = first_index(); k < S * rows_by_cols; k += grid_stride())
    grad_in[k] = grad_out[k % rows_by_cols] * inv_samples;
}

unsigned blocks_for(int64_t n) { return cuda_grid_stride_blocks(n, kThreads); }

}  // namespace

void gaussian_sample_forward_cuda(float* z, const float* encoding, const float* eps, int64_t S, int64_t N, int64_t d,
                                  float alpha, CudaStream stream) {
  if (S * N * d == 0) return;
  cuda_launch("gaussian_sample_forward_kernel", gaussian_sample_forward_kernel, dim3(blocks_for(N * d)),
              dim3(kThreads), stream, z, encoding, eps, S, N, d, alpha);
}

void gaussian_sample_backward_cuda(float* grad_encoding, const float* grad_z, const float* encoding, const float* eps,
                                   int64_t S, int64_t N, int64_t d, float alpha, CudaStream stream) {
  if (N * d == 0) return;  // S = 0 still assigns: dE = 0, as the CPU twin
  cuda_launch("gaussian_sample_backward_kernel", gaussian_sample_backward_kernel, dim3(blocks_for(N * d)),
              dim3(kThreads), stream, grad_encoding, grad_z, encoding, eps, S, N, d, alpha);
}

void gaussian_kl_forward_cuda(float* loss, const float* encoding, const float* prior_mu, const float* prior_sigma,
                              int64_t N, int64_t d, float alpha, CudaStream stream) {
  // Launched for any N: N = 0 writes 0/0 = NaN, as the CPU twin returns (the op refuses an empty batch).
  cuda_launch("gaussian_kl_forward_kernel", gaussian_kl_forward_kernel, dim3(1), dim3(kLossThreads), stream, loss,
              encoding, prior_mu, prior_sigma, N, d, alpha);
}

void gaussian_kl_backward_cuda(float* grad_encoding, const float* encoding, const float* prior_mu,
                               const float* prior_sigma, const float* grad, int64_t N, int64_t d, float alpha,
                               CudaStream stream) {
  if (N * d == 0) return;
  cuda_launch("gaussian_kl_backward_kernel", gaussian_kl_backward_kernel, dim3(blocks_for(N * d)), dim3(kThreads),
              stream, grad_encoding, encoding, prior_mu, prior_sigma, grad, N, d, alpha);
}

void sample_mean_forward_cuda(float* out, const float* in, int64_t S, int64_t N, int64_t C, CudaStream stream) {
  if (N * C == 0) return;
  cuda_launch("sample_mean_forward_kernel", sample_mean_forward_kernel, dim3(blocks_for(N * C)), dim3(kThreads), stream,
              out, in, S, N * C);
}

void sample_mean_backward_cuda(float* grad_in, const float* grad_out, int64_t S, int64_t N, int64_t C,
                               CudaStream stream) {
  if (S * N * C == 0) return;
  // inv computed in float on the host, as the CPU twin, so both multiply by the same number.
  cuda_launch("sample_mean_backward_kernel", sample_mean_backward_kernel, dim3(blocks_for(S * N * C)), dim3(kThreads),
              stream, grad_in, grad_out, 1.0f / static_cast<float>(S), S, N * C);
}

}  // namespace bastion
