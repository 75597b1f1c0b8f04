// rfa: robust federated aggregation by the geometric median (Pillutla, Kakade & Harchaoui, "Robust
// Aggregation for Federated Learning", IEEE TSP 2022), computed by the smoothed Weiszfeld algorithm:
//   z* = argmin_z  sum_i alpha_i * max(nu, |z - w_i|)        (the nu-smoothed weighted geometric median)
//   z_0 = sum_i alpha_i w_i / sum_i alpha_i
//   beta_i = alpha_i / max(nu, |z_k - w_i|),   z_{k+1} = sum_i beta_i w_i / sum_i beta_i
//   stop after max_iterations, or when |g(z_k) - g(z_{k+1})| < ftol * g(z_{k+1}) with
//   g(z) = sum_i alpha_i |z - w_i| (the paper's code stops on the same relative objective change).
// alpha_i = |D_i| (weighting = samples, the paper) or 1 (uniform; FedCPA and FedCAP use no weights).
// Distances use the parameter columns only; the BatchNorm buffer columns follow the last beta weights,
// i.e. the output over ALL D columns is sum_i beta_i Delta_i / sum_i beta_i, whose parameter part is
// exactly the last Weiszfeld iterate.
// Breakdown point 1/2: fewer than half of the (weighted) uploads cannot move z arbitrarily far.
// Preconditions: n >= 1; with sample weighting, sum |D_i| > 0. Flags nobody (a weighting, not a filter).
// Cost: O(iterations * n * P) (one distance pass and one weighted-sum pass per iteration).
// Variants not implemented: SPMC's per-state-dict-tensor median with <= 3 iterations (set
// max_iterations = 3 for the iteration cap; the per-layer split is not offered).
#include <algorithm>
#include <cmath>
#include <limits>

#include "fl/defenses/defense_support.h"
#include "fl/defenses/server_rule.h"
#include "tensor/error.h"

namespace bastion {

namespace {
class Rfa final : public ServerRule {
 public:
  explicit Rfa(const Params& p)
      : sample_weighted_(p.text("weighting") == "samples"), max_iterations_(p.integer("max_iterations")),
        nu_(p.real("nu")), ftol_(p.real("ftol")) {}

  AggregationOutput aggregate(const AggregationInput& in) override {
    BASTION_CHECK(in.n >= 1, "rfa: no upload to aggregate");
    std::vector<double> alpha(static_cast<size_t>(in.n), 1.0);
    if (sample_weighted_) {
      double total = 0.0;
      for (int64_t i = 0; i < in.n; ++i) alpha[i] = static_cast<double>(in.num_samples[i]);
      for (double a : alpha) total += a;
      BASTION_CHECK(total > 0, "rfa: sample weighting with zero samples in total (n = ", in.n, ")");
    }
    std::vector<double> beta = alpha;
    std::vector<double> z = weighted_parameters(in, beta);
    std::vector<double> distance(static_cast<size_t>(in.n));
    double objective = objective_at(in, z, alpha, distance);
    for (int64_t k = 0; k < max_iterations_; ++k) {
      for (int64_t i = 0; i < in.n; ++i) beta[i] = alpha[i] / std::max(nu_, distance[i]);
      z = weighted_parameters(in, beta);
      const double next = objective_at(in, z, alpha, distance);
      const bool converged = std::abs(objective - next) < ftol_ * next;
      objective = next;
      if (converged) break;
    }
    // All D columns with the final beta: the parameter columns reproduce z, the buffers follow.
    double sum = 0.0;
    for (double b : beta) sum += b;
    std::vector<int64_t> rows(static_cast<size_t>(in.n));
    for (int64_t i = 0; i < in.n; ++i) rows[i] = i;
    for (double& b : beta) b /= sum;
    AggregationOutput out;
    out.update = weighted_sum_of_rows(in, rows, beta);
    return out;
  }

 private:
  bool sample_weighted_;
  int64_t max_iterations_;
  double nu_, ftol_;

  // sum_i beta_i w_i / sum_i beta_i over the parameter columns, in double, rows in order.
  static std::vector<double> weighted_parameters(const AggregationInput& in, const std::vector<double>& beta) {
    const int64_t P = in.num_parameters;
    double total = 0.0;
    for (double b : beta) total += b;
    std::vector<double> z(static_cast<size_t>(P), 0.0);
    for_column_blocks(in, P, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = 0; i < in.n; ++i) {
        const float* row = in.updates + i * in.D;
        const double w = beta[i] / total;
        for (int64_t d = begin; d < end; ++d) z[d] += w * row[d];
      }
    });
    return z;
  }

  // g(z) = sum_i alpha_i |z - w_i| (parameter columns); distances[i] = |z - w_i|.
  static double objective_at(const AggregationInput& in, const std::vector<double>& z, const std::vector<double>& alpha,
                             std::vector<double>& distances) {
    const int64_t P = in.num_parameters;
    double g = 0.0;
    for (int64_t i = 0; i < in.n; ++i) {
      const float* row = in.updates + i * in.D;
      double sq = 0.0;
      for (int64_t d = 0; d < P; ++d) {
        const double diff = z[d] - row[d];
        sq += diff * diff;
      }
      const double dist = std::sqrt(sq);
      distances[i] = dist;
      g += alpha[i] * dist;
    }
    return g;
  }
};
}  // namespace

const std::vector<ParamSpec>& rfa_params() {
  static const std::vector<ParamSpec> specs = {
      weighting_param("samples"),
      {"max_iterations", ParamType::Integer, int64_t{100}, "Weiszfeld iterations at most (SPMC uses 3)", 1, 1e6},
      {"nu", ParamType::Real, 1e-6, "smoothing: distances below nu count as nu (avoids dividing by 0)", 1e-30, 1e6},
      {"ftol", ParamType::Real, 1e-6, "stop when the objective changes by less than ftol (relative)", 0, 1},
  };
  return specs;
}

std::unique_ptr<ServerRule> make_rfa(const Params& params) { return std::make_unique<Rfa>(params); }

}  // namespace bastion
