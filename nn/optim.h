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
// SAM (Foret et al. 2021) and its FL variants (PFL-FACTS §§12-14, IMPLEMENTATION-FACTS §3.3) are ONE
// step whose options are the rules' differences (FedSAM, MoFedSAM, FedFSA, FedSpeed, FedSMOO, pFedSAM):
//   1. g = gradient at w (the caller's first forward/backward); clip ||g|| to clip_before;
//   2. d = g - dual - dual_correction (FedSMOO's mu_i and s; without them d = g);
//      e_k = rho_k d_k / (||d|| + 1e-12) per tensor k, ||d|| the global L2 norm over the trainable tensors,
//      rho_k = tensor_rho[k] (FedFSA's larger radius on chosen layers) or rho;
//      dual += e - dual_correction (FedSMOO);  w <- w + e;
//   3. g' = ascent_scale * gradient at w + e (MoFedSAM's alpha; same batch); w restored bit for bit;
//      g' += linear_term ((1 - alpha) m of MoFedSAM/FedFSA, lambda (h_i - w_g) of FedSpeed/FedSMOO);
//      clip ||g'|| to clip_after; base SGD step (whose weight decay comes after the clip, as in PyTorch).
// Only trainable tensors are perturbed and moved (pFedSAM's body phase leaves the frozen head alone).
// Cost: two forward/backward passes and about five passes over the P parameters per step (on the CPU the
// restore of w is the SGD step's read of the saved weights, Sgd::step_from).
// StepDecay: lr(epoch) = lr0 * gamma^(floor(epoch / step_size)).
#pragma once

#include <functional>
#include <span>
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
  // The step taken from `start` (P values; the trainable ranges are read) instead of the current weights:
  // w = start - lr * step(start), as if start were copied into w first (CPU models; Sam::step's restore).
  void step_from(std::span<const float> start);
  void set_lr(float lr) { options_.lr = lr; }
  float lr() const { return options_.lr; }
  const SgdOptions& options() const { return options_; }
  std::span<float> momentum_buffer();          // for checkpoints; empty without momentum; CPU models only
  std::vector<float> momentum_values() const;  // a host copy of the buffer from any device; empty without momentum
  void reset_momentum();
  // Restores a momentum buffer saved from momentum_buffer() (FL clients that keep momentum across
  // rounds); the next step continues with v = momentum * v + g.
  void load_momentum(std::span<const float> velocity);

 private:
  Model& model_;
  SgdOptions options_;
  Tensor velocity_;  // (D) on the model's device; undefined without momentum
  bool first_step_ = true;
  void update(const float* start);  // step() (start null) and step_from()
};

// The options of a SAM step (above). Spans are borrowed: the caller keeps them alive across steps.
struct SamOptions {
  // How the ascent direction d is turned into the perturbation e (rho_k: the tensor's radius):
  //   Global     e_k = rho_k d_k / ||d||                 (Foret et al. 2021; every rule's default)
  //   PerTensor  e_k = rho_k d_k / ||d_k||               (each tensor normalised on its own)
  //   None       e_k = rho_k d_k                          (no normalisation)
  //   Adaptive   e_k = rho_k w_k^2 d_k / || |w| d ||     (ASAM, Kwon et al. 2021; FSA.py's adaptive flag)
  // The last three are readings of a paper that states only rho (pFedSAM's radius ablation).
  enum class Perturbation { Global, PerTensor, None, Adaptive } perturbation = Perturbation::Global;
  float rho = 0.05f;
  std::vector<float> tensor_rho;               // one radius per model.parameters() entry; empty = rho for all
  double clip_before = 0.0, clip_after = 0.0;  // global L2 norms; 0 = no clipping
  float ascent_scale = 1.0f;                   // alpha
  std::span<const float> linear_term;          // P values added to the direction, or empty
  std::span<float> dual;                       // P values updated in place (FedSMOO's mu_i), or empty
  std::span<const float> dual_correction;      // P values (FedSMOO's s), or empty; needs dual
  bool record_perturbation = false;            // keep e for Sam::last_perturbation() (a vector written per step)
};

// SAM on a CUDA model runs the same step with the flat-vector kernels (kernels/cuda/vector.h), FedSMOO's
// duals included (kept on the device for the pass; finish_pass() copies them back into `dual`), except the
// adaptive perturbation, which is CPU-only and refused there.
class Sam {
 public:
  Sam(Model& model, Sgd& base, float rho);  // plain SAM: every trainable tensor, radius rho
  Sam(Model& model, Sgd& base, SamOptions options);
  // `loss_and_backward` must zero the gradients, run forward + backward and return the loss (it may add
  // terms to the gradient, such as Ditto's proximal gradient; it must not clip). Returns the loss at the
  // unperturbed weights. It must read the weights through the model when it runs (flat_parameters(), the
  // parameter views), not through a span taken before the step: on a CPU model with every tensor
  // trainable the ascent pass runs on a spare state buffer (Model::swap_state), and such a span still
  // shows w there.
  float step(const std::function<float()>& loss_and_backward);
  // After the pass: on a CUDA model, FedSMOO's dual (updated on the device by every step) is copied back
  // into SamOptions::dual; nothing to do otherwise. One copy a pass instead of a copy and a wait a step.
  void finish_pass();
  // The perturbation e of the last step (P values, 0 on frozen tensors); CPU models with
  // SamOptions::record_perturbation (or a dual, which keeps e anyway).
  std::span<const float> last_perturbation() const;

 private:
  Model& model_;
  Sgd& base_;
  SamOptions options_;
  std::vector<float> perturbation_, saved_weights_;
  Tensor spare_state_;  // CPU models with every tensor trainable: the state at w + e (Sam::step)
  // Buffers kept across steps, so a step allocates nothing: |w| d (Adaptive), per-tensor squared norms
  // and scales.
  std::vector<float> scaled_direction_;
  std::vector<double> tensor_squared_, tensor_scales_;
  std::vector<int64_t> tensor_offsets_;  // each parameter's begin, then P: vector_squared_norm_parts_cpu's offsets
  bool norms_measured_ = false;          // tensor_squared_ holds this step's norms of g (clip_before_measuring)
  Tensor saved_on_device_, linear_on_device_;  // CUDA models: the unperturbed weights, the linear term
  // CUDA models with FedSMOO's duals: mu and s (uploaded at the first step), the direction d, e, e - s.
  Tensor dual_on_device_, correction_on_device_, direction_on_device_, perturbation_on_device_, scratch_on_device_;
  const std::vector<double>& perturbation_scales(const float* w, const float* direction);
  const std::vector<double>& scales_from_squared_norms();  // tensor_squared_ -> tensor_scales_
  float step_on_device(const std::function<float()>& loss_and_backward);
  void squared_norms_on_device(const float* grad);
  void perturb_with_dual_on_device(float* w, const float* grad);
  void clip_before_measuring(float* grad);
  bool perturb(float* w, float* out, float* grad);
  void finish_direction(float* grad) const;
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
