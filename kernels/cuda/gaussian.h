// FedCR's Gaussian bottleneck on the GPU: the contract of kernels/cpu/gaussian.h on device pointers plus a
// stream, with the softmax family's difference (kernels/cuda/softmax.h): gaussian_kl_forward_cuda writes
// the loss to the device scalar `loss` instead of returning it, and gaussian_kl_backward_cuda reads the
// upstream gradient from the device scalar `grad`. eps (S, N, d) and the priors (N, d) live on the device
// (the caller uploads its seeded host draws, so the device sees the CPU's noise).
// gaussian_params has no twin: only the FL layer's product-of-experts fusion calls it, on the host.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda.h"

namespace bastion {

void gaussian_sample_forward_cuda(float* z, const float* encoding, const float* eps, int64_t S, int64_t N, int64_t d,
                                  float alpha, CudaStream stream);
void gaussian_sample_backward_cuda(float* grad_encoding, const float* grad_z, const float* encoding, const float* eps,
                                   int64_t S, int64_t N, int64_t d, float alpha, CudaStream stream);

void gaussian_kl_forward_cuda(float* loss, const float* encoding, const float* prior_mu, const float* prior_sigma,
                              int64_t N, int64_t d, float alpha, CudaStream stream);
void gaussian_kl_backward_cuda(float* grad_encoding, const float* encoding, const float* prior_mu,
                               const float* prior_sigma, const float* grad, int64_t N, int64_t d, float alpha,
                               CudaStream stream);

void sample_mean_forward_cuda(float* out, const float* in, int64_t S, int64_t N, int64_t C, CudaStream stream);
void sample_mean_backward_cuda(float* grad_in, const float* grad_out, int64_t S, int64_t N, int64_t C,
                               CudaStream stream);

}  // namespace bastion
