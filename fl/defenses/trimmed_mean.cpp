// trimmed-mean: coordinate-wise trimmed mean (Yin et al. 2018, "Byzantine-robust distributed learning:
// towards optimal statistical rates", ICML).
//   update[d] = mean of x_(b+1) .. x_(n-b), the sorted values of column d without the b largest and the
//               b smallest, for every column d (BatchNorm buffers included)
//   trim = "f"       b = f (the paper; default)
//          "half-f"  b = floor(f / 2) (FedCAP's utils/defense.py)
//          "fixed"   b = the `b` parameter (FedCPA drops 1 at each end)
//          "closest-to-median"  SPMC's TrimmedMean: mean of the n - k - 1 = floor(n/2) values closest to the
//                    coordinate median, k = n - floor(n/2) - 1 (even n: median = mean of the two middle
//                    values; at equal distance the smaller value is kept)
// Precondition: n > 2b (closest-to-median: n >= 2). Inputs are finite (the run loop rejects NaN/Inf).
// No upload is flagged (every upload contributes to some coordinates).
// Cost: O(D n log^2 n) vectorised compare-exchanges (coordinate_wise.h), threads across column blocks;
// the result does not depend on the row order or on the thread count.
#include <limits>

#include "fl/defenses/coordinate_wise.h"
#include "fl/defenses/defense_support.h"
#include "fl/defenses/server_rule.h"
#include "tensor/error.h"

namespace bastion {

namespace {
class TrimmedMean final : public ServerRule {
 public:
  explicit TrimmedMean(const Params& p) : params_(p), trim_(p.text("trim")), b_(p.integer("b")) {}

  AggregationOutput aggregate(const AggregationInput& in) override {
    AggregationOutput out;
    if (trim_ == "closest-to-median") {
      BASTION_CHECK(in.n >= 2, "trimmed-mean: closest-to-median needs n >= 2, got n = ", in.n);
      out.update = coordinate_wise(in, {}, {CoordinateStatistic::ClosestToMedian, in.n / 2}, "trimmed-mean");
      return out;
    }
    const int64_t f = resolved_f(params_, in);
    const int64_t b = trim_ == "f" ? f : trim_ == "half-f" ? f / 2 : b_;
    BASTION_CHECK(in.n > 2 * b, "trimmed-mean: needs n > 2b, got n = ", in.n, ", b = ", b, " (trim = ", trim_,
                  ", f = ", f, ")");
    out.update = coordinate_wise(in, {}, {CoordinateStatistic::TrimmedMean, b}, "trimmed-mean");
    out.resolved = {{"f", static_cast<double>(f)}, {"b", static_cast<double>(b)}};
    return out;
  }

 private:
  Params params_;
  std::string trim_;
  int64_t b_;
};
}  // namespace

const std::vector<ParamSpec>& trimmed_mean_params() {
  static const std::vector<ParamSpec> specs = {
      f_param(),
      {"trim",
       ParamType::Text,
       std::string("f"),
       "values dropped at each end: f = f (paper); half-f = floor(f/2) (FedCAP); fixed = b; "
       "closest-to-median = mean of the floor(n/2) values closest to the median (SPMC)",
       -std::numeric_limits<double>::infinity(),
       std::numeric_limits<double>::infinity(),
       {"f", "half-f", "fixed", "closest-to-median"}},
      {"b", ParamType::Integer, int64_t{1}, "values dropped at each end when trim = fixed (FedCPA: 1)", 0, 1e9},
  };
  return specs;
}

std::unique_ptr<ServerRule> make_trimmed_mean(const Params& params) { return std::make_unique<TrimmedMean>(params); }

}  // namespace bastion
