// fedrod: FedRoD (Chen & Chao, ICLR'22) as FedCAP and PFLlib run it (PFL-FACTS §8, clientrod.py). The model
// is a body plus a generic head (its last linear layer, Model's "head"); both are trained and uploaded as
// FedAvg's are (shared_part = All). Each client also keeps a personal head p_i (ClientState
// "personal_head", the head's columns: weight then bias), never uploaded. Per batch (x, y):
//   1. personal step: z = body(x), o_g = generic_head(z) at the batch's starting parameters;
//      loss_p = CE(o_g + p_i(z), y); one SGD step on p_i only (body and generic head untouched);
//   2. generic step: loss = CE(o_g + log n, y) (balanced softmax, autograd/ops.h) with n the client's class
//      counts; one SGD step on body + generic head.
// PFLlib computes z and o_g once and steps the generic model before the personal head; the personal step
// reads only z and o_g from before that step, so running it first is the same computation.
//
// How the personal step gets its gradient without a separate forward of the head: both heads are linear
// maps of the same z, so o_g + p_i(z) = (W_g + W_p) z + (b_g + b_p): the model with its head replaced by the
// sum outputs exactly o_g + o_p, and the gradient of CE w.r.t. that summed head equals the gradient w.r.t.
// (W_p, b_p) (d(W_g + W_p)/dW_p = I). So the step forwards the model with the summed head and the body
// frozen (nn/model.h has no way to stop a forward at the head's input), reads the head's gradient, and
// applies SGD to p_i's own vector (kernels/cpu/optim.h). Cost: one extra forward per batch (the backward
// stops at the head). The generic head, BatchNorm running statistics and counters are restored after it,
// so they move once per batch, as in PFLlib; dropout is reseeded to the same per-step seed before both
// forwards, so both steps see the same features z.
// Holds for every model of nn/models.cpp: the head is the last linear layer with nothing after it.
//
// Evaluation: the client's model is argmax(o_g + o_p), i.e. the global model with head W_g + W_p
// (personal_model); a client that never trained is judged on the global model (see personal_init).
// Class counts n: the labels of the client's training indices; for a malicious client with a data attack,
// the labels its poisoned loader yields over the round's batches (FedCAP flips labels before counting), so
// a backdoor's target class is counted. Classes with n_c = 0 get log 0 = -inf (probability 0), as in PFLlib;
// a label with n_c = 0 cannot occur since the counts come from the labels trained on (the op checks).
// Attacks: a data attack poisons the batches of both steps; a Training attack replaces the generic step
// (the upload is what it targets); the personal step is always the rule's own (p_i is never uploaded).
// Optimizers: the schedule's SgdOptions (lr_t, momentum, weight decay, nesterov) for both; the personal
// head's velocity starts at zero every round (FedCAP: plain SGD, lr 0.01, no momentum). grad_clip clips
// each step's gradient over its own parameters. Memory: one head per client. Cost: one extra forward per
// batch; 1.37x the sgd rule's round in configs/baselines/fedrod-fmnist.toml.
#include <cmath>
#include <limits>
#include <memory>

#include "autograd/ops.h"
#include "fl/attacks/attack.h"
#include "fl/clients/client_rule.h"
#include "fl/clients/local_training.h"
#include "kernels/cpu/optim.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr const char* kPersonalHeadKey = "personal_head";
constexpr uint64_t kStepDropoutStream = 0x726f6473ULL;

// p_i's values and its SGD velocity for this round.
struct PersonalHead {
  std::vector<float> weights, velocity;
  bool first_step = true;
};

// Rescales `g` to L2 norm max_norm when larger (norm in double); max_norm <= 0 does nothing.
void clip_norm(std::vector<float>& g, double max_norm) {
  if (max_norm <= 0.0) return;
  double sum = 0.0;
  for (float v : g) sum += static_cast<double>(v) * v;
  const double norm = std::sqrt(sum);
  if (norm <= max_norm) return;
  const float scale = static_cast<float>(max_norm / norm);
  for (float& v : g) v *= scale;
}

