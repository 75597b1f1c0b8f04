#include "nn/optim.h"

#include <cmath>

#include "autograd/ops.h"
#include "kernels/cpu/optim.h"
#include "kernels/cpu/vector.h"
#include "kernels/cuda/optim.h"

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

void Sgd::step() {
  const Device device = model_.device();
  if (velocity_.defined() && velocity_.device() != device) velocity_ = velocity_.to(device);
  const SgdStepOptions step{options_.lr, options_.momentum, options_.weight_decay, options_.nesterov, first_step_};
  float* w = model_.state_tensor().data();
  const float* grad = model_.gradient_tensor().data();
  float* v = data_or_null(velocity_);
  for_each_trainable_range(model_, [&](int64_t begin, int64_t end) {
    float* range_v = v ? v + begin : nullptr;
    switch (device) {
      case Device::CPU: sgd_step_cpu(w + begin, range_v, grad + begin, end - begin, step); break;
      case Device::CUDA: sgd_step_cuda(w + begin, range_v, grad + begin, end - begin, step, cuda_stream()); break;
    }
  });
  first_step_ = false;
}

Sam::Sam(Model& model, Sgd& base, float rho) : Sam(model, base, std::vector<SamGroup>{}) {
  SamGroup all;
  all.rho = rho;
  for (size_t i = 0; i < model.parameters().size(); ++i) all.parameters.push_back(i);
  groups_ = {all};
}

Sam::Sam(Model& model, Sgd& base, std::vector<SamGroup> groups)
    : model_(model), base_(base), groups_(std::move(groups)), perturbation_(model.num_parameters(), 0.0f) {
  for (const SamGroup& g : groups_) {
    BASTION_CHECK(g.rho >= 0.0f, "sam: radius ", g.rho, " must be >= 0");
    for (size_t index : g.parameters)
      BASTION_CHECK(index < model.parameters().size(), "sam: parameter index ", index, " out of range");
  }
}

float Sam::step(const std::function<float()>& loss_and_backward) {
  const float loss = loss_and_backward();
  float* w = model_.flat_parameters().data();
  const float* grad = model_.flat_gradients().data();
  std::fill(perturbation_.begin(), perturbation_.end(), 0.0f);
  for (const SamGroup& group : groups_) {
    double squared = 0.0;
    for (size_t index : group.parameters) {
      const ParameterView& p = model_.parameters()[index];
      for (int64_t i = p.begin; i < p.end; ++i) squared += static_cast<double>(grad[i]) * grad[i];
    }
    // The 1e-12 keeps a zero gradient from dividing by zero (no perturbation then).
    const float scale = static_cast<float>(group.rho / (std::sqrt(squared) + 1e-12));
    for (size_t index : group.parameters) {
      const ParameterView& p = model_.parameters()[index];
      for (int64_t i = p.begin; i < p.end; ++i) perturbation_[i] = scale * grad[i];
    }
  }
  // Restore w from a copy rather than subtracting e: (w + e) - e is not w in float arithmetic.
  saved_weights_.assign(w, w + perturbation_.size());
  for (size_t i = 0; i < perturbation_.size(); ++i) w[i] += perturbation_[i];
  loss_and_backward();
  std::copy(saved_weights_.begin(), saved_weights_.end(), w);
  base_.step();
  return loss;
}

float StepDecay::lr_at(int64_t epoch) const {
  if (step_size <= 0) return lr0;
  return lr0 * std::pow(gamma, static_cast<float>(epoch / step_size));
}

void clip_gradient_norm(Model& model, double max_norm) {
  if (max_norm <= 0.0) return;
  const std::span<float> grad = model.flat_gradients();
  const int64_t D = static_cast<int64_t>(grad.size());
  const double norm = vector_norm_cpu(grad.data(), D);
  if (norm > max_norm) vector_scale_cpu(grad.data(), static_cast<float>(max_norm / norm), D);
}

}  // namespace bastion
