#include "nn/optim.h"

#include <algorithm>
#include <cmath>

#include "autograd/ops.h"
#include "kernels/cpu/optim.h"
#include "kernels/cpu/sam.h"
#include "kernels/cpu/vector.h"
#include "kernels/cuda/optim.h"
#include "kernels/cuda/vector.h"
#include "nn/device_doubles.h"

namespace bastion {

Sgd::Sgd(Model& model, SgdOptions options) : model_(model), options_(options) {
  BASTION_CHECK(options.lr >= 0.0f, "sgd: learning rate ", options.lr, " must be >= 0");
  BASTION_CHECK(options.momentum >= 0.0f && options.momentum < 1.0f, "sgd: momentum ", options.momentum,
                " must be in [0, 1)");
  BASTION_CHECK(options.weight_decay >= 0.0f, "sgd: weight decay ", options.weight_decay, " must be >= 0");
  BASTION_CHECK(!options.nesterov || options.momentum > 0.0f, "sgd: nesterov needs momentum > 0");
  if (options.momentum > 0.0f) velocity_ = Tensor::zeros({model.num_parameters()}, model.device());
}

std::span<float> Sgd::momentum_buffer() {
  if (!velocity_.defined()) return {};
  BASTION_CHECK(velocity_.device() == Device::CPU, "sgd: the momentum buffer is on ", device_name(velocity_.device()));
  return velocity_.span();
}

std::vector<float> Sgd::momentum_values() const {
  return velocity_.defined() ? velocity_.to_vector() : std::vector<float>{};
}

void Sgd::reset_momentum() {
  if (velocity_.defined()) velocity_.fill(0.0f);
  first_step_ = true;
}

void Sgd::load_momentum(std::span<const float> velocity) {
  const size_t expected = velocity_.defined() ? static_cast<size_t>(velocity_.numel()) : 0;
  BASTION_CHECK(velocity.size() == expected, "sgd: momentum buffer of ", velocity.size(), " floats for ", expected,
                " (momentum ", options_.momentum, ")");
  if (expected > 0) velocity_.copy_from(Tensor::from_vector({velocity_.numel()}, velocity));
  first_step_ = false;
}

namespace {
// Calls `update(begin, end)` for each maximal run of consecutive trainable parameters.
template <typename Update>
void for_each_trainable_range(const Model& model, Update update) {
  int64_t begin = -1, end = -1;
  for (const ParameterView& p : model.parameters()) {
    if (!p.value.requires_grad()) continue;
    if (p.begin != end) {
      if (begin >= 0) update(begin, end);
      begin = p.begin;
    }
    end = p.end;
  }
  if (begin >= 0) update(begin, end);
}
}  // namespace

void Sgd::step() { update(nullptr); }

void Sgd::step_from(std::span<const float> start) {
  BASTION_CHECK(model_.device() == Device::CPU, "sgd: step_from on a ", device_name(model_.device()), " model");
  BASTION_CHECK(static_cast<int64_t>(start.size()) == model_.num_parameters(), "sgd: step_from with ", start.size(),
                " weights for ", model_.num_parameters(), " parameters");
  update(start.data());
}

// One SGD update per contiguous trainable range, from the current weights (start null) or from `start`
// (CPU only: step_from checks it).
void Sgd::update(const float* start) {
  const Device device = model_.device();
  if (velocity_.defined() && velocity_.device() != device) velocity_ = velocity_.to(device);
  const SgdStepOptions step{options_.lr, options_.momentum, options_.weight_decay, options_.nesterov, first_step_};
  float* w = model_.state_tensor().data();
  const float* grad = model_.gradient_tensor().data();
  float* v = data_or_null(velocity_);
  for_each_trainable_range(model_, [&](int64_t begin, int64_t end) {
    float* range_v = v ? v + begin : nullptr;
    switch (device) {
      case Device::CPU:
        if (start)
          sgd_step_from_cpu(w + begin, start + begin, range_v, grad + begin, end - begin, step);
        else
          sgd_step_cpu(w + begin, range_v, grad + begin, end - begin, step);
        break;
      case Device::CUDA:
        sgd_step_cuda(w + begin, range_v, grad + begin, end - begin, step, cuda_stream());
        break;
    }
  });
  first_step_ = false;
}

namespace {
SamOptions plain_sam(float rho) {
  SamOptions options;
  options.rho = rho;
  return options;
}
}  // namespace

Sam::Sam(Model& model, Sgd& base, float rho) : Sam(model, base, plain_sam(rho)) {}

Sam::Sam(Model& model, Sgd& base, SamOptions options)
    : model_(model), base_(base), options_(std::move(options)), perturbation_(model.num_parameters(), 0.0f) {
  const size_t P = perturbation_.size();
  BASTION_CHECK(options_.rho >= 0.0f, "sam: radius ", options_.rho, " must be >= 0");
  BASTION_CHECK(options_.tensor_rho.empty() || options_.tensor_rho.size() == model.parameters().size(),
                "sam: ", options_.tensor_rho.size(), " tensor radii for ", model.parameters().size(),
                " parameter tensors");
  for (float rho : options_.tensor_rho) BASTION_CHECK(rho >= 0.0f, "sam: tensor radius ", rho, " must be >= 0");
  BASTION_CHECK(options_.linear_term.empty() || options_.linear_term.size() == P, "sam: linear term of ",
                options_.linear_term.size(), " values for ", P, " parameters");
  BASTION_CHECK(options_.dual.empty() || options_.dual.size() == P, "sam: dual of ", options_.dual.size(),
                " values for ", P, " parameters");
  BASTION_CHECK(options_.dual_correction.empty() || options_.dual_correction.size() == P, "sam: dual correction of ",
                options_.dual_correction.size(), " values for ", P, " parameters");
  BASTION_CHECK(options_.dual_correction.empty() || !options_.dual.empty(), "sam: a dual correction needs a dual");
}

namespace {
// The clip's rule, wherever the norm came from: g *= max_norm / norm when norm > max_norm > 0. Returns
// whether it rescaled.
bool scale_to_max_norm(float* grad, int64_t D, double norm, double max_norm) {
  if (max_norm <= 0.0 || !(norm > max_norm)) return false;  // a NaN norm leaves g as it is, as before
  vector_scale_cpu(grad, static_cast<float>(max_norm / norm), D);
  return true;
}
}  // namespace

// Step 2: e from d = g - dual - correction over the trainable tensors (SamOptions::Perturbation); w += e.
// rho_k / (the norm the perturbation divides by) per tensor (SamOptions::Perturbation); 0 for frozen ones.
// The 1e-12 keeps a zero gradient from dividing by zero (no perturbation then); the FL codes use 1e-7,
// which differs only for gradients of norm below ~1e-5.
const std::vector<double>& Sam::perturbation_scales(const float* w, const float* direction) {
  if (norms_measured_) return scales_from_squared_norms();  // measured by clip_before_measuring
  const std::vector<ParameterView>& parameters = model_.parameters();
  const SamOptions::Perturbation mode = options_.perturbation;
  std::vector<double>& squared = tensor_squared_;
  squared.assign(parameters.size(), 0.0);
  if (mode == SamOptions::Perturbation::Adaptive) scaled_direction_.resize(perturbation_.size());
  for (size_t k = 0; k < parameters.size(); ++k) {
    const ParameterView& p = parameters[k];
    if (!p.value.requires_grad() || mode == SamOptions::Perturbation::None) continue;
    const int64_t n = p.end - p.begin;
    const float* d = direction + p.begin;
    if (mode == SamOptions::Perturbation::Adaptive) {  // the norm of |w| d
      float* t = scaled_direction_.data() + p.begin;
      for (int64_t i = 0; i < n; ++i) t[i] = std::abs(w[p.begin + i]) * d[i];
      d = t;
    }
    squared[k] = vector_squared_norm_cpu(d, n);
  }
  return scales_from_squared_norms();
}

const std::vector<double>& Sam::scales_from_squared_norms() {
  const std::vector<ParameterView>& parameters = model_.parameters();
  const SamOptions::Perturbation mode = options_.perturbation;
  const std::vector<double>& squared = tensor_squared_;
  double total = 0.0;  // in model order
  for (double s : squared) total += s;
  std::vector<double>& scales = tensor_scales_;
  scales.assign(parameters.size(), 0.0);
  for (size_t k = 0; k < parameters.size(); ++k) {
    if (!parameters[k].value.requires_grad()) continue;
    const double rho = options_.tensor_rho.empty() ? options_.rho : options_.tensor_rho[k];
    switch (mode) {
      case SamOptions::Perturbation::None:
        scales[k] = rho;
        break;
      case SamOptions::Perturbation::PerTensor:
        scales[k] = rho / (std::sqrt(squared[k]) + 1e-12);
        break;
      default:
        scales[k] = rho / (std::sqrt(total) + 1e-12);
        break;
    }
  }
  return scales;
}

// Returns whether it zeroed the gradient (the last read of g, when e goes straight into `out`).
bool Sam::perturb(float* w, float* out, float* grad) {
  const float* mu = options_.dual.empty() ? nullptr : options_.dual.data();
  const float* s = options_.dual_correction.empty() ? nullptr : options_.dual_correction.data();
  // The direction d = g - mu - s on the trainable tensors, 0 on the frozen ones. Without FedSMOO's mu and
  // s it is g itself: its norm is read from the gradient and e written in one pass.
  const std::vector<ParameterView>& parameters = model_.parameters();
  const float* direction = grad;
  if (mu || s) {
    for (const ParameterView& p : parameters) {
      float* e = perturbation_.data() + p.begin;
      const int64_t n = p.end - p.begin;
      if (!p.value.requires_grad()) continue;
      std::copy_n(grad + p.begin, n, e);
      if (mu)
        for (int64_t i = 0; i < n; ++i) e[i] -= mu[p.begin + i];
      if (s)
        for (int64_t i = 0; i < n; ++i) e[i] -= s[p.begin + i];
    }
    direction = perturbation_.data();
  }
  const std::vector<double>& scales = perturbation_scales(w, direction);
  // w + e goes into `out` when given (w untouched), else w is saved and perturbed in place: Sam::step then
  // restores it from the copy rather than subtracting e, as (w + e) - e is not w in float arithmetic.
  // Frozen tensors are neither perturbed nor saved (e = 0 there; `out` is only given when none is frozen).
  // e itself is stored only where something reads it: FedSMOO's dual update below, the adaptive
  // perturbation (computed there first) and last_perturbation().
  const bool adaptive = options_.perturbation == SamOptions::Perturbation::Adaptive;
  const bool keep_e = mu || adaptive || options_.record_perturbation;
  if (!out) saved_weights_.resize(perturbation_.size());
  const bool zeroes_grad = out && direction == grad && !keep_e;
  for (size_t k = 0; k < parameters.size(); ++k) {
    const ParameterView& p = parameters[k];
    float* e = keep_e ? perturbation_.data() + p.begin : nullptr;
    const int64_t n = p.end - p.begin;
    if (!p.value.requires_grad()) {
      if (e) std::fill_n(e, n, 0.0f);
      continue;
    }
    float scale = static_cast<float>(scales[k]);
    const float* d = direction + p.begin;
    float* wk = w + p.begin;
    if (adaptive) {
      for (int64_t i = 0; i < n; ++i) e[i] = scale * (wk[i] * wk[i] * d[i]);
      d = e, scale = 1.0f;  // 1 * e is e exactly
    }
    if (zeroes_grad)
      sam_perturb_into_zeroing_cpu(out + p.begin, wk, grad + p.begin, scale, n);
    else if (out)
      sam_perturb_into_cpu(out + p.begin, wk, e, d, scale, n);
    else
      sam_perturb_cpu(wk, saved_weights_.data() + p.begin, e, d, scale, n);
  }
  const int64_t P = static_cast<int64_t>(perturbation_.size());
  if (mu)
    for (int64_t i = 0; i < P; ++i) options_.dual[i] += perturbation_[i] - (s ? s[i] : 0.0f);
  return zeroes_grad;
}

std::span<const float> Sam::last_perturbation() const {
  BASTION_CHECK(options_.record_perturbation || !options_.dual.empty(),
                "sam: last_perturbation needs SamOptions::record_perturbation (e is not kept otherwise)");
  return perturbation_;
}

// Step 1 after the first pass: g clipped to clip_before. Where the perturbation's norms are those of g
// itself (no FedSMOO dual or correction, not Adaptive), the per-tensor squared norms come from the clip's
// own pass over g (vector_squared_norm_parts_cpu: the same numbers as separate passes, bit for bit) and
// perturbation_scales reuses them; when the clip rescales g they are measured again on the rescaled g.
void Sam::clip_before_measuring(float* grad) {
  using Mode = SamOptions::Perturbation;
  const bool norms_of_grad = options_.dual.empty() && options_.dual_correction.empty() &&
                             (options_.perturbation == Mode::Global || options_.perturbation == Mode::PerTensor);
  norms_measured_ = false;
  if (!norms_of_grad) return clip_gradient_norm(model_, options_.clip_before);
  const std::vector<ParameterView>& parameters = model_.parameters();
  if (tensor_offsets_.empty()) {
    for (const ParameterView& p : parameters) tensor_offsets_.push_back(p.begin);
    tensor_offsets_.push_back(parameters.empty() ? 0 : parameters.back().end);
  }
  tensor_squared_.resize(parameters.size());
  const int64_t parts = static_cast<int64_t>(parameters.size());
  const double norm =
      std::sqrt(vector_squared_norm_parts_cpu(tensor_squared_.data(), grad, tensor_offsets_.data(), parts));
  if (scale_to_max_norm(grad, tensor_offsets_.back(), norm, options_.clip_before)) return;
  for (size_t k = 0; k < parameters.size(); ++k)
    if (!parameters[k].value.requires_grad()) tensor_squared_[k] = 0.0;
  norms_measured_ = true;
}

// Step 3 after the second pass: g' = alpha g' + linear term, clipped. The clip's norm is summed while the
// direction is written (sam_direction_norm_cpu), in the lanes of clip_gradient_norm: the same number.
void Sam::finish_direction(float* grad) const {
  const float alpha = options_.ascent_scale;
  const float* linear = options_.linear_term.empty() ? nullptr : options_.linear_term.data();
  const double max_norm = options_.clip_after;
  double lanes[kNormLanes] = {};
  for (const ParameterView& p : model_.parameters()) {
    const bool add = linear && p.value.requires_grad();  // the linear term is 0 on frozen tensors
    float* g = grad + p.begin;
    const int64_t n = p.end - p.begin;
    if (max_norm <= 0.0) {
      if (add || alpha != 1.0f) sam_direction_cpu(g, add ? linear + p.begin : nullptr, alpha, n);
    } else if (add || alpha != 1.0f) {
      sam_direction_norm_cpu(g, add ? linear + p.begin : nullptr, alpha, n, lanes, p.begin);
    } else {
      vector_squared_norm_lanes_cpu(lanes, nullptr, g, n, p.begin);
    }
  }
  if (max_norm <= 0.0) return;
  scale_to_max_norm(grad, model_.num_parameters(), std::sqrt(vector_reduce_norm_lanes(lanes)), max_norm);
}

namespace {
// Swaps the model onto `spare` for the ascent pass, and back at its end, also when the pass throws. The
// note that the gradients are zero (Model::note_gradients_zeroed) lasts as long.
class AscentState {
 public:
  AscentState(Model& model, Tensor& spare, bool gradients_zeroed) : model_(model), spare_(spare) {
    model_.swap_state(spare_);
    if (gradients_zeroed) model_.note_gradients_zeroed();
  }
  ~AscentState() {
    model_.forget_gradients_zeroed();
    model_.swap_state(spare_);
  }
  AscentState(const AscentState&) = delete;
  AscentState& operator=(const AscentState&) = delete;