// Class counts of the labels the client trains on this round (see the top of the file).
std::vector<int64_t> trained_label_counts(const ClientTask& task, BatchLoader& loader, const LocalSchedule& schedule) {
  std::vector<int64_t> counts(static_cast<size_t>(task.data.num_classes), 0);
  if (!task.attack) {
    for (int64_t i : task.indices) ++counts[static_cast<size_t>(task.data.labels[static_cast<size_t>(i)])];
    return counts;
  }
  const BatchStep count = [&](const Tensor&, const LabelTensor& y, int64_t) {
    for (int64_t n = 0; n < y.size(); ++n) ++counts[static_cast<size_t>(y[n])];
    return 0.0;
  };
  run_epochs(loader, schedule.epochs, schedule.steps, 0, count, "fedrod: client " + std::to_string(task.client));
  return counts;
}

class FedRodClient final : public ClientRule {
 public:
  explicit FedRodClient(const Params& p) : schedule_(local_schedule(p)), zero_init_(p.text("personal_init") == "zero") {
    BASTION_CHECK(schedule_.rho == 0.0f, p.scope(), ".rho: FedRoD trains with SGD (rho must be 0)");
    BASTION_CHECK(!schedule_.decay_per_client_epoch, p.scope(),
                  ".lr_decay_scope: FedRoD decays its two learning rates per round (use \"round\")");
    BASTION_CHECK(!schedule_.keep_momentum, p.scope(), ".keep_momentum: FedRoD's optimizers start fresh every round");
  }

  ClientResult train(ClientTask& task) const override {
    Model& model = task.model;
    PersonalHead head{initial_personal_head(task), {}, true};
    ClientLoader data(task, schedule_);
    const std::vector<float> log_prior = balanced_softmax_log_prior(trained_label_counts(task, data.loader, schedule_));
    SgdOptions options = schedule_.sgd;
    options.lr = schedule_.lr_at(task.round);
    Sgd sgd(model, options);
    model.train(true);
    LocalPass pass{model, data.loader, sgd, nullptr, task, data.attack_rng, schedule_.grad_clip};
    const ClientResult result = run(pass, head, log_prior);
    store(task.state, kPersonalHeadKey, head.weights);
    return result;
  }
  ClientTraits traits() const override { return {.on_device = true}; }

  // The global model with its head replaced by generic + personal (the sum identity above).
  bool personal_model(const ClientState& state, std::span<const float> global, const Model& model,
                      std::span<float> out) const override {
    const auto stored = state.vectors.find(kPersonalHeadKey);
    if (stored == state.vectors.end()) return false;
    std::copy(global.begin(), global.end(), out.begin());
    std::vector<float> combined = gather_head(model, global);
    BASTION_CHECK(combined.size() == stored->second.size(), "fedrod: stored personal head of ", stored->second.size(),
                  " values, model ", model.name(), " has a head of ", combined.size());
    for (size_t i = 0; i < combined.size(); ++i) combined[i] += stored->second[i];
    scatter_head(model, combined, out);
    return true;
  }

 private:
  LocalSchedule schedule_;
  bool zero_init_;

  // The stored p_i, or at the first participation the received global head (or zeros).
  std::vector<float> initial_personal_head(const ClientTask& task) const {
    const auto stored = task.state.vectors.find(kPersonalHeadKey);
    if (stored != task.state.vectors.end()) return stored->second;
    std::vector<float> head = gather_head(task.model, task.model.state_values());
    if (zero_init_) std::fill(head.begin(), head.end(), 0.0f);
    return head;
  }

