// bapfl: BapFL (Ye et al. 2024; SPEC §5; IMPLEMENTATION-FACTS §6.3), a backdoor for partial-sharing
// pFL: only the shared body carries the backdoor, trained so that it works with heads it has not seen.
// Where: Training. poison_loader puts the trigger and target on the first k = per_batch rows of every
// batch; training_step then replaces the client's step. With B the batch rows and k = min(per_batch, B):
//   1. clean step (when B > k): CE on rows [k, B) — the head learns only clean data —, gradient
//      clipped to grad_clip (global L2 norm, 0 = off), optimizer step;
//   2. poison step with the head FROZEN: loss = ½ CE(poison rows | head + noise) + ½ CE(poison rows |
//      head), noise ~ N(0, noise_std²) (gaussian) or U[-noise_std/2, noise_std/2] (uniform) per head
//      coordinate from the step's rng; the two backward passes accumulate in the gradient buffer (the
//      noise is removed between them), then clip and step. Only the body moves.
// BapFL's optional PGD projection is not reproduced; its optional scaling is the scale attack.
// Returns the batch's mean per-sample loss: (CE_clean (B - k) + loss_poison k) / B.
// With the body frozen by the client rule (FedRep's head phase) only step 1 runs.
// backdoor_test: the trigger made for the test shape, and the target (BapFL measures ASR on test
// images not of the target class; the evaluator decides which images).
// Cost: three forward and three backward passes per step (one on B - k rows, two on k rows).
#include "fl/attacks/attack.h"

#include <algorithm>

#include "autograd/ops.h"
#include "fl/attacks/attack_support.h"
#include "kernels/cpu/vector.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

LabelTensor label_rows(const LabelTensor& y, int64_t begin, int64_t end) {
  return LabelTensor::from_vector(std::vector<int32_t>(y.data() + begin, y.data() + end));
}

class BapflAttack final : public Attack {
 public:
  explicit BapflAttack(const Params& params)
      : trigger_(params.text("trigger")), target_(static_cast<int32_t>(params.integer("target"))),
        per_batch_(params.integer("per_batch")), noise_std_(params.real("noise_std")),
        uniform_noise_(params.text("noise") == "uniform"), grad_clip_(params.real("grad_clip")) {
    check_trigger_name(trigger_, params.scope() + ".trigger");
  }
  AttackKind kind() const override { return AttackKind::Training; }

  void poison_loader(BatchLoader& loader, const DataAttackContext& context) const override {
    const Trigger trigger = make_trigger_for(trigger_, context.data, context.transform);
    PoisonSpec spec;
    spec.trigger = &trigger;
    spec.target = target_;
    spec.per_batch = per_batch_;
    loader.set_poison(spec);
  }

  float training_step(TrainingStepContext& context) const override {
    const int64_t B = context.x.size(0), k = std::min(per_batch_, B);
    // A phase that trains only the head (FedRep's head epochs, body frozen): the poison step has nothing
    // to move, so the head learns the clean rows alone, as BapFL wants of every head.
    if (!body_trainable(context.model)) return B > k ? static_cast<float>(clean_step(context, k, B)) : 0.0f;
    double loss_sum = 0.0;
    if (B > k) loss_sum += clean_step(context, k, B) * static_cast<double>(B - k);
    loss_sum += poison_step(context, k) * static_cast<double>(k);
    return static_cast<float>(loss_sum / static_cast<double>(B));
  }

  std::optional<BackdoorTest> backdoor_test(const Dataset& test, const TransformSpec& transform) const override {
    return make_backdoor_test(trigger_, target_, test, transform);
  }

 private:
  std::string trigger_;
  int32_t target_;
  int64_t per_batch_;
  double noise_std_;
  bool uniform_noise_;
  double grad_clip_;

