// batchnorm over x viewed as (N, C, L): L = H*W for BatchNorm2d, L = 1 for BatchNorm1d on (N, C).
// Per channel c over the M = N*L values:
//   training: mean_c, var_c = biased batch variance; invstd_c = 1/sqrt(var_c + eps)
//             running_mean = (1-momentum)*running_mean + momentum*mean_c
//             running_var  = (1-momentum)*running_var  + momentum*var_c * M/(M-1)  (unbiased, as PyTorch)
//   eval:     mean_c = running_mean, invstd_c = 1/sqrt(running_var + eps)
//   y = gamma_c * (x - mean_c) * invstd_c + beta_c
// PyTorch: F.batch_norm(x, running_mean, running_var, gamma, beta, training, momentum, eps)
// Forward writes mean and invstd (C each) for the backward.
// backward ASSIGNS (any may be null):
//   dbeta_c = sum dy;  dgamma_c = sum dy * xhat
//   training: dx = gamma*invstd/M * (M*dy - dbeta - xhat*dgamma)   (the batch statistics depend on x)
//   eval:     dx = gamma*invstd*dy
// Channels are processed in parallel; each channel's sums run in 32 interleaved double lanes in an order
// fixed by the geometry (batchnorm.cpp says why), so results do not depend on the thread count.
#pragma once

#include <cstdint>

namespace bastion {

struct BatchNormGeometry {
  int64_t N, C, L;
};

void batch_norm_forward_cpu(float* y, float* save_mean, float* save_invstd, const float* x, const float* gamma,
                            const float* beta, float* running_mean, float* running_var, const BatchNormGeometry& g,
                            bool training, float momentum, float eps);
void batch_norm_backward_cpu(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                             const float* gamma, const float* save_mean, const float* save_invstd,
                             const BatchNormGeometry& g, bool training);

}  // namespace bastion
