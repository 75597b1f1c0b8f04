// sgd: FedAvg's client (McMahan et al. 2017). Starting from the round's global model, run plain SGD
// (PyTorch semantics, nn/optim.h) over the client's local data:
//   for E epochs (or exactly K steps when steps > 0, cycling through epochs):
//     for each batch (x, y) of the shuffled local data:  w <- w - lr_t * step(grad CE(f_w(x), y))
//   lr_t = lr * lr_decay^floor((round - 1) / lr_decay_every)     (BapFL: 0.99 every 10 rounds)
// Momentum starts from zero every round unless keep_momentum, which stores the buffer in the client's
// state (a client that is not sampled keeps its old buffer). grad_clip > 0 rescales the gradient to that
// global L2 norm before each step (BapFL's clip 10).
// rho > 0 turns each step into a SAM step (Foret et al. 2021, nn/optim.h: gradient at w + rho g/|g|,
// then the SGD update at w): FedSAM's client, and the `sam` client step of the round benchmark.
// Attacks: a malicious client's Data/Training attack configures the loader; a Training attack replaces
// the step (fl/attacks/attack.h).
// Cost: E * |D_k| forward/backward passes.
#include <cmath>
#include <memory>
#include <limits>

#include "autograd/ops.h"
#include "data/loader.h"
#include "fl/attacks/attack.h"
#include "fl/clients/client_rule.h"
#include "nn/optim.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

class SgdClient final : public ClientRule {
 public:
  explicit SgdClient(const Params& p)
      : epochs_(p.integer("epochs")), steps_(p.integer("steps")), batch_(p.integer("batch")),
        options_{static_cast<float>(p.real("lr")), static_cast<float>(p.real("momentum")),
                 static_cast<float>(p.real("weight_decay")), p.boolean("nesterov")},
        lr_decay_(p.real("lr_decay")), lr_decay_every_(p.integer("lr_decay_every")),
        keep_momentum_(p.boolean("keep_momentum")), grad_clip_(p.real("grad_clip")), drop_last_(p.boolean("drop_last")),
        rho_(static_cast<float>(p.real("rho"))) {
    BASTION_CHECK(epochs_ > 0 || steps_ > 0, "clients.sgd: set epochs or steps to at least 1");
    BASTION_CHECK(!options_.nesterov || options_.momentum > 0.0f, "clients.sgd.nesterov needs momentum > 0");
  }

  ClientResult train(ClientTask& task) const override {
    BatchLoader loader(task.data, batch_, /*shuffle=*/true, task.seed, task.indices, drop_last_);
    if (!is_identity_transform(task.transform)) loader.set_transform(task.transform);
    Generator attack_rng = Generator(task.seed).fork(kAttackStream);
    if (task.attack) {
      DataAttackContext context{task.data,         task.indices,  task.attacker_index,
                                task.client,       task.round,    attack_rng.fork(0),
                                Generator(task.client_seed), &task.transform};
      task.attack->poison_loader(loader, context);
    }
    SgdOptions options = options_;
    options.lr = static_cast<float>(options_.lr * std::pow(lr_decay_, (task.round - 1) / lr_decay_every_));
    Sgd sgd(task.model, options);
    restore_momentum(task, sgd);
    task.model.reseed_dropout(Generator(task.seed).fork(kDropoutStream).next_u64());
    task.model.train(true);
    std::unique_ptr<Sam> sam = rho_ > 0.0f ? std::make_unique<Sam>(task.model, sgd, rho_) : nullptr;
    ClientResult result = run_steps(task, loader, sgd, sam.get(), attack_rng);
    if (keep_momentum_ && options_.momentum > 0.0f) {
      const std::span<const float> v = sgd.momentum_buffer();
      task.state.vectors["momentum"].assign(v.begin(), v.end());
    }
    return result;
  }

 private:
  static constexpr uint64_t kAttackStream = 0x61747461636bULL, kDropoutStream = 0x64726f70ULL;
  int64_t epochs_, steps_, batch_;
  SgdOptions options_;
  double lr_decay_;
  int64_t lr_decay_every_;
  bool keep_momentum_;
  double grad_clip_;
  bool drop_last_;
  float rho_;

