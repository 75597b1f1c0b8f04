// spmc: margin-contribution aggregation (MCAgg), the server part of SPMC (He et al., "SPMC: Self-Purifying
// Federated Backdoor Defense via Margin Contribution", §4.2, eqs. 4-6; authors' Server/SPMD.py,
// IMPLEMENTATION-FACTS §2.6).
//   W_i  = global + Delta_i                       the uploaded model (space = models, paper and code)
//          Delta_i                                (space = updates: the margin on the updates instead)
//   C_i  = sum_{j != i} c_j W_j / sum_{j != i} c_j     leave-one-out coalition of client i;
//          c_j = 1 (coalition = uniform, the code's mean of the others) or |D_j| (samples)
//   s_i  = cos(W_i, C_i) = W_i.C_i / (|W_i| |C_i| + eps)      metric = cosine (paper, SPMD; eps 1e-5 as the code)
//        = -|W_i - C_i|_2                                   metric = euclidean   (SPMD_euc)
//        = -W1(W_i, C_i)  (1-D Wasserstein between the     metric = wasserstein (SPMD_was)
//           two vectors' values as samples)
//        = -max_d |W_i[d] - C_i[d]|                        metric = chebyshev   (SPED)
//   a_i  = exp(s_i / T) / sum_j exp(s_j / T)      softmax, T = temperature (1: paper's sigma and the code)
//   update = sum_i a_i Delta_i over all D columns (so the new global is sum_i a_i W_i; BatchNorm buffers
//            averaged like parameters, as the code's state-dict average)
// Clients close to their coalition weigh more; a client far from it (the backdoored ones, the paper's
// claim) weighs less. Scores use the parameter columns only (SPEC notation). The weights a_i are reported
// (AggregationOutput::weights): SPMC's clients rebuild their coalition from them (fl/clients/spmc.cpp).
// No upload is flagged: the rule reweights, it never drops. Not robust to magnitude: cos is bounded, so
// an upload keeps at least e^{-2/T} times an honest one's weight whatever its norm.
// n = 1: no coalition exists; the one upload gets weight 1.
// Preconditions: n >= 1; inputs finite (the run loop rejects NaN/Inf first); with coalition = samples
// every leave-one-out coalition has a positive sample total.
// Cost: O(n P) for the coalition sums and scores (O(n P log P) with wasserstein), O(n D) for the average;
// memory O(P) doubles besides the input.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "fl/defenses/defense_support.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Metric { Cosine, Euclidean, Wasserstein, Chebyshev };

Metric parse_metric(const std::string& name) {
  if (name == "euclidean") return Metric::Euclidean;
  if (name == "wasserstein") return Metric::Wasserstein;
  if (name == "chebyshev") return Metric::Chebyshev;
  return Metric::Cosine;
}

// W1 between the empirical distributions of two equally long vectors: mean |sort(a)_k - sort(b)_k|
// (scipy.stats.wasserstein_distance with unit weights, which SPMD_was calls).
double wasserstein_1d(std::vector<double> a, std::vector<double> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  double sum = 0.0;
  for (size_t k = 0; k < a.size(); ++k) sum += std::fabs(a[k] - b[k]);
  return a.empty() ? 0.0 : sum / static_cast<double>(a.size());
}

class Spmc final : public ServerRule {
 public:
  explicit Spmc(const Params& p)
      : metric_(parse_metric(p.text("metric"))), on_models_(p.text("space") == "models"),
        sample_coalition_(p.text("coalition") == "samples"), temperature_(p.real("temperature")), eps_(p.real("eps")) {}

  AggregationOutput aggregate(const AggregationInput& in) override {
    BASTION_CHECK(in.n >= 1, "spmc: no upload to aggregate");
    AggregationOutput out;
    out.weights = margin_weights(in);
    out.update = weighted_sum_of_rows(in, all_rows(in.n), out.weights);
    return out;
  }

 private:
  Metric metric_;
  bool on_models_, sample_coalition_;
  double temperature_, eps_;

  // Row i's vector over the parameter columns: W_i (models) or Delta_i (updates), in double.
  std::vector<double> vector_of(const AggregationInput& in, int64_t i) const {
    const int64_t P = in.num_parameters;
    std::vector<double> v(static_cast<size_t>(P));
    const float* row = in.updates + i * in.D;
    for (int64_t d = 0; d < P; ++d) v[d] = static_cast<double>(row[d]) + (on_models_ ? in.global[d] : 0.0f);
    return v;
  }

