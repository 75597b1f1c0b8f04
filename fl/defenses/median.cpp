// median: coordinate-wise median (Yin et al. 2018, "Byzantine-robust distributed learning: towards optimal
// statistical rates", ICML).
//   update[d] = median_i Delta_i[d]   for every column d, BatchNorm buffers included
//   even n: (x_(n/2) + x_(n/2+1)) / 2 (even = "mean", the textbook median, numpy.median)
//           x_(n/2), the lower middle value (even = "lower", torch.median, as FedCPA uses)
// No f: with fewer than n/2 attackers each coordinate stays inside the honest range of that coordinate.
// Inputs are finite (the run loop rejects NaN/Inf first). No upload is flagged (the rule keeps no set).
// Cost: O(D n log^2 n) vectorised compare-exchanges (coordinate_wise.h), threads across column blocks;
// the result does not depend on the row order or on the thread count.
#include <limits>

#include "fl/defenses/coordinate_wise.h"
#include "fl/defenses/server_rule.h"

namespace bastion {

namespace {
class Median final : public ServerRule {
 public:
  explicit Median(const Params& p)
      : spec_{p.text("even") == "lower" ? CoordinateStatistic::LowerMedian : CoordinateStatistic::Median, 0} {}

  AggregationOutput aggregate(const AggregationInput& in) override {
    AggregationOutput out;
    out.update = coordinate_wise(in, {}, spec_, "median");
    return out;
  }

 private:
  CoordinateSpec spec_;
};
}  // namespace

const std::vector<ParamSpec>& median_params() {
  static const std::vector<ParamSpec> specs = {
      {"even",
       ParamType::Text,
       std::string("mean"),
       "even n: mean = average of the two middle values; lower = the lower one (torch.median, FedCPA)",
       -std::numeric_limits<double>::infinity(),
       std::numeric_limits<double>::infinity(),
       {"mean", "lower"}},
  };
  return specs;
}

std::unique_ptr<ServerRule> make_median(const Params& params) { return std::make_unique<Median>(params); }

}  // namespace bastion
