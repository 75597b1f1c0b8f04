// finetune: aggregate, then the server fine-tunes the new global model on its own validation split
// (SPMC's "Finetuning" baseline; with rho > 0 the fine-tuning steps are SAM steps, SPMC's "FTSAM").
//   w' = global + mean_i Delta_i          (uniform by default, as SPMC; weighting = samples for FedAvg's)
//   w'' = SGD (or SAM) for `epochs` over the server split, starting from w'
//   update = w'' - global
// Preconditions: data.server_fraction > 0. No robustness of its own: the fine-tuning can only repair
// what a few clean epochs repair. Flags nobody.
// Cost: O(n D) + one training run over the server split.
// Defaults: 1 epoch, batch 64, SGD lr 0.01, momentum 0.9, wd 1e-5 (SPMC); rho 0.05 for FTSAM.

#include "fl/defenses/defense_support.h"
#include "fl/defenses/server_training.h"
#include "tensor/error.h"

namespace bastion {

namespace {
class Finetune final : public ServerRule {
 public:
  explicit Finetune(const Params& p) : params_(p), sample_weighted_(p.text("weighting") == "samples") {}

  AggregationOutput aggregate(const AggregationInput& in) override {
    ServerData& data = require_server_data(in, "finetune");
    BASTION_CHECK(in.n >= 1, "finetune: no upload to aggregate");
    AggregationOutput out;
    out.update = mean_of_rows(in, all_rows(in.n), sample_weighted_);
    std::vector<float> start(in.global.begin(), in.global.end());
    for (int64_t d = 0; d < in.D; ++d) start[d] += out.update[d];
    ServerTrainSpec spec = server_train_spec(params_, in.seed);
    spec.rho = params_.real("rho");
    const std::vector<float> tuned = data.train(start, spec);
    for (int64_t d = 0; d < in.D; ++d) out.update[d] = tuned[d] - in.global[d];
    return out;
  }

 private:
  Params params_;
  bool sample_weighted_;
};
}  // namespace

const std::vector<ParamSpec>& finetune_params() {
  static const std::vector<ParamSpec> specs = with_server_training_params(
      {weighting_param("uniform"),
       {"rho", ParamType::Real, 0.0, "SAM radius of the fine-tuning steps (0 = SGD; SPMC's FTSAM uses 0.05)", 0, 10}},
      1);
  return specs;
}

std::unique_ptr<ServerRule> make_finetune(const Params& params) { return std::make_unique<Finetune>(params); }

}  // namespace bastion
