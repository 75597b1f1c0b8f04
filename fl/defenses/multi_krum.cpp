// multi-krum: Multi-Krum (Blanchard et al. 2017; El Mhamdi et al. 2018, "The hidden vulnerability of
// distributed learning in Byzantium", ICML).
//   dist[i, j] = |Delta_i - Delta_j|^2 over the P parameter columns (BatchNorm buffers left out)
//   S = m uploads chosen by Krum scores (krum_scores.h), m = n - f by default:
//     selection = "iterative" (default; NDSS'21's notebooks): Krum on the shrinking candidate set R,
//       score with k = |R| - f - 2 neighbours inside R, move the argmin to S, repeat until |S| = m; scores
//       are recomputed while |R| > 2f + 2 (NDSS'21 stops there), the last scores order the later picks.
//     selection = "one-shot" (Blanchard et al.'s definition; FedCAP's mkrum): score once over all n with
//       k = n - f - 2 and take the m lowest.
//   update = mean of S over all D columns, uniform (default) or weighted by |D_i| (weighting = samples).
// Ties go to the lowest index. Precondition: n > 2f + 2, 1 <= m <= n. Inputs are finite (the run loop
// rejects NaN/Inf first). Flags every upload outside S. Cost: O(n^2 P) (GEMM) + O(m n^2 log n) + O(m D).
#include <algorithm>
#include <limits>

#include "fl/defenses/defense_support.h"
#include "fl/defenses/krum_scores.h"
#include "fl/defenses/server_rule.h"
#include "tensor/error.h"

namespace bastion {

namespace {
class MultiKrum final : public ServerRule {
 public:
  explicit MultiKrum(const Params& p)
      : params_(p), m_(p.integer("m")),
        selection_(p.text("selection") == "one-shot" ? KrumSelection::OneShot : KrumSelection::Iterative),
        sample_weighted_(p.text("weighting") == "samples") {}

  AggregationOutput aggregate(const AggregationInput& in) override {
    const int64_t n = in.n, f = resolved_f(params_, in);
    BASTION_CHECK(n > 2 * f + 2, "multi-krum: needs n > 2f + 2, got n = ", n, ", f = ", f);
    const int64_t m = m_ >= 0 ? m_ : n - f;
    BASTION_CHECK(m >= 1 && m <= n, "multi-krum: m must lie in [1, n], got m = ", m, ", n = ", n);
    const std::vector<float> dist = pairwise_parameter_distances(in);
    std::vector<int64_t> kept = krum_select(dist, n, f, m, selection_);
    return mean_of_kept(in, std::move(kept), sample_weighted_);
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
      {"selection", ParamType::Text, std::string("iterative"),
       "iterative: Krum repeated on the remaining candidates (NDSS'21); one-shot: m lowest scores of one "
       "scoring (FedCAP)",
       -inf, inf, {"iterative", "one-shot"}},
      weighting_param("uniform"),
  };
  return specs;
}

std::unique_ptr<ServerRule> make_multi_krum(const Params& params) { return std::make_unique<MultiKrum>(params); }

}  // namespace bastion
