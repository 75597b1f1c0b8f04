// fedavg: the server rule of FedAvg (McMahan et al. 2017).
//   update = eta * sum_i a_i * Delta_i,   a_i = |D_i| / sum_j |D_j|  (weighting = samples)
//                                        a_i = 1 / n                (weighting = uniform)
// over every column, BatchNorm buffers included (they are averaged like parameters, SPEC notation).
// Sums run in double over the rows in their given order, so the result is independent of threads.
// No robustness: one upload can move the mean arbitrarily far (that is what the attacks show).
// Cost: O(n D), one pass over the matrix.
#include <limits>

#include "fl/defenses/server_rule.h"
#include "tensor/error.h"

namespace bastion {

namespace {
class FedAvg final : public ServerRule {
 public:
  explicit FedAvg(const Params& p) : sample_weighted_(p.text("weighting") == "samples"), lr_(p.real("lr")) {}

  AggregationOutput aggregate(const AggregationInput& in) override {
    BASTION_CHECK(in.n >= 1, "fedavg: no upload to aggregate");
    const std::vector<double> weights = row_weights(in);
    std::vector<double> sum(static_cast<size_t>(in.D), 0.0);
    for (int64_t i = 0; i < in.n; ++i) {
      const float* row = in.updates + i * in.D;
      const double w = weights[i];
      for (int64_t d = 0; d < in.D; ++d) sum[d] += w * row[d];
    }
    AggregationOutput out;
    out.update.resize(static_cast<size_t>(in.D));
    for (int64_t d = 0; d < in.D; ++d) out.update[d] = static_cast<float>(lr_ * sum[d]);
    return out;
  }

 private:
  bool sample_weighted_;
  double lr_;

  std::vector<double> row_weights(const AggregationInput& in) const {
    std::vector<double> weights(static_cast<size_t>(in.n), 1.0 / static_cast<double>(in.n));
    if (!sample_weighted_) return weights;
    double total = 0.0;
    for (int64_t i = 0; i < in.n; ++i) total += static_cast<double>(in.num_samples[i]);
    BASTION_CHECK(total > 0, "fedavg: sample weighting with zero samples in total");
    for (int64_t i = 0; i < in.n; ++i) weights[i] = static_cast<double>(in.num_samples[i]) / total;
    return weights;
  }
};
}  // namespace

const std::vector<ParamSpec>& fedavg_params() {
  static const std::vector<ParamSpec> specs = {
      {"weighting", ParamType::Text, std::string("samples"), "samples: weight by local data size; uniform: plain mean",
       -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(), {"samples", "uniform"}},
      {"lr", ParamType::Real, 1.0, "server learning rate eta (global += eta * mean update)", 0, 1e6},
  };
  return specs;
}

std::unique_ptr<ServerRule> make_fedavg(const Params& params) { return std::make_unique<FedAvg>(params); }

}  // namespace bastion
