// fedrep: FedRep (Collins et al. ICML'21; PFL-FACTS §7, IMPLEMENTATION-FACTS §1.1). The client's model is
// the global body plus its own head (ClientState "head"; the global model's head until its first
// participation). Per round:
//   1. head phase: body frozen, head_epochs epochs of SGD on the head;
//   2. body phase: head frozen, body_epochs epochs of SGD on the body;
//   3. only the body is uploaded (shared_part = Body); the head stays on the client.
// Each phase has its own optimizer (momentum from zero, lr_t of the schedule; head_lr scales the head's).
// The loader's epochs are numbered across the phases (the body phase's shuffles differ from the head
// phase's). A malicious client's attack poisons both phases' batches; a Training attack (BapFL) replaces
// the steps of both phases and sees the phase's frozen part (BapFL's own head-freezing nests inside).
// Non-sampled clients keep their head (pFedSAM Alg. 1 lines 17-19). pFedSAM's defaults: 2 + 2 epochs.
// Cost: (head_epochs + body_epochs) x |D_k| forward/backward passes; memory: one head per client.
//
// pfedsam: pFedSAM (seed paper; PFL-FACTS §15.1, SPEC §6) is FedRep whose body phase takes SAM steps
// (Foret et al. 2021): per batch, g = grad at phi; eps = rho g / ||g|| over the body's parameters (the
// frozen head is not perturbed); the SGD step at phi uses the gradient at phi + eps. rho = 0.05. The
// head phase is FedRep's. No public code exists: docs/decisions.md "pfedsam" lists the choices.
// Cost: head_epochs + 2 x body_epochs passes per sample.
#include <memory>

#include "fl/clients/client_rule.h"
#include "fl/clients/local_training.h"
#include "nn/optim.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr const char* kHeadKey = "head";

class FedRepClient final : public ClientRule {
 public:
  // body_sam: the schedule's rho is the SAM radius of the body phase (pfedsam); else it must be 0.
  FedRepClient(const Params& p, bool body_sam)
      : schedule_(local_schedule(p)), head_epochs_(p.integer("head_epochs")), body_epochs_(p.integer("body_epochs")),
        head_lr_(p.real("head_lr")), body_rho_(body_sam ? schedule_.rho : 0.0f) {
    BASTION_CHECK(body_sam || schedule_.rho == 0.0f, p.scope(),
                  ".rho: FedRep trains with SGD (pfedsam is FedRep with SAM)");
    BASTION_CHECK(schedule_.steps == 0, p.scope(), ".steps: FedRep counts epochs per part (head_epochs, body_epochs)");
    BASTION_CHECK(head_epochs_ + body_epochs_ > 0, p.scope(), ": head_epochs + body_epochs must be at least 1");
  }

  ClientResult train(ClientTask& task) const override {
    Model& model = task.model;
    const auto stored = task.state.vectors.find(kHeadKey);
    if (stored != task.state.vectors.end()) {  // through a host copy: the model may be a device replica
      std::vector<float> state = model.state_values();
      scatter_head(model, stored->second, state);
      model.load_state_values(state);
    }
    ClientLoader data(task, schedule_);
    model.reseed_dropout(dropout_seed(task));
    model.train(true);
    const float lr = schedule_.lr_at(task.round);
    ClientResult head = phase(task, data, /*head=*/true, head_epochs_, 0,
                              head_lr_ > 0 ? static_cast<float>(head_lr_ * schedule_.decay_at(task.round)) : lr);
    ClientResult body = phase(task, data, /*head=*/false, body_epochs_, head_epochs_, lr);
    model.set_all_trainable(true);
    task.state.vectors[kHeadKey] = gather_head(model, model.state_values());
    ClientResult result;
    result.head_steps = head.steps;
    result.body_steps = body.steps;
    result.steps = head.steps + body.steps;
    result.samples = head.samples + body.samples;
    result.train_loss = result.steps > 0 ? (head.train_loss * head.steps + body.train_loss * body.steps) /
                                               static_cast<double>(result.steps)
                                         : 0.0;
    return result;
  }

  ClientTraits traits() const override { return {.shared = SharedPart::Body, .on_device = true}; }

  bool personal_model(const ClientState& state, std::span<const float> global, const Model& model,
                      std::span<float> out) const override {
    return global_with_stored_head(state, kHeadKey, global, model, out);
  }

 private:
  LocalSchedule schedule_;
  int64_t head_epochs_, body_epochs_;
  double head_lr_;
  float body_rho_;

  // SAM over the trainable part: the body (the head is frozen in the body phase).
  std::unique_ptr<Sam> body_sam(Model& model, Sgd& sgd) const {
    if (body_rho_ <= 0.0f) return nullptr;
    return std::make_unique<Sam>(model, sgd, schedule_.sam_options(body_rho_));
  }

  // Trains only the head (head = true) or only the body for `epochs` epochs.
  ClientResult phase(ClientTask& task, ClientLoader& data, bool head, int64_t epochs, int64_t first_epoch,
                     float lr) const {
    if (epochs == 0) return {};
    task.model.set_trainable(/*head=*/true, head);
    task.model.set_trainable(/*head=*/false, !head);
    SgdOptions options = schedule_.sgd;
    options.lr = lr;
    Sgd sgd(task.model, options);
    const std::unique_ptr<Sam> sam = head ? nullptr : body_sam(task.model, sgd);
    LocalPass pass{task.model, data.loader, sgd, sam.get(), task, data.attack_rng, schedule_.grad_clip};
    return run_local_epochs(pass, epochs, 0, first_epoch);
  }
};
}  // namespace

namespace {
std::vector<ParamSpec> phase_params(double rho, const char* rho_doc) {
  std::vector<ParamSpec> specs = with_schedule_params({
      {"head_epochs", ParamType::Integer, int64_t{2}, "epochs on the head with the body frozen (pFedSAM: 2)", 0, 1e6},
      {"body_epochs", ParamType::Integer, int64_t{2}, "epochs on the body with the head frozen (pFedSAM: 2)", 0, 1e6},
      {"head_lr", ParamType::Real, 0.0, "learning rate of the head phase (0 = lr; decays with it)", 0, 100},
  });
  for (ParamSpec& spec : specs) {
    if (spec.name == "rho") spec.default_value = rho, spec.doc = rho_doc;
    // The shared schedule's keys that the two phases replace: listed, so a shared config loads, but unused.
    if (spec.name == "epochs") spec.doc = "unused: head_epochs and body_epochs set the schedule";
    if (spec.name == "keep_momentum") spec.doc = "unused: each phase starts a fresh optimiser";
  }
  return specs;
}
}  // namespace

const std::vector<ParamSpec>& fedrep_client_params() {
  static const std::vector<ParamSpec> specs =
      phase_params(0.0, "must be 0 (pfedsam is FedRep with SAM in the body phase)");
  return specs;
}

std::unique_ptr<ClientRule> make_fedrep_client(const Params& params) {
  return std::make_unique<FedRepClient>(params, /*body_sam=*/false);
}

const std::vector<ParamSpec>& pfedsam_client_params() {
  static const std::vector<ParamSpec> specs = phase_params(0.05, "SAM radius of the body phase (pFedSAM: 0.05)");
  return specs;
}

std::unique_ptr<ClientRule> make_pfedsam_client(const Params& params) {
  return std::make_unique<FedRepClient>(params, /*body_sam=*/true);
}

}  // namespace bastion
