// ditto: Ditto (Li et al. ICML'21; PFL-FACTS §5). Each client keeps a personal model v (ClientState
// "personal", the received global model at its first participation) trained on
//   F_k(v) + (lambda/2) ||v - w_ref||^2,   gradient  grad F_k(v) + lambda (v - w_ref),
// with w_ref the global model received this round, while the global copy w is trained like FedAvg's
// client and uploaded (w - w_ref). Only w is aggregated; v is the client's own model for evaluation.
// Step orders (both in use):
//   sequential   (default; FederatedScope backdoor-bench, PFLlib): personal_epochs on v, then epochs on w
//   interleaved  (FedCAP, original Ditto): per batch, a personal step on v, then a global step on w on
//                the same batch; personal_epochs is ignored (one personal step per global step)
// A malicious client's data attack poisons both models' batches; a Training attack replaces only the
// global model's step (the upload is what the attack targets). grad_clip applies to both, before the
// proximal term is added (FedCAP's PerturbedGradientDescent adds it inside the optimizer step).
// Memory: one personal model per client that has trained (N x D floats at most).
// Cost: (epochs + personal_epochs) x |D_k| forward/backward passes.
#include <memory>

#include "fl/clients/client_rule.h"
#include "fl/clients/local_training.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr const char* kPersonalKey = "personal";
constexpr uint64_t kPersonalStream = 0x7065727330ULL;

class DittoClient final : public ClientRule {
 public:
  explicit DittoClient(const Params& p)
      : schedule_(local_schedule(p)), lambda_(p.real("lambda")), personal_epochs_(p.integer("personal_epochs")),
        interleaved_(p.text("order") == "interleaved"), personal_lr_(p.real("personal_lr")) {
    BASTION_CHECK(schedule_.rho == 0.0f, p.scope(), ".rho: Ditto trains with SGD (rho must be 0)");
  }

  ClientResult train(ClientTask& task) const override {
    BASTION_CHECK(task.second != nullptr, "ditto: the run loop gave no second model replica");
    Model& global = task.model;
    Model& personal = *task.second;
    // Host copies in and out: the models may be device replicas (run.device = "cuda").
    const std::vector<float> reference = global.state_values();
    std::vector<float> own(reference.size());
    personal.load_state_values(
        copy_stored(task.state, kPersonalKey, own, "ditto") ? own : reference);  // else first participation
    const Tensor reference_there =
        Tensor::from_vector({static_cast<int64_t>(reference.size())}, reference).to(personal.device());
    const GradientHook prox = [&](Model& m) { add_proximal_gradient(m, reference_there, lambda_); };
    ClientResult result =
        interleaved_ ? train_interleaved(task, personal, prox) : train_sequential(task, personal, prox);
    store_model(task.state, kPersonalKey, personal);
    return result;
  }

  bool personal_model(const ClientState& state, std::span<const float> global, const Model& model,
                      std::span<float> out) const override {
    return copy_stored(state, kPersonalKey, out, "ditto");
  }
  ClientTraits traits() const override { return {.second_model = true, .on_device = true}; }

 private:
  LocalSchedule schedule_;
  double lambda_;
  int64_t personal_epochs_;
  bool interleaved_;
  double personal_lr_;

  SgdOptions options(const ClientTask& task, bool for_personal) const {
    SgdOptions o = schedule_.sgd;
    o.lr = schedule_.lr_at(task.round);
    if (for_personal && personal_lr_ > 0) o.lr = static_cast<float>(personal_lr_ * schedule_.decay_at(task.round));
    return o;
  }

  static void start(Model& model, uint64_t dropout) {
    model.reseed_dropout(dropout);
    model.train(true);
  }

  ClientResult train_sequential(ClientTask& task, Model& personal, const GradientHook& prox) const {
    const uint64_t personal_seed = Generator(task.seed).fork(kPersonalStream).next_u64();
    ClientTask personal_task = task;  // same client, data and attack; its own loader seed
    personal_task.seed = personal_seed;
    ClientLoader personal_data(personal_task, schedule_);
    Sgd personal_sgd(personal, options(task, true));
    start(personal, dropout_seed(personal_task));
    LocalPass personal_pass{personal,
                            personal_data.loader,
                            personal_sgd,
                            nullptr,
                            personal_task,
                            personal_data.attack_rng,
                            schedule_.grad_clip,
                            &prox,
                            /*allow_attack=*/false};
    const int64_t epochs = personal_epochs_ > 0 ? personal_epochs_ : schedule_.epochs;
    const ClientResult personal_result = run_local_epochs(personal_pass, epochs, schedule_.steps);

    ClientLoader data(task, schedule_);
    Sgd sgd(task.model, options(task, false));
    start(task.model, dropout_seed(task));
    LocalPass pass{task.model, data.loader, sgd, nullptr, task, data.attack_rng, schedule_.grad_clip};
    ClientResult result = run_local_epochs(pass, schedule_.epochs, schedule_.steps);
    result.personal_steps = personal_result.steps;
    return result;
  }

  ClientResult train_interleaved(ClientTask& task, Model& personal, const GradientHook& prox) const {
    ClientLoader data(task, schedule_);
    Sgd sgd(task.model, options(task, false));
    Sgd personal_sgd(personal, options(task, true));
    start(task.model, dropout_seed(task));
    start(personal, Generator(task.seed).fork(kPersonalStream).next_u64());
    LocalPass pass{task.model, data.loader, sgd, nullptr, task, data.attack_rng, schedule_.grad_clip};
    LocalPass personal_pass{
        personal, data.loader,           personal_sgd, nullptr, task, data.attack_rng, schedule_.grad_clip,
        &prox,    /*allow_attack=*/false};
    const BatchStep both = [&](const Tensor& x, const LabelTensor& y, int64_t) {
      local_step(personal_pass, x, y);
      return local_step(pass, x, y);
    };
    ClientResult result = run_epochs(data.loader, schedule_.epochs, schedule_.steps, 0, both,
                                     "ditto: client " + std::to_string(task.client));
    result.personal_steps = result.steps;
    return result;
  }
};
}  // namespace

const std::vector<ParamSpec>& ditto_client_params() {
  static const std::vector<ParamSpec> specs = with_schedule_params({
      {"lambda", ParamType::Real, 0.1,
       "weight of the proximal term (lambda/2)||v - w||^2 (FedCAP grid 0.01, 0.1, 1, 2)", 0, 1e6},
      {"personal_epochs", ParamType::Integer, int64_t{0}, "sequential order: epochs on the personal model (0 = epochs)",
       0, 1e6},
      {"personal_lr", ParamType::Real, 0.0, "learning rate of the personal model (0 = lr; decays with it)", 0, 100},
      {"order",
       ParamType::Text,
       std::string("sequential"),
       "sequential (personal epochs, then global epochs: FederatedScope, PFLlib) | interleaved (per batch, FedCAP, "
       "original Ditto)",
       -kInf,
       kInf,
       {"sequential", "interleaved"}},
  });
  return specs;
}

std::unique_ptr<ClientRule> make_ditto_client(const Params& params) { return std::make_unique<DittoClient>(params); }

}  // namespace bastion
