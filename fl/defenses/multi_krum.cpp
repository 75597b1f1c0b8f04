// multi-krum: Multi-Krum (Blanchard et al. 2017, "Machine learning with adversaries: Byzantine tolerant
// gradient descent", NeurIPS, Section 4 "Multi-Krum").
//   dist[i, j] = |Delta_i - Delta_j|^2 over the P parameter columns (BatchNorm buffers left out)
//   S = m uploads chosen by Krum scores (krum_scores.h), m = n - f by default:
//     selection = "one-shot" (default; the paper, as FLPoison, ByzFL and FedCAP's mkrum code it): score
//       once over all n, score_i = sum of dist to the n - f - 2 nearest others, take the m lowest.
//     selection = "iterative" (El Mhamdi et al. 2018's Bulyan selection used as a Multi-Krum): Krum on
//       the shrinking candidate set R, score with k = |R| - f - 2 other neighbours inside R, move the
//       argmin to S, repeat until |S| = m; scores are recomputed while |R| > 2f + 2, the last scores order
//       the later picks.
//     selection = "ndss21" (Shejwalkar & Houmansadr's NDSS'21 notebooks as written): iterative, but each
//       score sums the |R| - f - 2 smallest distances with the self distance 0 among them, and the loop
//       stops when 2f + 2 remain: m = n - 2f - 2 (the parameter m must stay -1).
//   update = mean of S over all D columns, uniform (default) or weighted by |D_i| (weighting = samples).
// Ties go to the lowest index. Precondition: n > 2f + 2, 1 <= m <= n. Inputs are finite (the run loop
// rejects NaN/Inf first). Flags every upload outside S. Cost: O(n^2 P) (GEMM) + O(m n^2 log n) + O(m D).
#include <algorithm>
#include <limits>
#include <string>

#include "fl/defenses/defense_support.h"
#include "fl/defenses/krum_scores.h"
#include "fl/defenses/server_rule.h"
#include "tensor/error.h"

namespace bastion {

namespace {
KrumSelection selection_of(const std::string& name) {
  if (name == "iterative") return KrumSelection::Iterative;
  if (name == "ndss21") return KrumSelection::Ndss21;
  return KrumSelection::OneShot;
}

class MultiKrum final : public ServerRule {
 public:
  explicit MultiKrum(const Params& p)
      : params_(p), m_(p.integer("m")), selection_(selection_of(p.text("selection"))),
        sample_weighted_(p.text("weighting") == "samples") {
    BASTION_CHECK(selection_ != KrumSelection::Ndss21 || m_ < 0, "multi-krum: selection = \"ndss21\" keeps ",
                  "n - 2f - 2 uploads (the notebook's loop): leave m = -1, got m = ", m_);
  }

  std::string refusal(int64_t n, int64_t expected_malicious) const override {
    const int64_t f = resolved_f(params_, expected_malicious);
    if (n > 2 * f + 2) return {};
    return "multi-krum: needs n > 2f + 2, got n = " + std::to_string(n) + ", f = " + std::to_string(f);
  }

  AggregationOutput aggregate(const AggregationInput& in) override {
    const std::string refused = refusal(in.n, in.expected_malicious);
    BASTION_CHECK(refused.empty(), refused);
    const int64_t n = in.n, f = resolved_f(params_, in);
    const int64_t m = m_ >= 0 ? m_ : selection_ == KrumSelection::Ndss21 ? n - 2 * f - 2 : n - f;
    BASTION_CHECK(m >= 1 && m <= n, "multi-krum: m must lie in [1, n], got m = ", m, ", n = ", n);
    const std::vector<float> dist = pairwise_parameter_distances(in);
    std::vector<int64_t> kept = krum_select(dist, n, f, m, selection_);
    AggregationOutput out = mean_of_kept(in, std::move(kept), sample_weighted_);
    out.resolved = {{"f", static_cast<double>(f)}, {"m", static_cast<double>(m)}};
    return out;
  }

 private:
  Params params_;
  int64_t m_;
  KrumSelection selection_;
  bool sample_weighted_;
};
}  // namespace

const std::vector<ParamSpec>& multi_krum_params() {
  constexpr double inf = std::numeric_limits<double>::infinity();
  static const std::vector<ParamSpec> specs = {
      f_param(),
      {"m", ParamType::Integer, int64_t{-1}, "uploads averaged; -1 = n - f", -1, 1e9},
      {"selection",
       ParamType::Text,
       std::string("one-shot"),
       "one-shot: the m lowest scores of one scoring (paper; FLPoison, ByzFL, FedCAP) | iterative: Krum repeated "
       "on the remaining candidates (Bulyan's selection) | ndss21: NDSS'21's notebook loop (self distance "
       "counted, stops at 2f + 2 left, m = n - 2f - 2)",
       -inf,
       inf,
       {"one-shot", "iterative", "ndss21"}},
      weighting_param("uniform"),
  };
  return specs;
}

std::unique_ptr<ServerRule> make_multi_krum(const Params& params) { return std::make_unique<MultiKrum>(params); }

}  // namespace bastion
