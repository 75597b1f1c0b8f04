// fltrust: FLTrust (Cao et al., NDSS 2021). The server trains the global model on its small root set
// (the server split) and takes that update g0 as the direction it trusts:
//   TS_i  = ReLU(cos(Delta_i, g0))                      trust score (parameter columns)
//   D~_i  = Delta_i * |g0| / |Delta_i|                   every update rescaled to the server's norm
//   update = sum_i TS_i D~_i / (sum_i TS_i + eps)        eps = 0 (paper), 1e-5 (SPMC's code)
// BatchNorm buffer columns take the same TS_i weights without the rescaling (they are statistics, not
// gradients). All scores 0 (every upload points away from g0): the global model stays (zero update),
// every upload is flagged. An upload with TS_i = 0 is flagged.
// The server's update g0 = ModelUpdate(w, D0, ...) - w:
//   schedule = "clients" (default; the paper's Algorithm 1 runs the clients' ModelUpdate with the same
//     local iterations R_l, batch and learning rate): the clients' local schedule of this round, i.e. the
//     [clients.<rule>] keys epochs or steps, batch, lr (decayed for the round), momentum, weight_decay,
//     nesterov, grad_clip, drop_last (ServerData::client_schedule); plain SGD even when clients use SAM.
//   schedule = "own": this rule's epochs, batch, lr, momentum, weight_decay (defaults 1 epoch, batch 64,
//     SGD lr 0.01, momentum 0.9, wd 1e-5; SPMC's Server/FLTrust.py trains 10 epochs: epochs = 10).
// Preconditions: n >= 1, data.server_fraction > 0. A zero upload has cosine 0 (vector_cosine_cpu) and weight 0.
// Cost: one server training run (the clients' local work, on the root set) + O(n D).
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "fl/defenses/defense_support.h"
#include "fl/defenses/server_training.h"
#include "kernels/cpu/vector.h"
#include "tensor/error.h"

namespace bastion {

namespace {
class FlTrust final : public ServerRule {
 public:
  explicit FlTrust(const Params& p) : params_(p), eps_(p.real("eps")), own_schedule_(p.text("schedule") == "own") {}

  AggregationOutput aggregate(const AggregationInput& in) override {
    ServerData& data = require_server_data(in, "fltrust");
    BASTION_CHECK(in.n >= 1, "fltrust: no upload to aggregate");
    const std::vector<float> trained = data.train(in.global, train_spec(data, in));
    const int64_t P = in.num_parameters;
    std::vector<float> g0(static_cast<size_t>(P));
    for (int64_t d = 0; d < P; ++d) g0[d] = trained[d] - in.global[d];
    const double g0_norm = vector_norm_cpu(g0.data(), P);
    std::vector<double> trust(static_cast<size_t>(in.n)), scale(static_cast<size_t>(in.n));
    double trust_sum = 0.0;
    AggregationOutput out;
    out.flagged.assign(static_cast<size_t>(in.n), 0);
    for (int64_t i = 0; i < in.n; ++i) {
      const float* row = in.updates + i * in.D;
      trust[i] = std::max(0.0, vector_cosine_cpu(row, g0.data(), P));
      const double norm = vector_norm_cpu(row, P);
      scale[i] = norm > 0 ? g0_norm / norm : 0.0;
      trust_sum += trust[i];
      out.flagged[i] = trust[i] == 0.0;
    }
    out.update.assign(static_cast<size_t>(in.D), 0.0f);
    if (trust_sum == 0.0) return out;
    std::vector<double> sum(static_cast<size_t>(in.D), 0.0);
    for (int64_t i = 0; i < in.n; ++i) {
      if (trust[i] == 0.0) continue;
      const float* row = in.updates + i * in.D;
      const double w_param = trust[i] * scale[i], w_buffer = trust[i];
      for (int64_t d = 0; d < P; ++d) sum[d] += w_param * row[d];
      for (int64_t d = P; d < in.D; ++d) sum[d] += w_buffer * row[d];
    }
    for (int64_t d = 0; d < in.D; ++d) out.update[d] = static_cast<float>(sum[d] / (trust_sum + eps_));
    return out;
  }

 private:
  Params params_;
  double eps_;
  bool own_schedule_;

  ServerTrainSpec train_spec(const ServerData& data, const AggregationInput& in) const {
    if (own_schedule_) return server_train_spec(params_, in.seed);
    std::optional<ServerTrainSpec> spec = data.client_schedule(in.round);
    BASTION_CHECK(spec.has_value(), "fltrust: schedule = \"clients\" trains the root set with the clients' local ",
                  "schedule, but the client rule has none; set server.fltrust.schedule = \"own\"");
    spec->seed = in.seed;
    return *spec;
  }
};
}  // namespace

const std::vector<ParamSpec>& fltrust_params() {
  static const std::vector<ParamSpec> specs = with_server_training_params(
      {{"eps", ParamType::Real, 0.0, "added to the sum of trust scores (0 = paper; SPMC's code uses 1e-5)", 0, 1},
       {"schedule",
        ParamType::Text,
        std::string("clients"),
        "clients: the root-set update runs the clients' local schedule (paper) | own: epochs, batch, lr, "
        "momentum, weight_decay below (SPMC: epochs = 10)",
        -std::numeric_limits<double>::infinity(),
        std::numeric_limits<double>::infinity(),
        {"clients", "own"}}},
      1);
  return specs;
}

std::unique_ptr<ServerRule> make_fltrust(const Params& params) { return std::make_unique<FlTrust>(params); }

}  // namespace bastion
