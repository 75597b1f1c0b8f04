// The Gaussian math of fl/clients/fedcr.h (contract there).
#include <algorithm>
#include <cmath>

#include "fl/clients/fedcr.h"
#include "kernels/cpu/gaussian.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kSigmaFloor = 1e-8;    // as the code's KL clamp
constexpr double kFuseEpsilon = 1e-32;  // product_of_experts_two's guard in the denominators

double floored(double sigma) { return std::max(sigma, kSigmaFloor); }
}  // namespace

ClassGaussians::ClassGaussians(int64_t c, int64_t d)
    : classes(c), dim(d), present(static_cast<size_t>(c), 0), mu(static_cast<size_t>(c * d), 0.0),
      sigma(static_cast<size_t>(c * d), 1.0) {}

void fuse_two_experts(double& mu_q, double& sigma_q, double mu_p, double sigma_p) {
  const double var_q = sigma_q * sigma_q, var_p = sigma_p * sigma_p, total = var_q + var_p + kFuseEpsilon;
  mu_q = (mu_p * var_q + mu_q * var_p) / total;
  sigma_q = std::sqrt(var_q * var_p / total);
}

void ClassFusion::add(int32_t c, const float* mu, const float* sigma) {
  BASTION_CHECK(c >= 0 && c < g_.classes, "fedcr: label ", c, " outside [0, ", g_.classes, ")");
  const size_t at = static_cast<size_t>(c) * static_cast<size_t>(g_.dim);
  const bool first = !g_.present[c];
  for (int64_t j = 0; j < g_.dim; ++j) {
    if (first)
      g_.mu[at + j] = mu[j], g_.sigma[at + j] = sigma[j];
    else
      fuse_two_experts(g_.mu[at + j], g_.sigma[at + j], mu[j], sigma[j]);
  }
  g_.present[c] = 1;
}

void ClassFusion::add_batch(const Tensor& encoding, const LabelTensor& y, float alpha) {
  const int64_t N = encoding.size(0), d = g_.dim;
  BASTION_CHECK(encoding.size(1) == 2 * d && y.size() == N, "fedcr: encoding ", encoding.shape(), " for ", y.size(),
                " labels and d_Z ", d);
  std::vector<float> mu(static_cast<size_t>(N * d)), sigma(mu.size());
  gaussian_params_cpu(mu.data(), sigma.data(), encoding.data(), N, d, alpha);
  for (int64_t n = 0; n < N; ++n) add(y[n], mu.data() + n * d, sigma.data() + n * d);
}

std::vector<float> pack_class_gaussians(const ClassGaussians& g) {
  std::vector<float> out{static_cast<float>(g.classes), static_cast<float>(g.dim)};
  for (uint8_t p : g.present) out.push_back(p ? 1.0f : 0.0f);
  for (double v : g.mu) out.push_back(static_cast<float>(v));
  for (double v : g.sigma) out.push_back(static_cast<float>(v));
  return out;
}

ClassGaussians unpack_class_gaussians(std::span<const float> packed) {
  BASTION_CHECK(packed.size() >= 2 && packed[0] >= 1 && packed[1] >= 1, "fedcr: malformed class Gaussians (",
                packed.size(), " values)");
  const int64_t C = static_cast<int64_t>(packed[0]), d = static_cast<int64_t>(packed[1]);
  BASTION_CHECK(packed.size() == static_cast<size_t>(2 + C + 2 * C * d), "fedcr: class Gaussians of ", packed.size(),
                " values for ", C, " classes and d_Z ", d);
  ClassGaussians g(C, d);
  for (int64_t c = 0; c < C; ++c) g.present[c] = packed[2 + c] != 0.0f;
  const size_t mu_at = static_cast<size_t>(2 + C), sigma_at = mu_at + static_cast<size_t>(C * d);
  for (size_t k = 0; k < g.mu.size(); ++k) g.mu[k] = packed[mu_at + k], g.sigma[k] = packed[sigma_at + k];
  return g;
}

void mix_product_of_experts(ClassGaussians& global, const std::vector<ClassGaussians>& experts, double beta2) {
  const size_t d = static_cast<size_t>(global.dim);
  for (const ClassGaussians& e : experts)
    BASTION_CHECK(e.classes == global.classes && e.dim == global.dim, "fedcr: class Gaussians of ", e.classes, "x",
                  e.dim, " against the server's ", global.classes, "x", global.dim);
  for (int64_t c = 0; c < global.classes; ++c) {
    const size_t at = static_cast<size_t>(c) * d;
    std::vector<double> precision(d, 1.0), weighted(d, 0.0);  // the N(0, 1) prior: precision 1, mean 0
    bool any = false;
    for (const ClassGaussians& e : experts) {
      if (!e.present[c]) continue;
      any = true;
      for (size_t j = 0; j < d; ++j) {
        const double s = floored(e.sigma[at + j]);
        precision[j] += 1.0 / (s * s);
        weighted[j] += e.mu[at + j] / (s * s);
      }
    }
    if (!any) continue;
    global.present[c] = 1;
    for (size_t j = 0; j < d; ++j) {
      const double mu = weighted[j] / precision[j], sigma = std::sqrt(1.0 / precision[j]);
      global.mu[at + j] = (1.0 - beta2) * global.mu[at + j] + beta2 * mu;
      global.sigma[at + j] = (1.0 - beta2) * global.sigma[at + j] + beta2 * sigma;
    }
  }
}

}  // namespace bastion