  ClientResult run(LocalPass& pass, PersonalHead& head, const std::vector<float>& log_prior) const {
    const Generator dropout = Generator(dropout_seed(pass.task)).fork(kStepDropoutStream);
    const BatchStep both = [&](const Tensor& x, const LabelTensor& y, int64_t k) {
      const uint64_t step_dropout = dropout.fork(static_cast<uint64_t>(k)).next_u64();
      const Tensor x_there = x.to(pass.model.device());  // the loader's batch, on a device replica's device
      pass.model.reseed_dropout(step_dropout);
      personal_step(pass, head, x_there, y);
      pass.model.reseed_dropout(step_dropout);
      return generic_step(pass, x_there, y, log_prior);
    };
    ClientResult result = run_epochs(pass.loader, schedule_.epochs, schedule_.steps, 0, both,
                                     "fedrod: client " + std::to_string(pass.task.client));
    result.personal_steps = result.steps;
    return result;
  }

  // Balanced-softmax SGD step on body + generic head, or the Training attack's step in its place.
  double generic_step(LocalPass& pass, const Tensor& x, const LabelTensor& y,
                      const std::vector<float>& log_prior) const {
    const Attack* attack = pass.task.attack;
    if (attack && attack->kind() == AttackKind::Training) {
      TrainingStepContext context{pass.model, pass.sgd, x, y, pass.attack_rng};
      return attack->training_step(context);
    }
    pass.model.zero_grad();
    Tensor loss = balanced_softmax_cross_entropy(pass.model.forward(x), y, log_prior);
    loss.backward();
    clip_gradient_norm(pass.model, pass.grad_clip);
    pass.sgd.step();
    return loss.item();
  }

  // One SGD step on p_i with the gradient of CE(o_g + o_p, y), read off the model with the summed head.
  // The state and the gradient go through host copies: the model may be a device replica.
  void personal_step(LocalPass& pass, PersonalHead& head, const Tensor& x, const LabelTensor& y) const {
    Model& model = pass.model;
    std::vector<float> state = model.state_values();
    const int64_t P = model.num_parameters();
    const std::vector<float> generic = gather_head(model, state);
    const std::vector<float> buffers(state.begin() + P, state.end());
    std::vector<int64_t> counters;
    for (const auto& [name, value] : model.counters()) counters.push_back(*value);
    std::vector<float> combined = generic;
    for (size_t i = 0; i < combined.size(); ++i) combined[i] += head.weights[i];
    scatter_head(model, combined, state);
    model.load_state_values(state);
    model.set_trainable(/*head=*/false, false);
    model.zero_grad();
    Tensor loss = cross_entropy(model.forward(x), y);
    loss.backward();
    std::vector<float> grad = gather_head(model, model.gradient_tensor().to_vector());
    clip_norm(grad, pass.grad_clip);
    const SgdOptions& o = pass.sgd.options();
    if (head.velocity.empty() && o.momentum > 0.0f) head.velocity.assign(grad.size(), 0.0f);
    const SgdStepOptions step{o.lr, o.momentum, o.weight_decay, o.nesterov, head.first_step};
    sgd_step_cpu(head.weights.data(), head.velocity.empty() ? nullptr : head.velocity.data(), grad.data(),
                 static_cast<int64_t>(grad.size()), step);
    head.first_step = false;
    model.set_trainable(/*head=*/false, true);
    scatter_head(model, generic, state);
    std::copy(buffers.begin(), buffers.end(), state.begin() + P);
    model.load_state_values(state);
    size_t k = 0;
    for (const auto& [name, value] : model.counters()) *value = counters[k++];
  }
};
}  // namespace

const std::vector<ParamSpec>& fedrod_client_params() {
  static const std::vector<ParamSpec> specs = with_schedule_params({
      {"personal_init",
       ParamType::Text,
       std::string("received"),
       "personal head at a client's first round: received (a copy of the global head it receives; FedCAP/PFLlib's "
       "copy of the initial head when that round is round 1) | zero",
       -kInf,
       kInf,
       {"received", "zero"}},
  });
  return specs;
}

std::unique_ptr<ClientRule> make_fedrod_client(const Params& params) { return std::make_unique<FedRodClient>(params); }

}  // namespace bastion