 private:
  Model& model_;
  Tensor& spare_;
};
}  // namespace

// The ascent pass. With every tensor trainable, w + e is written into a spare state buffer and the model
// computes there (Model::swap_state), so the weights need no copy and the SGD step runs in place: the save
// was a memcpy of 4 % of a FedFSA round (perf, issue 38). The buffers (BatchNorm's running statistics) go
// to the spare before the pass and come back after it, as the pass updates them. With a frozen tensor,
// whose values the spare would have to copy at every step, w is saved and perturbed in place instead, and
// the SGD step restores it from the copy. Both give the same weights bit for bit.
// The perturbation zeroes g as it reads it for the last time, so the ascent pass's zero_grad writes
// nothing (a fill of P floats less a step).
float Sam::step(const std::function<float()>& loss_and_backward) {
  if (model_.device() == Device::CUDA) return step_on_device(loss_and_backward);
  const float loss = loss_and_backward();
  float* grad = model_.flat_gradients().data();
  clip_before_measuring(grad);
  float* w = model_.flat_parameters().data();
  if (!model_.all_trainable()) {
    perturb(w, nullptr, grad);
    loss_and_backward();
    finish_direction(grad);
    base_.step_from(saved_weights_);  // w restored bit for bit and stepped in one pass
    return loss;
  }
  const Tensor& state = model_.state_tensor();
  if (!spare_state_.defined() || spare_state_.numel() != state.numel()) spare_state_ = Tensor::empty({state.numel()});
  const int64_t P = model_.num_parameters(), S = state.numel();
  const bool gradients_zeroed = perturb(w, spare_state_.data(), grad);
  std::copy(state.data() + P, state.data() + S, spare_state_.data() + P);
  {
    const AscentState at_w_plus_e(model_, spare_state_, gradients_zeroed);
    loss_and_backward();
  }
  std::copy(spare_state_.data() + P, spare_state_.data() + S, model_.state_tensor().data() + P);
  finish_direction(grad);
  base_.step();
  return loss;
}

float StepDecay::lr_at(int64_t epoch) const {
  if (step_size <= 0) return lr0;
  return lr0 * std::pow(gamma, static_cast<float>(epoch / step_size));
}

namespace {
// Clips the trainable tensors' gradients. A frozen tensor's gradient is zero (Model::zero_grad): its
// squares add nothing to the norm and scaling leaves it zero. So each run of trainable tensors is summed
// into the lanes of its offset in the whole vector (vector_squared_norm_lanes_cpu), which is
// vector_norm_cpu's number to the bit (one run, [0, D), when every tensor is trainable), and only those
// runs are scaled. Head tuning then reads the head's few KiB a step instead of the whole model's 5 MB (the
// norm was 8 % of FedFSA Table 1's final FedAvg-FT round on a Zen 3, in perf).
void clip_trainable_gradients_cpu(const Model& model, float* grad, double max_norm) {
  double lanes[kNormLanes] = {};
  for_each_trainable_range(model, [&](int64_t begin, int64_t end) {
    vector_squared_norm_lanes_cpu(lanes, nullptr, grad + begin, end - begin, begin);
  });
  const double norm = std::sqrt(vector_reduce_norm_lanes(lanes));
  for_each_trainable_range(
      model, [&](int64_t begin, int64_t end) { scale_to_max_norm(grad + begin, end - begin, norm, max_norm); });
}
}  // namespace

void clip_gradient_norm(Model& model, double max_norm) {
  if (max_norm <= 0.0) return;
  const Tensor& grad = model.gradient_tensor();
  const int64_t D = grad.numel();
  switch (model.device()) {
    case Device::CPU:
      clip_trainable_gradients_cpu(model, grad.data(), max_norm);
      break;
    case Device::CUDA: {
      DeviceDoubles norm(1);
      vector_norm_cuda(norm.data(), grad.data(), D, cuda_stream());
      std::vector<double> value;
      norm.copy_to_host(value);
      if (value[0] > max_norm)
        vector_scale_cuda(grad.data(), static_cast<float>(max_norm / value[0]), D, cuda_stream());
      break;
    }
  }
}

}  // namespace bastion
