// fedavg: the server rule of FedAvg (McMahan et al. 2017).
//   update = eta * sum_i a_i * Delta_i,   a_i = |D_i| / sum_j |D_j|  (weighting = samples)
//                                        a_i = 1 / n                (weighting = uniform)
// over every column, BatchNorm buffers included (they are averaged like parameters, SPEC notation).
// Sums run in double over the rows in their given order, so the result is independent of threads.
// No robustness: one upload can move the mean arbitrarily far (that is what the attacks show).
// Reports a_i (AggregationOutput::weights, before eta): SPMC's clients with this rule are SPMC Table 1's
// "LGAlign only" ablation (the code's Weight server returns these fractions as `freq`).
// Cost: O(n D), one pass over the matrix.
#include <limits>

#include "fl/defenses/defense_support.h"
#include "tensor/error.h"

namespace bastion {

namespace {
class FedAvg final : public ServerRule {
 public:
  explicit FedAvg(const Params& p) : sample_weighted_(p.text("weighting") == "samples"), lr_(p.real("lr")) {}

  AggregationOutput aggregate(const AggregationInput& in) override {
    const std::vector<int64_t> rows = all_rows(in.n);
    AggregationOutput out;
    out.weights = row_weights(in, rows, sample_weighted_, "fedavg");
    std::vector<double> scaled = out.weights;
    for (double& w : scaled) w *= lr_;  // exact for the default lr = 1
    out.update = weighted_sum_of_rows(in, rows, scaled);
    return out;
  }

 private:
  bool sample_weighted_;
  double lr_;
};
}  // namespace

const std::vector<ParamSpec>& fedavg_params() {
  static const std::vector<ParamSpec> specs = {
      {"weighting",
       ParamType::Text,
       std::string("samples"),
       "samples: weight by local data size; uniform: plain mean",
       -std::numeric_limits<double>::infinity(),
       std::numeric_limits<double>::infinity(),
       {"samples", "uniform"}},
      {"lr", ParamType::Real, 1.0, "server learning rate eta (global += eta * mean update)", 0, 1e6},
  };
  return specs;
}

std::unique_ptr<ServerRule> make_fedavg(const Params& params) { return std::make_unique<FedAvg>(params); }

}  // namespace bastion
