// krum: Krum (Blanchard et al. 2017, "Machine learning with adversaries: Byzantine tolerant gradient
// descent", NeurIPS).
//   dist[i, j] = |Delta_i - Delta_j|^2 over the P parameter columns (BatchNorm buffers left out)
//   score_i    = sum of dist[i, j] over the k = n - f - 2 nearest other uploads j   (krum_scores.h)
//   i*         = argmin_i score_i (ties: lowest index)
//   update     = Delta_{i*} over all D columns           (output = "single", the paper)
//              = mean of the k + 1 uploads nearest to i*, i* included, over all D columns
//                                                       (output = "neighbourhood", FedCPA's defense_utils.py)
// Variants from the seed papers' code:
//   score = "fedcap": FedCAP sums the k + 1 smallest squared distances with the self distance 0 included;
//     the diagonal of dist is exactly 0, so this is the same number as "paper" (an alias for configs).
//   squared = false: Euclidean instead of squared distances (SPMC's utils.py).
//   neighbours: k itself (-1 = n - f - 2); SPMC sums all n - 1 distances.
//   FedCPA's krum (defense_utils.py) = squared = false + output = "neighbourhood" + f = 1 (its
//     expected_n_attacker with 10 parties per round): preset configs/papers/fedcpa-cifar10-krum.toml.
// Precondition: n > 2f + 2. Inputs are finite (the run loop rejects NaN/Inf first).
// Flags every upload that does not enter the update. Cost: O(n^2 P) (GEMM) + O(n D).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "fl/defenses/defense_support.h"
#include "fl/defenses/krum_scores.h"
#include "fl/defenses/server_rule.h"
#include "tensor/error.h"

namespace bastion {

namespace {
class Krum final : public ServerRule {
 public:
  explicit Krum(const Params& p)
      : params_(p), squared_(p.boolean("squared")), neighbours_(p.integer("neighbours")),
        neighbourhood_(p.text("output") == "neighbourhood") {}

  std::string refusal(int64_t n, int64_t expected_malicious) const override {
    const int64_t f = resolved_f(params_, expected_malicious);
    if (n > 2 * f + 2) return {};
    return "krum: needs n > 2f + 2, got n = " + std::to_string(n) + ", f = " + std::to_string(f);
  }

  AggregationOutput aggregate(const AggregationInput& in) override {
    const std::string refused = refusal(in.n, in.expected_malicious);
    BASTION_CHECK(refused.empty(), refused);
    const int64_t n = in.n, f = resolved_f(params_, in);
    const int64_t k = neighbours_ >= 0 ? neighbours_ : n - f - 2;
    BASTION_CHECK(k >= 1 && k <= n - 1, "krum: neighbours must lie in [1, n - 1], got ", k, " for n = ", n);
    std::vector<float> dist = pairwise_parameter_distances(in);
    if (!squared_)
      for (float& d : dist) d = std::sqrt(d);
    std::vector<int64_t> all(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) all[i] = i;
    const std::vector<double> scores = krum_scores(dist, n, all, k);
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i)
      if (scores[i] < scores[best]) best = i;
    std::vector<int64_t> kept = neighbourhood_ ? nearest_rows(dist, n, best, k + 1) : std::vector<int64_t>{best};
    AggregationOutput out = mean_of_kept(in, std::move(kept), false);
    out.resolved = {{"f", static_cast<double>(f)}, {"neighbours", static_cast<double>(k)}};
    return out;
  }

 private:
  Params params_;
  bool squared_;
  int64_t neighbours_;
  bool neighbourhood_;
};
}  // namespace

const std::vector<ParamSpec>& krum_params() {
  constexpr double inf = std::numeric_limits<double>::infinity();
  static const std::vector<ParamSpec> specs = {
      f_param(),
      {"score",
       ParamType::Text,
       std::string("paper"),
       "paper: n - f - 2 nearest others; fedcap: k + 1 smallest incl. self (same numbers, alias)",
       -inf,
       inf,
       {"paper", "fedcap"}},
      {"squared", ParamType::Boolean, true, "squared distances (paper); false: Euclidean (SPMC)"},
      {"neighbours", ParamType::Integer, int64_t{-1}, "distances summed per score; -1 = n - f - 2", -1, 1e9},
      {"output",
       ParamType::Text,
       std::string("single"),
       "single: the best upload (paper); neighbourhood: mean of its k + 1 nearest, itself included (FedCPA)",
       -inf,
       inf,
       {"single", "neighbourhood"}},
  };
  return specs;
}

std::unique_ptr<ServerRule> make_krum(const Params& params) { return std::make_unique<Krum>(params); }

}  // namespace bastion