  double clean_step(TrainingStepContext& context, int64_t begin, int64_t end) const {
    context.model.zero_grad();
    Tensor loss =
        cross_entropy(context.model.forward(context.x.slice_rows(begin, end)), label_rows(context.y, begin, end));
    loss.backward();
    clip_gradient_norm(context.model, grad_clip_);
    context.optimizer.step();
    return loss.item();
  }

  double poison_step(TrainingStepContext& context, int64_t k) const {
    Model& model = context.model;
    const bool head_was_trainable = head_trainable(model);
    model.set_trainable(/*head=*/true, false);
    model.zero_grad();
    const Tensor x = context.x.slice_rows(0, k);
    const LabelTensor y = label_rows(context.y, 0, k);
    const std::vector<float> saved_head = perturb_head(model, context.rng);
    Tensor noisy = cross_entropy(model.forward(x), y);
    scale(noisy, 0.5f).backward();
    restore_head(model, saved_head);
    Tensor clean = cross_entropy(model.forward(x), y);
    scale(clean, 0.5f).backward();
    clip_gradient_norm(model, grad_clip_);
    context.optimizer.step();
    model.set_trainable(/*head=*/true, head_was_trainable);
    return 0.5 * noisy.item() + 0.5 * clean.item();
  }

  // Adds the noise to every head coordinate; returns the head's values before it. The head goes through
  // host copies (the model may be a device replica, run.device = "cuda"): the noise is drawn and added
  // on the host in the same order and roundings on every device.
  std::vector<float> perturb_head(Model& model, Generator& rng) const {
    std::vector<float> saved;
    for (const ParameterView& p : model.parameters()) {
      if (!p.is_head) continue;
      std::vector<float> values = p.value.to_vector();
      saved.insert(saved.end(), values.begin(), values.end());
      for (float& value : values) {
        const double noise = uniform_noise_ ? (rng.uniform() - 0.5) * noise_std_ : rng.normal() * noise_std_;
        value = static_cast<float>(value + noise);
      }
      p.value.copy_from(Tensor::from_vector(p.value.shape(), values));
    }
    return saved;
  }

  static void restore_head(Model& model, const std::vector<float>& saved) {
    size_t next = 0;
    for (const ParameterView& p : model.parameters()) {
      if (!p.is_head) continue;
      const auto n = static_cast<size_t>(p.value.numel());
      p.value.copy_from(Tensor::from_vector(p.value.shape(), std::span<const float>(saved).subspan(next, n)));
      next += n;
    }
  }

  static bool body_trainable(const Model& model) {
    for (const ParameterView& p : model.parameters())
      if (!p.is_head && p.value.requires_grad()) return true;
    return false;
  }

  static bool head_trainable(const Model& model) {
    for (const ParameterView& p : model.parameters())
      if (p.is_head && !p.value.requires_grad()) return false;
    return true;
  }
};
}  // namespace

const std::vector<ParamSpec>& bapfl_params() {
  static const std::vector<ParamSpec> specs = {
      {"trigger", ParamType::Text, std::string("bapfl"), "trigger preset"},
      {"target", ParamType::Integer, int64_t{2}, "target label", 0, 1e6},
      {"per_batch", ParamType::Integer, int64_t{20},
       "poisoned samples at the start of every batch; the rest is the clean part", 1, 1e9},
      {"noise_std", ParamType::Real, 0.2, "sigma of the noise added to the head in the poison step", 0, 1e3},
      {"noise",
       ParamType::Text,
       std::string("gaussian"),
       "head noise distribution: gaussian N(0, sigma^2) or uniform [-sigma/2, sigma/2]",
       -kInf,
       kInf,
       {"gaussian", "uniform"}},
      {"grad_clip", ParamType::Real, 10.0, "clip the gradient norm of each step to this (0 = off)", 0, 1e9},
  };
  return specs;
}

std::unique_ptr<Attack> make_bapfl(const Params& params) { return std::make_unique<BapflAttack>(params); }

}  // namespace bastion
