#include "kernels/cpu/gaussian.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace bastion {

namespace {
constexpr double kSoftplusThreshold = 20.0;  // PyTorch: softplus(x) = x above it
constexpr double kSigmaFloor = 1e-8;         // FedCR's clamp inside the log of KL_between_normals

double softplus(double x) { return x > kSoftplusThreshold ? x : std::log1p(std::exp(x)); }
double softplus_slope(double x) { return x > kSoftplusThreshold ? 1.0 : 1.0 / (1.0 + std::exp(-x)); }
}  // namespace

void gaussian_sample_forward_cpu(float* z, const float* encoding, const float* eps, int64_t S, int64_t N, int64_t d,
                                 float alpha) {
  std::vector<float> sigma(static_cast<size_t>(N * d));  // softplus once per (n, j), not once per sample
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < d; ++j)
      sigma[n * d + j] = static_cast<float>(softplus(static_cast<double>(encoding[n * 2 * d + d + j]) - alpha));
  for (int64_t s = 0; s < S; ++s)
    for (int64_t n = 0; n < N; ++n) {
      const float* mu = encoding + n * 2 * d;
      const float* e = eps + (s * N + n) * d;
      float* out = z + (s * N + n) * d;
      for (int64_t j = 0; j < d; ++j) out[j] = mu[j] + sigma[n * d + j] * e[j];
    }
}

// Samples outside, so the inner loop runs along a row of contiguous floats and vectorizes (with j outside
// and s inside, a row's sums read 2 S strided floats each: 8.6 % of a FedCR round on a Zen 3 in perf). A
// row is summed kSampleBlock columns at a time into double sums on the stack. Each (n, j) is still summed
// over s in ascending order in double, and gz * eps is exact in double, so the result is the same to the bit.
void gaussian_sample_backward_cpu(float* grad_encoding, const float* grad_z, const float* encoding, const float* eps,
                                  int64_t S, int64_t N, int64_t d, float alpha) {
  constexpr int64_t kSampleBlock = 256;  // 4 KiB of double sums, which stay in L1 while the samples stream
  double g_mu[kSampleBlock], g_sigma[kSampleBlock];
  for (int64_t n = 0; n < N; ++n) {
    const float* e = encoding + n * 2 * d;
    float* ge = grad_encoding + n * 2 * d;
    for (int64_t j0 = 0; j0 < d; j0 += kSampleBlock) {
      const int64_t width = std::min(kSampleBlock, d - j0);
      std::fill_n(g_mu, width, 0.0);
      std::fill_n(g_sigma, width, 0.0);
      for (int64_t s = 0; s < S; ++s) {
        const float* gz = grad_z + (s * N + n) * d + j0;
        const float* ep = eps + (s * N + n) * d + j0;
        for (int64_t j = 0; j < width; ++j) {
          g_mu[j] += gz[j];
          g_sigma[j] += static_cast<double>(gz[j]) * ep[j];
        }
      }
      for (int64_t j = 0; j < width; ++j) {
        ge[j0 + j] = static_cast<float>(g_mu[j]);
        ge[d + j0 + j] = static_cast<float>(g_sigma[j] * softplus_slope(static_cast<double>(e[d + j0 + j]) - alpha));
      }
    }
  }
}

double gaussian_kl_forward_cpu(const float* encoding, const float* prior_mu, const float* prior_sigma, int64_t N,
                               int64_t d, float alpha) {
  double total = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    const float* e = encoding + n * 2 * d;
    double row = 0.0;
    for (int64_t j = 0; j < d; ++j) {
      const double mu = e[j], sigma = softplus(static_cast<double>(e[d + j]) - alpha);
      const double pm = prior_mu[n * d + j], ps = prior_sigma[n * d + j], diff = mu - pm;
      row += (ps * ps + diff * diff) / (sigma * sigma) - 1.0 + 2.0 * std::log(std::max(sigma, kSigmaFloor)) -
             2.0 * std::log(std::max(ps, kSigmaFloor));
    }
    total += 0.5 * row;
  }
  return total / static_cast<double>(N);
}

void gaussian_kl_backward_cpu(float* grad_encoding, const float* encoding, const float* prior_mu,
                              const float* prior_sigma, float grad_loss, int64_t N, int64_t d, float alpha) {
  const double g = static_cast<double>(grad_loss) / static_cast<double>(N);
  for (int64_t n = 0; n < N; ++n) {
    const float* e = encoding + n * 2 * d;
    float* ge = grad_encoding + n * 2 * d;
    for (int64_t j = 0; j < d; ++j) {
      const double pre = static_cast<double>(e[d + j]) - alpha;
      const double mu = e[j], sigma = softplus(pre);
      const double pm = prior_mu[n * d + j], ps = prior_sigma[n * d + j], diff = mu - pm;
      const double d_sigma =
          -(ps * ps + diff * diff) / (sigma * sigma * sigma) + (sigma > kSigmaFloor ? 1.0 / sigma : 0.0);
      ge[j] = static_cast<float>(g * diff / (sigma * sigma));
      ge[d + j] = static_cast<float>(g * d_sigma * softplus_slope(pre));
    }
  }
}

void gaussian_params_cpu(float* mu, float* sigma, const float* encoding, int64_t N, int64_t d, float alpha) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < d; ++j) {
      mu[n * d + j] = encoding[n * 2 * d + j];
      sigma[n * d + j] = static_cast<float>(softplus(static_cast<double>(encoding[n * 2 * d + d + j]) - alpha));
    }
}

void sample_mean_forward_cpu(float* out, const float* in, int64_t S, int64_t N, int64_t C) {
  for (int64_t i = 0; i < N * C; ++i) {
    double sum = 0.0;
    for (int64_t s = 0; s < S; ++s) sum += in[s * N * C + i];
    out[i] = static_cast<float>(sum / static_cast<double>(S));
  }
}

void sample_mean_backward_cpu(float* grad_in, const float* grad_out, int64_t S, int64_t N, int64_t C) {
  const float inv = 1.0f / static_cast<float>(S);
  for (int64_t s = 0; s < S; ++s)
    for (int64_t i = 0; i < N * C; ++i) grad_in[s * N * C + i] = grad_out[i] * inv;
}

}  // namespace bastion