  void restore_momentum(ClientTask& task, Sgd& sgd) const {
    if (!keep_momentum_ || options_.momentum <= 0.0f) return;
    const auto found = task.state.vectors.find("momentum");
    if (found != task.state.vectors.end()) sgd.load_momentum(found->second);
  }

  ClientResult run_steps(ClientTask& task, BatchLoader& loader, Sgd& sgd, Sam* sam, Generator& attack_rng) const {
    ClientResult result;
    double loss_sum = 0.0;
    const int64_t total_steps = steps_ > 0 ? steps_ : std::numeric_limits<int64_t>::max();
    Tensor x;
    LabelTensor y;
    for (int64_t epoch = 0; result.steps < total_steps && (steps_ > 0 || epoch < epochs_); ++epoch) {
      loader.start_epoch(epoch);
      int64_t batches = 0;
      while (result.steps < total_steps && loader.next(x, y)) {
        loss_sum += one_step(task, sgd, sam, x, y, attack_rng);
        result.samples += x.size(0);
        ++result.steps;
        ++batches;
      }
      BASTION_CHECK(batches > 0, "clients.sgd: client ", task.client, " has no batch (", task.indices.size(),
                    " samples, batch ", batch_, ", drop_last ", drop_last_, ")");
    }
    result.train_loss = result.steps > 0 ? loss_sum / result.steps : 0.0;
    return result;
  }

  double one_step(ClientTask& task, Sgd& sgd, Sam* sam, const Tensor& x, const LabelTensor& y,
                  Generator& attack_rng) const {
    if (task.attack && task.attack->kind() == AttackKind::Training) {
      TrainingStepContext context{task.model, sgd, x, y, attack_rng};
      return task.attack->training_step(context);
    }
    auto loss_and_backward = [&]() {
      task.model.zero_grad();
      Tensor loss = cross_entropy(task.model.forward(x), y);
      loss.backward();
      clip_gradient_norm(task.model, grad_clip_);
      return loss.item();
    };
    if (sam) return sam->step(loss_and_backward);
    const float loss = loss_and_backward();
    sgd.step();
    return loss;
  }
};
}  // namespace

const std::vector<ParamSpec>& sgd_client_params() {
  static const std::vector<ParamSpec> specs = {
      {"epochs", ParamType::Integer, int64_t{2}, "local epochs per round (ignored when steps > 0)", 0, 1e6},
      {"steps", ParamType::Integer, int64_t{0}, "exactly this many local steps per round instead of epochs (0 = use epochs)", 0, 1e9},
      {"batch", ParamType::Integer, int64_t{64}, "batch size", 1, 1e6},
      {"lr", ParamType::Real, 0.01, "learning rate", 0, 100},
      {"momentum", ParamType::Real, 0.9, "SGD momentum (PyTorch semantics)", 0, 0.999999},
      {"weight_decay", ParamType::Real, 0.0, "L2 weight decay", 0, 1},
      {"nesterov", ParamType::Boolean, false, "Nesterov momentum"},
      {"lr_decay", ParamType::Real, 1.0, "multiply lr by this every lr_decay_every rounds", 1e-6, 1},
      {"lr_decay_every", ParamType::Integer, int64_t{1}, "rounds between lr decays", 1, 1e6},
      {"keep_momentum", ParamType::Boolean, false, "keep the momentum buffer across rounds (client state)"},
      {"grad_clip", ParamType::Real, 0.0, "clip the gradient's global L2 norm to this (0 = off)", 0, kInf},
      {"drop_last", ParamType::Boolean, false, "drop the last partial batch of each epoch"},
      {"rho", ParamType::Real, 0.0, "SAM radius: > 0 makes every step a SAM step (FedSAM's client); 0 = plain SGD", 0, 10},
  };
  return specs;
}

std::unique_ptr<ClientRule> make_sgd_client(const Params& params) { return std::make_unique<SgdClient>(params); }

}  // namespace bastion
