// norm-bound: drop uploads whose parameter norm is too large, average the rest (norm thresholding; the
// "norm" rule of FedCPA, Han et al. 2023, defense_utils.py, is mode = keep-smallest, measure = model).
//   r_i = |Delta_i[0, P)|                (measure = update)
//   r_i = |global[0, P) + Delta_i[0, P)| (measure = model: the client's full weight vector, as FedCPA)
//   kept K = { i : r_i <= threshold }                          mode = threshold
//          = { i : r_i <= tau * median_j r_j }                 mode = median-multiple (median of an even
//                                                             count = mean of the two middle values)
//          = the `keep` uploads with the smallest r_i          mode = keep-smallest (keep = -1: n - f;
//            (ties: the smaller client id is kept)              more than n: all n are kept)
//   update = sum_{i in K} a_i Delta_i over all D columns (BatchNorm buffers of the kept uploads averaged
//            like FedAvg), a_i = |D_i| / sum_K |D_j| (weighting = samples) or 1/|K| (uniform).
// The dropped uploads are flagged. If every upload is dropped (threshold modes only), the update is zero:
// the global model stays unchanged this round, and every upload is flagged.
// Norms use the P parameter columns only; FedCPA's state-dict vectors also hold BatchNorm statistics.
// FedCPA averages uniformly: its preset sets weighting = uniform.
// Preconditions: n >= 1; keep-smallest needs n - f >= 1 when keep = -1; inputs finite (the run loop
// rejects NaN/Inf first). Cost: O(n D): one pass for the norms, one for the mean.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "fl/defenses/defense_support.h"
#include "fl/defenses/server_rule.h"
#include "tensor/error.h"

namespace bastion {

namespace {
class NormBound final : public ServerRule {
 public:
  explicit NormBound(const Params& p)
      : params_(p), mode_(p.text("mode")), measure_model_(p.text("measure") == "model"),
        threshold_(p.real("threshold")), tau_(p.real("tau")), keep_(p.integer("keep")),
        sample_weighted_(p.text("weighting") == "samples") {
    BASTION_CHECK(keep_ == -1 || keep_ >= 1, "norm-bound: keep must be -1 (n - f) or >= 1, got ", keep_);
  }

  AggregationOutput aggregate(const AggregationInput& in) override {
    BASTION_CHECK(in.n >= 1, "norm-bound: no upload to aggregate");
    const std::vector<double> r = norms(in);
    std::vector<int64_t> kept;
    if (mode_ == "keep-smallest") {
      int64_t keep = keep_;
      if (keep == -1) {
        keep = in.n - resolved_f(params_, in);
        BASTION_CHECK(keep >= 1, "norm-bound: keep = n - f = ", in.n, " - ", resolved_f(params_, in),
                      " leaves no upload");
      }
      std::vector<int64_t> order(static_cast<size_t>(in.n));
      std::iota(order.begin(), order.end(), int64_t{0});
      std::sort(order.begin(), order.end(),
                [&](int64_t x, int64_t y) { return r[x] != r[y] ? r[x] < r[y] : in.clients[x] < in.clients[y]; });
      kept.assign(order.begin(), order.begin() + std::min(keep, in.n));
      std::sort(kept.begin(), kept.end());  // rows in their given order: the sum does not depend on the norms
    } else {
      double bound = threshold_;
      if (mode_ == "median-multiple") {
        std::vector<double> sorted(r);
        std::sort(sorted.begin(), sorted.end());
        const size_t m = sorted.size() / 2;
        const double median = sorted.size() % 2 == 1 ? sorted[m] : 0.5 * (sorted[m - 1] + sorted[m]);
        bound = tau_ * median;
      }
      for (int64_t i = 0; i < in.n; ++i)
        if (r[i] <= bound) kept.push_back(i);
    }
    AggregationOutput out;
    out.flagged = flags_except(in.n, kept);
    if (kept.empty()) {
      out.update.assign(static_cast<size_t>(in.D), 0.0f);
      return out;
    }
    out.update = mean_of_rows(in, kept, sample_weighted_);
    return out;
  }

 private:
  Params params_;
  std::string mode_;
  bool measure_model_;
  double threshold_, tau_;
  int64_t keep_;
  bool sample_weighted_;

  std::vector<double> norms(const AggregationInput& in) const {
    std::vector<double> r(static_cast<size_t>(in.n));
    for (int64_t i = 0; i < in.n; ++i) {
      const float* row = in.updates + i * in.D;
      double sum = 0.0;
      for (int64_t d = 0; d < in.num_parameters; ++d) {
        // model: the client's weights as the client holds them, float(global + Delta)
        const double v = measure_model_ ? static_cast<double>(in.global[d] + row[d]) : row[d];
        sum += v * v;
      }
      r[i] = std::sqrt(sum);
    }
    return r;
  }
};
}  // namespace

const std::vector<ParamSpec>& norm_bound_params() {
  static const std::vector<ParamSpec> specs = {
      {"mode",
       ParamType::Text,
       std::string("threshold"),
       "threshold: drop norms above `threshold`; median-multiple: above tau * median norm; keep-smallest: "
       "keep the `keep` smallest norms (FedCPA)",
       -std::numeric_limits<double>::infinity(),
       std::numeric_limits<double>::infinity(),
       {"threshold", "median-multiple", "keep-smallest"}},
      {"measure",
       ParamType::Text,
       std::string("update"),
       "update: norm of Delta_i; model: norm of global + Delta_i (FedCPA compares weight vectors)",
       -std::numeric_limits<double>::infinity(),
       std::numeric_limits<double>::infinity(),
       {"update", "model"}},
      {"threshold", ParamType::Real, 1.0, "mode threshold: largest parameter L2 norm kept", 0, 1e30},
      {"tau", ParamType::Real, 2.0, "mode median-multiple: keep norms <= tau * median norm", 0, 1e30},
      {"keep", ParamType::Integer, int64_t{-1}, "mode keep-smallest: uploads kept; -1 = n - f", -1, 1e9},
      f_param(),
      weighting_param("samples"),
  };
  return specs;
}

std::unique_ptr<ServerRule> make_norm_bound(const Params& params) { return std::make_unique<NormBound>(params); }

}  // namespace bastion
