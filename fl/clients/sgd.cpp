// sgd: FedAvg's client (McMahan et al. 2017). Starting from the round's model, run plain SGD (PyTorch
// semantics, nn/optim.h) over the client's local data (fl/clients/local_training.h):
//   for E epochs (or exactly K steps when steps > 0):  w <- w - lr_t * step(grad CE(f_w(x), y))
//   lr_t = lr * lr_decay^floor((round - 1) / lr_decay_every)     (BapFL: 0.99 every 10 rounds)
// Momentum starts from zero every round unless keep_momentum, which stores the buffer in the client's
// state (a client that is not sampled keeps its old buffer). grad_clip > 0 rescales the gradient to that
// global L2 norm before each step (BapFL's clip 10).
// rho > 0 turns each step into a SAM step (Foret et al. 2021, nn/optim.h: gradient at w + rho g/|g|,
// then the SGD update at w): FedSAM's client, and the `sam` client step of the round benchmark.
// Attacks: a malicious client's Data/Training attack configures the loader; a Training attack replaces
// the step (fl/attacks/attack.h).
// Cost: E * |D_k| forward/backward passes.
//
// Two personalised baselines are this rule plus one thing (PFL-FACTS §§4, 6):
//   fedavg-ft  variant after-local (FedCAP, default): the client's own model is its model right after its
//              last local training (kept in ClientState, N x D floats; stale until sampled again, the
//              global model until first sampled); final-head (FedFSA/FedCR): after the last round every
//              client tunes the head of the global model (post step head-tune); after-local-final-head
//              (FedFSA's code): after-local in every round, and in the last the head of the global model
//              tuned as final-head; before-eval (Qin et al. KDD'23): every client fine-tunes the whole
//              global model before every evaluation.
//   st         Simple-Tuning after FedAvg: re-initialise the head, retrain it on clean local data with the
//              body frozen, then evaluate (post step st).
#include <algorithm>
#include <memory>

#include "fl/clients/client_rule.h"
#include "fl/clients/local_training.h"
#include "fl/clients/post_step.h"
#include "tensor/error.h"

namespace bastion {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr const char* kModelKey = "model";  // fedavg-ft after-local: the model after local training

class SgdClient final : public ClientRule {
 public:
  explicit SgdClient(const Params& p) : schedule_(local_schedule(p)) {}
  ClientResult train(ClientTask& task) const override { return train_with_schedule(task, schedule_); }
  ClientTraits traits() const override { return {.on_device = true}; }

 private:
  LocalSchedule schedule_;
};

class FedAvgFtClient final : public ClientRule {
 public:
  explicit FedAvgFtClient(const Params& p) : schedule_(local_schedule(p)), variant_(p.text("variant")) {
    if (variant_ == "final-head" || variant_ == "after-local-final-head")
      post_ = tuning_spec(p, schedule_, PostSpec::Kind::HeadTune, PostSpec::When::Final);
    else if (variant_ == "before-eval")
      post_ = tuning_spec(p, schedule_, PostSpec::Kind::FineTune, PostSpec::When::EveryEvaluation);
  }
  ClientResult train(ClientTask& task) const override {
    ClientResult result = train_with_schedule(task, schedule_);
    if (keeps_local_model()) store_model(task.state, kModelKey, task.model);
    return result;
  }
  ClientTraits traits() const override { return {.on_device = true}; }
  bool personal_model(const ClientState& state, std::span<const float> global, const Model& model,
                      std::span<float> out) const override {
    return keeps_local_model() && copy_stored(state, kModelKey, out, "fedavg-ft");
  }
  std::optional<PostSpec> post_step() const override { return post_; }
  // FedFSA's last round synchronises every client with the global model before it tunes the head.
  bool prepare_post_step(const ClientState&, std::span<const float> global, Model& model,
                         const PostStartData&) const override {
    if (variant_ != "after-local-final-head") return false;
    std::copy(global.begin(), global.end(), model.flat_state().begin());
    return true;
  }

 private:
  bool keeps_local_model() const { return variant_ == "after-local" || variant_ == "after-local-final-head"; }

  LocalSchedule schedule_;
  std::string variant_;
  std::optional<PostSpec> post_;
};

class StClient final : public ClientRule {
 public:
  explicit StClient(const Params& p)
      : schedule_(local_schedule(p)),
        post_(tuning_spec(p, schedule_, PostSpec::Kind::SimpleTuning, PostSpec::When::Final)) {}
  ClientResult train(ClientTask& task) const override { return train_with_schedule(task, schedule_); }
  std::optional<PostSpec> post_step() const override { return post_; }
  ClientTraits traits() const override { return {.on_device = true}; }

 private:
  LocalSchedule schedule_;
  PostSpec post_;
};

}  // namespace

const std::vector<ParamSpec>& sgd_client_params() {
  static const std::vector<ParamSpec> specs = local_schedule_params();
  return specs;
}

std::unique_ptr<ClientRule> make_sgd_client(const Params& params) { return std::make_unique<SgdClient>(params); }

const std::vector<ParamSpec>& fedavg_ft_client_params() {
  static const std::vector<ParamSpec> specs = [] {
    std::vector<ParamSpec> extra = {
        {"variant",
         ParamType::Text,
         std::string("after-local"),
         "after-local (FedCAP: the model after local training) | final-head (FedFSA: head tuning after the last "
         "round) | after-local-final-head (FedFSA's code: after-local, then final-head in the last round) | "
         "before-eval (Qin et al.: fine-tune the global model before every evaluation)",
         -kInf,
         kInf,
         {"after-local", "final-head", "after-local-final-head", "before-eval"}}};
    for (ParamSpec& spec : tuning_params(0, 0.0)) extra.push_back(spec);
    return with_schedule_params(extra);
  }();
  return specs;
}

std::unique_ptr<ClientRule> make_fedavg_ft_client(const Params& params) {
  return std::make_unique<FedAvgFtClient>(params);
}

const std::vector<ParamSpec>& st_client_params() {
  static const std::vector<ParamSpec> specs = with_schedule_params(tuning_params(5, 0.01));
  return specs;
}

std::unique_ptr<ClientRule> make_st_client(const Params& params) { return std::make_unique<StClient>(params); }

}  // namespace bastion
