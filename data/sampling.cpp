// Gamma, Dirichlet and shuffling on top of Generator; see data/sampling.h for the contract.
#include "data/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "tensor/error.h"

namespace bastion {
namespace {

// Marsaglia-Tsang for shape >= 1: squeeze test first, then the exact log test. Accepts with
// probability >= 0.95 for every shape >= 1, so the loop is short.
double gamma_at_least_one(Generator& rng, double shape) {
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = rng.normal();
    double v = 1.0 + c * x;
    if (v <= 0.0) continue;
    v = v * v * v;
    const double u = rng.uniform();
    if (u < 1.0 - 0.0331 * (x * x) * (x * x)) return d * v;
    if (u > 0.0 && std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

}  // namespace

double sample_gamma_log(Generator& rng, double shape) {
  BASTION_CHECK(shape > 0.0 && std::isfinite(shape), "gamma shape must be finite and > 0, got ", shape);
  if (shape >= 1.0) return std::log(gamma_at_least_one(rng, shape));
  // Boost: G(a) = G(a + 1) · U^(1/a), U uniform in (0, 1) (0 excluded: log(0) = -inf).
  const double g = gamma_at_least_one(rng, shape + 1.0);
  double u = rng.uniform();
  while (u <= 0.0) u = rng.uniform();
  return std::log(g) + std::log(u) / shape;
}

double sample_gamma(Generator& rng, double shape) { return std::exp(sample_gamma_log(rng, shape)); }

std::vector<double> normalize_log_weights(const std::vector<double>& log_weights, const std::vector<bool>& keep) {
  BASTION_ASSERT(log_weights.size() == keep.size());
  double top = -std::numeric_limits<double>::infinity();
  for (size_t j = 0; j < log_weights.size(); ++j)
    if (keep[j]) top = std::max(top, log_weights[j]);
  std::vector<double> p(log_weights.size(), 0.0);
  if (!std::isfinite(top)) return p;
  double sum = 0.0;
  for (size_t j = 0; j < p.size(); ++j) {
    if (keep[j]) p[j] = std::exp(log_weights[j] - top);  // the largest kept entry becomes exactly 1
    sum += p[j];
  }
  for (double& x : p) x /= sum;
  return p;
}

std::vector<double> sample_dirichlet(Generator& rng, double beta, int64_t n) {
  BASTION_CHECK(n >= 1, "dirichlet needs at least one component, got ", n);
  std::vector<double> log_weights(static_cast<size_t>(n));
  for (double& w : log_weights) w = sample_gamma_log(rng, beta);
  return normalize_log_weights(log_weights, std::vector<bool>(log_weights.size(), true));
}

void shuffle_indices(std::vector<int64_t>& values, Generator& rng) {
  for (size_t i = values.size(); i > 1; --i) std::swap(values[i - 1], values[rng.below(i)]);
}

}  // namespace bastion
