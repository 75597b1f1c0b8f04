// bulyan: Bulyan (El Mhamdi et al. 2018, "The hidden vulnerability of distributed learning in Byzantium",
// ICML).
//   dist[i, j] = |Delta_i - Delta_j|^2 over the P parameter columns (BatchNorm buffers left out)
//   S = theta = n - 2f uploads chosen by iterated Krum (krum_scores.h, KrumSelection::Iterative: Krum with
//       k = |R| - f - 2 on the remaining candidates R, argmin moved to S; scores recomputed while
//       |R| > 2f + 2, the last scores order the later picks: the paper's last Krum calls, on 2f + 1 to
//       2f + 2 candidates, would break Krum's own precondition)
//   update[d] = mean of the beta = theta - 2f values of S in column d closest to their median (even
//       theta: median = mean of the two middle values; at equal distance the smaller value is kept), for
//       every column d, BatchNorm buffers included (coordinate_wise.h, ClosestToMedian)
// Precondition: n >= 4f + 3 (so beta >= 3). Inputs are finite (the run loop rejects NaN/Inf first).
// Flags every upload outside S. Cost: O(n^2 P) (GEMM) + O(theta n^2 log n) + O(D theta log^2 theta).
#include <algorithm>
#include <string>

#include "fl/defenses/coordinate_wise.h"
#include "fl/defenses/defense_support.h"
#include "fl/defenses/krum_scores.h"
#include "fl/defenses/server_rule.h"
#include "tensor/error.h"

namespace bastion {

namespace {
class Bulyan final : public ServerRule {
 public:
  explicit Bulyan(const Params& p) : params_(p) {}

  std::string refusal(int64_t n, int64_t expected_malicious) const override {
    const int64_t f = resolved_f(params_, expected_malicious);
    if (n >= 4 * f + 3) return {};
    return "bulyan: needs n >= 4f + 3, got n = " + std::to_string(n) + ", f = " + std::to_string(f);
  }

  AggregationOutput aggregate(const AggregationInput& in) override {
    const std::string refused = refusal(in.n, in.expected_malicious);
    BASTION_CHECK(refused.empty(), refused);
    const int64_t n = in.n, f = resolved_f(params_, in);
    const int64_t theta = n - 2 * f, beta = theta - 2 * f;
    const std::vector<float> dist = pairwise_parameter_distances(in);
    std::vector<int64_t> selected = krum_select(dist, n, f, theta, KrumSelection::Iterative);
    std::sort(selected.begin(), selected.end());
    AggregationOutput out;
    out.update = coordinate_wise(in, selected, {CoordinateStatistic::ClosestToMedian, beta}, "bulyan");
    out.flagged = flags_except(n, selected);
    return out;
  }

 private:
  Params params_;
};
}  // namespace

const std::vector<ParamSpec>& bulyan_params() {
  static const std::vector<ParamSpec> specs = {f_param()};
  return specs;
}

std::unique_ptr<ServerRule> make_bulyan(const Params& params) { return std::make_unique<Bulyan>(params); }

}  // namespace bastion
