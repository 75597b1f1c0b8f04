// rsa (client): the worker half of RSA with the l1-norm penalty, Li et al. AAAI'19, "RSA: Byzantine-Robust
// Stochastic Aggregation Methods for Distributed Learning from Heterogeneous Datasets", Algorithm 1:
//   x_i <- x_i - lr (grad F_i(x_i; batch) + lambda sign(x_i - x_0))       every local step
// x_i is the client's own model, kept across rounds (ClientState "model"); x_0 is the global model it
// receives this round (fixed during the round). sign(0) = 0: a coordinate equal to x_0 gets no penalty.
// The run loop uploads (model - start) = x_i - x_0, so sign(x_0 - x_i) = -sign(upload): the server rule
// `rsa` (fl/defenses/rsa.cpp) then takes the paper's master step
//   x_0 <- x_0 - alpha (grad f_0(x_0) + lambda sum_i sign(x_0 - x_i)),   f_0 = (weight_decay/2)||x_0||^2
// without the client's x_i ever leaving the upload format every other rule uses (docs/fl.md "RSA").
// A client's first x_i is the x_0 it first receives (docs/decisions.md). BatchNorm buffers have no
// penalty: they follow the client's data, and the server averages them.
// Defaults are the paper's worker: one stochastic step per round (steps = 1), plain SGD (momentum 0);
// FL runs set epochs (steps = 0). lambda must match [server.rsa] lambda (the same lambda in the paper).
// Attackers: a data attack poisons x_i's batches, a Training attack replaces its steps, and upload attacks
// corrupt the uploaded x_i - x_0 (never the stored x_i: an attacker keeps training its own model).
// Memory: one model per client that has trained (N x D floats at most). Cost: as sgd, plus O(D) per step.
#include <memory>

#include "fl/clients/client_rule.h"
#include "fl/clients/local_training.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr const char* kModelKey = "model";

class RsaClient final : public ClientRule {
 public:
  explicit RsaClient(const Params& p) : schedule_(local_schedule(p)), lambda_(p.real("lambda")) {
    BASTION_CHECK(schedule_.rho == 0.0f, p.scope(), ".rho: RSA's workers take plain subgradient steps (rho must be 0)");
  }

  ClientResult train(ClientTask& task) const override {
    // Host copies in and out: the model may be a device replica.
    const std::vector<float> global = task.model.state_values();  // x_0
    std::vector<float> own(global.size());
    if (copy_stored(task.state, kModelKey, own, "rsa")) task.model.load_state_values(own);  // else x_i starts at x_0
    const GradientHook sign_term = [&](Model& m) { add_sign_gradient(m, global, lambda_); };
    ClientResult result = train_with_schedule(task, schedule_, {.gradient = &sign_term});
    store_model(task.state, kModelKey, task.model);
    return result;
  }
  ClientTraits traits() const override { return {.on_device = true}; }

  // The client's own x_i (personalised evaluation); the global model until it has trained.
  bool personal_model(const ClientState& state, std::span<const float> global, const Model& model,
                      std::span<float> out) const override {
    return copy_stored(state, kModelKey, out, "rsa");
  }

 private:
  LocalSchedule schedule_;
  double lambda_;
};

std::vector<ParamSpec> rsa_client_specs() {
  std::vector<ParamSpec> specs = with_schedule_params({
      {"lambda", ParamType::Real, 0.1,
       "weight of the l1 consensus penalty lambda ||x_i - x_0||_1 (use the server's lambda)", 0, 1e6},
  });
  // The paper's worker: one stochastic subgradient step per iteration, no momentum.
  for (ParamSpec& spec : specs) {
    if (spec.name == "steps") spec.default_value = int64_t{1};
    if (spec.name == "momentum") spec.default_value = 0.0;
  }
  return specs;
}
}  // namespace

const std::vector<ParamSpec>& rsa_client_params() {
  static const std::vector<ParamSpec> specs = rsa_client_specs();
  return specs;
}

std::unique_ptr<ClientRule> make_rsa_client(const Params& params) { return std::make_unique<RsaClient>(params); }

}  // namespace bastion
