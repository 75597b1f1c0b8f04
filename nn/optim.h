// Optimizers over a Model's flat buffers (one pass over the trainable ranges, no per-tensor dispatch).
//
// SGD, PyTorch's torch.optim.SGD semantics (dampening 0):
//   g = grad + weight_decay * w
//   v = momentum * v + g                      (v starts at g on the first step)
//   step = nesterov ? g + momentum * v : v
//   w -= lr * step
// Frozen parameters (requires_grad false, see Model::set_trainable) are skipped entirely.
//
// The update itself is sgd_step_cpu / sgd_step_cuda (kernels/*/optim), one call per contiguous range
// of trainable parameters, on the model's device.
//
// SAM (Foret et al. 2021), two passes per step, with one radius per parameter group so FedFSA can
// perturb chosen layers more:
//   1. gradient g at w (the caller's first forward/backward);
//   2. for each group G with radius rho_G: e_G = rho_G * g_G / ||g_G||;  w <- w + e;
//   3. gradient at w + e (second forward/backward); restore w; base SGD step with that gradient.
//
// StepDecay: lr(epoch) = lr0 * gamma^(floor(epoch / step_size)).
#pragma once

#include <functional>
#include <vector>

#include "nn/model.h"

namespace bastion {

struct SgdOptions {
  float lr = 0.01f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};

class Sgd {
 public:
  Sgd(Model& model, SgdOptions options);
  void step();
  void set_lr(float lr) { options_.lr = lr; }
  float lr() const { return options_.lr; }
  const SgdOptions& options() const { return options_; }
  std::span<float> momentum_buffer();  // for checkpoints; empty without momentum; CPU models only
  void reset_momentum();
  // Restores a momentum buffer saved from momentum_buffer() (FL clients that keep momentum across
  // rounds); the next step continues with v = momentum * v + g.
  void load_momentum(std::span<const float> velocity);

 private:
  Model& model_;
  SgdOptions options_;
  Tensor velocity_;  // (D) on the model's device; undefined without momentum
  bool first_step_ = true;
};

// A SAM perturbation group: parameter indices into model.parameters() and their radius.
struct SamGroup {
  std::vector<size_t> parameters;
  float rho = 0.05f;
};

// SAM runs on CPU models only (its perturbation loops read the flat buffers on the host).
class Sam {
 public:
  // Default: one group with every parameter and radius `rho`.
  Sam(Model& model, Sgd& base, float rho);
  Sam(Model& model, Sgd& base, std::vector<SamGroup> groups);
  // `loss_and_backward` must zero the gradients, run forward + backward and return the loss.
  // Returns the loss at the unperturbed weights.
  float step(const std::function<float()>& loss_and_backward);

 private:
  Model& model_;
  Sgd& base_;
  std::vector<SamGroup> groups_;
  std::vector<float> perturbation_, saved_weights_;
};

// Rescales the whole gradient buffer to global L2 norm max_norm when it is larger (norm in double);
// max_norm <= 0 does nothing. PyTorch: torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm).
void clip_gradient_norm(Model& model, double max_norm);

struct StepDecay {
  float lr0 = 0.01f;
  int64_t step_size = 0;  // 0 = constant learning rate
  float gamma = 1.0f;
  float lr_at(int64_t epoch) const;
};

}  // namespace bastion
