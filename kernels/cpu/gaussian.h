// gaussian: the stochastic bottleneck of a variational-information-bottleneck encoder (FedCR, Zhang et al.
// ICML'23; models/Nets_VIB.py of haozzh/FedCR). The encoder's last layer emits E (N, 2d) per sample:
//   mu = E[:, :d],  sigma = softplus(E[:, d:] - alpha)       (PyTorch softplus: beta 1, threshold 20)
// gaussian_sample_forward:  z (S*N, d), row s*N + n = mu[n] + sigma[n] * eps[s, n]; eps (S, N, d) given by
//   the caller (seeded host draws), so the kernel is RNG-free.           PyTorch: mu + sigma * randn(S, N, d)
// gaussian_sample_backward: ASSIGNS dE[:, :d] = sum_s gz[s], dE[:, d:] = sigmoid(E[:, d:] - alpha) sum_s gz[s] eps[s]
// gaussian_kl_forward: mean_n KL(N(pm[n], ps[n]) || N(mu[n], sigma[n])), the PRIOR first (FedCR's
//   KL_between_normals(prior, encoder)): per row 0.5 sum_j [ps^2/sigma^2 + (mu - pm)^2/sigma^2 - 1
//   + 2 log max(sigma, 1e-8) - 2 log max(ps, 1e-8)]. pm, ps (N, d) are constants. Accumulated in double.
// gaussian_kl_backward: ASSIGNS dE = g/N * (d KL_n / dE) (dmu = (mu - pm)/sigma^2; dsigma = -(ps^2 + (mu -
//   pm)^2)/sigma^3 + 1/sigma, the last term only where sigma > 1e-8; times softplus' slope)
// gaussian_params: mu and sigma of E (no autograd; the product-of-experts fusion reads them).
// sample_mean_forward: out (N, C) = mean over s of in (S*N, C) with row s*N + n; backward ASSIGNS g/S to all S.
#pragma once

#include <cstdint>

namespace bastion {

void gaussian_sample_forward_cpu(float* z, const float* encoding, const float* eps, int64_t S, int64_t N, int64_t d,
                                 float alpha);
void gaussian_sample_backward_cpu(float* grad_encoding, const float* grad_z, const float* encoding, const float* eps,
                                  int64_t S, int64_t N, int64_t d, float alpha);

double gaussian_kl_forward_cpu(const float* encoding, const float* prior_mu, const float* prior_sigma, int64_t N,
                               int64_t d, float alpha);
void gaussian_kl_backward_cpu(float* grad_encoding, const float* encoding, const float* prior_mu,
                              const float* prior_sigma, float grad_loss, int64_t N, int64_t d, float alpha);

void gaussian_params_cpu(float* mu, float* sigma, const float* encoding, int64_t N, int64_t d, float alpha);

void sample_mean_forward_cpu(float* out, const float* in, int64_t S, int64_t N, int64_t C);
void sample_mean_backward_cpu(float* grad_in, const float* grad_out, int64_t S, int64_t N, int64_t C);

}  // namespace bastion