  std::vector<double> margin_weights(const AggregationInput& in) const {
    const int64_t n = in.n, P = in.num_parameters;
    if (n == 1) return {1.0};
    BASTION_CHECK(!on_models_ || static_cast<int64_t>(in.global.size()) >= P,
                  "spmc: space = models needs the global state (", P, " parameters), got ", in.global.size());
    std::vector<double> c(static_cast<size_t>(n), 1.0);
    if (sample_coalition_)
      for (int64_t i = 0; i < n; ++i) c[i] = static_cast<double>(in.num_samples[i]);
    std::vector<double> total(static_cast<size_t>(P), 0.0);
    const double c_sum = std::accumulate(c.begin(), c.end(), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<double> v = vector_of(in, i);
      for (int64_t d = 0; d < P; ++d) total[d] += c[i] * v[d];
    }
    std::vector<double> scores(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const double rest = c_sum - c[i];
      BASTION_CHECK(rest > 0.0, "spmc: the coalition without client ", in.clients[i],
                    " holds no samples (coalition = samples)");
      const std::vector<double> own = vector_of(in, i);
      std::vector<double> coalition(static_cast<size_t>(P));
      for (int64_t d = 0; d < P; ++d) coalition[d] = (total[d] - c[i] * own[d]) / rest;
      scores[i] = score(own, coalition);
    }
    return softmax(scores);
  }

  // Larger = closer to the coalition.
  double score(const std::vector<double>& own, const std::vector<double>& coalition) const {
    double dot = 0.0, own_sq = 0.0, coalition_sq = 0.0, dist_sq = 0.0, dist_max = 0.0;
    for (size_t d = 0; d < own.size(); ++d) {
      dot += own[d] * coalition[d];
      own_sq += own[d] * own[d];
      coalition_sq += coalition[d] * coalition[d];
      const double diff = own[d] - coalition[d];
      dist_sq += diff * diff;
      dist_max = std::max(dist_max, std::fabs(diff));
    }
    switch (metric_) {
      case Metric::Cosine: {
        const double denominator = std::sqrt(own_sq) * std::sqrt(coalition_sq) + eps_;
        return denominator > 0.0 ? dot / denominator : 0.0;  // two zero vectors: no direction, cos 0
      }
      case Metric::Euclidean:
        return -std::sqrt(dist_sq);
      case Metric::Wasserstein:
        return -wasserstein_1d(own, coalition);
      case Metric::Chebyshev:
        return -dist_max;
    }
    return 0.0;
  }

  // exp((s_i - max s) / T), normalised: the shift keeps exp finite and cancels in the ratio.
  std::vector<double> softmax(const std::vector<double>& scores) const {
    const double top = *std::max_element(scores.begin(), scores.end());
    std::vector<double> w(scores.size());
    double sum = 0.0;
    for (size_t i = 0; i < scores.size(); ++i) sum += w[i] = std::exp((scores[i] - top) / temperature_);
    for (double& v : w) v /= sum;  // sum >= 1: the top score contributes exp(0)
    return w;
  }
};
}  // namespace

const std::vector<ParamSpec>& spmc_params() {
  static const std::vector<ParamSpec> specs = {
      {"metric",
       ParamType::Text,
       std::string("cosine"),
       "margin score against the leave-one-out coalition: cosine (paper, SPMD) | euclidean (-L2, SPMD_euc) | "
       "wasserstein (-W1 of the value distributions, SPMD_was) | chebyshev (-max |diff|, SPED)",
       -kInf,
       kInf,
       {"cosine", "euclidean", "wasserstein", "chebyshev"}},
      {"space",
       ParamType::Text,
       std::string("models"),
       "compare whole models W_i = global + Delta_i (paper and code) | the updates Delta_i",
       -kInf,
       kInf,
       {"models", "updates"}},
      {"coalition",
       ParamType::Text,
       std::string("uniform"),
       "leave-one-out coalition: uniform = plain mean of the others (code) | samples = |D_j|-weighted mean",
       -kInf,
       kInf,
       {"uniform", "samples"}},
      {"temperature", ParamType::Real, 1.0, "softmax temperature T of the weights exp(s_i / T) (paper and code: 1)",
       1e-6, 1e6},
      {"eps", ParamType::Real, 1e-5, "added to the cosine's denominator (code: 1e-5)", 0, 1},
  };
  return specs;
}

std::unique_ptr<ServerRule> make_spmc(const Params& params) { return std::make_unique<Spmc>(params); }

}  // namespace bastion
