// sageflow: Sageflow's filtering and loss-weighted averaging (Park et al., NeurIPS 2021), without the
// staleness part (rounds here are synchronous). The server scores every client's model
// w_i = global + Delta_i on its small public set (the server split):
//   E_i = mean prediction entropy, L_i = mean cross-entropy loss
//   kept = { i : E_i < E_th }                            entropy filter (E_th = 2.0, SPMC's threshold)
//   beta_i = m_i / L_i^delta / sum_{j in kept} m_j / L_j^delta   (m_i = |D_i|, or 1 with weighting =
//   uniform; delta = 1)
//   update = sum_{i in kept} beta_i Delta_i
// Filtered uploads are flagged. Nobody kept: the global model stays (zero update). A loss of exactly 0
// is floored at 1e-12 so the weight stays finite.
// Unlike SPMC's code (which scores the global model for every client, so all weights come out equal),
// each client's own model is scored, as in the paper.
// Preconditions: n >= 1, data.server_fraction > 0. Cost: n evaluations over the server split + O(n D).
#include <cmath>

#include "fl/defenses/defense_support.h"
#include "fl/defenses/server_training.h"
#include "tensor/error.h"

namespace bastion {

namespace {
class SageFlow final : public ServerRule {
 public:
  explicit SageFlow(const Params& p)
      : threshold_(p.real("entropy_threshold")), delta_(p.real("delta")),
        sample_weighted_(p.text("weighting") == "samples") {}

  AggregationOutput aggregate(const AggregationInput& in) override {
    ServerData& data = require_server_data(in, "sageflow");
    BASTION_CHECK(in.n >= 1, "sageflow: no upload to aggregate");
    std::vector<int64_t> kept;
    std::vector<double> weights;
    std::vector<float> model(in.global.begin(), in.global.end());
    for (int64_t i = 0; i < in.n; ++i) {
      const float* row = in.updates + i * in.D;
      for (int64_t d = 0; d < in.D; ++d) model[d] = in.global[d] + row[d];
      const ServerEval score = data.evaluate(model);
      if (!(score.entropy < threshold_)) continue;
      const double m = sample_weighted_ ? static_cast<double>(in.num_samples[i]) : 1.0;
      kept.push_back(i);
      weights.push_back(m / std::pow(std::max(score.loss, 1e-12), delta_));
    }
    AggregationOutput out;
    out.flagged = flags_except(in.n, kept);
    if (kept.empty()) {
      out.update.assign(static_cast<size_t>(in.D), 0.0f);
      return out;
    }
    double total = 0.0;
    for (double w : weights) total += w;
    for (double& w : weights) w /= total;
    out.update = weighted_sum_of_rows(in, kept, weights);
    return out;
  }

 private:
  double threshold_, delta_;
  bool sample_weighted_;
};
}  // namespace

const std::vector<ParamSpec>& sageflow_params() {
  static const std::vector<ParamSpec> specs = {
      {"entropy_threshold", ParamType::Real, 2.0, "drop models whose mean prediction entropy (nats) is not below this",
       0, 1e3},
      {"delta", ParamType::Real, 1.0, "exponent of the loss in the weights m_i / loss_i^delta", 0, 100},
      weighting_param("samples"),
  };
  return specs;
}

std::unique_ptr<ServerRule> make_sageflow(const Params& params) { return std::make_unique<SageFlow>(params); }

}  // namespace bastion
