// Sam::step on a CUDA model (nn/optim.h): the device's perturbation, FedSMOO's duals kept on the device for
// a pass, and the per-tensor norms reduced there. The CPU step is in optim.cpp.
#include <functional>
#include <vector>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/vector.h"
#include "nn/device_doubles.h"
#include "nn/optim.h"
#include "tensor/error.h"

namespace bastion {

// The squared norm of each trainable tensor's direction into tensor_squared_ (0 for the others): one
// double per tensor reduced on the device in a fixed order, read back in one copy.
void Sam::squared_norms_on_device(const float* grad) {
  const std::vector<ParameterView>& parameters = model_.parameters();
  tensor_squared_.assign(parameters.size(), 0.0);
  if (options_.perturbation == SamOptions::Perturbation::None) return;
  DeviceDoubles sums(static_cast<int64_t>(parameters.size()));
  for (size_t k = 0; k < parameters.size(); ++k) {
    const ParameterView& p = parameters[k];
    if (!p.value.requires_grad()) continue;
    vector_dot_cuda(sums.data() + k, grad + p.begin, grad + p.begin, p.end - p.begin, cuda_stream());
  }
  sums.copy_to_host(tensor_squared_);
  for (size_t k = 0; k < parameters.size(); ++k)
    if (!parameters[k].value.requires_grad()) tensor_squared_[k] = 0.0;  // unwritten device slots
}

// FedSMOO's step 2 on a CUDA model, in the CPU's order of roundings (perturb above): d = (g - mu) - s on
// the trainable tensors, e_k = scale_k d_k (0 on frozen ones), mu += e - s over all P, w += e; mu stays on
// the device until finish_pass() copies it into options_.dual. w is saved by the caller.
void Sam::perturb_with_dual_on_device(float* w, const float* grad) {
  const int64_t P = model_.num_parameters();
  const size_t bytes = static_cast<size_t>(P) * sizeof(float);
  if (!dual_on_device_.defined()) {
    dual_on_device_ = Tensor::empty({P}, Device::CUDA);
    cuda_copy_to_device(dual_on_device_.data(), options_.dual.data(), bytes, cuda_stream());
    correction_on_device_ = Tensor::empty({P}, Device::CUDA);
    if (options_.dual_correction.empty())
      cuda_fill(correction_on_device_.data(), 0.0f, P, cuda_stream());
    else
      cuda_copy_to_device(correction_on_device_.data(), options_.dual_correction.data(), bytes, cuda_stream());
    direction_on_device_ = Tensor::empty({P}, Device::CUDA);
    perturbation_on_device_ = Tensor::empty({P}, Device::CUDA);
    scratch_on_device_ = Tensor::empty({P}, Device::CUDA);
  }
  float *mu = dual_on_device_.data(), *d = direction_on_device_.data(), *e = perturbation_on_device_.data();
  const float* correction = correction_on_device_.data();
  cuda_copy_on_device(d, grad, bytes, cuda_stream());
  vector_axpy_cuda(d, -1.0f, mu, P, cuda_stream());  // y + (-1) x is y - x, exactly as the CPU subtracts
  vector_axpy_cuda(d, -1.0f, correction, P, cuda_stream());
  squared_norms_on_device(d);
  const std::vector<double>& scales = scales_from_squared_norms();
  cuda_fill(e, 0.0f, P, cuda_stream());
  for (size_t k = 0; k < model_.parameters().size(); ++k) {
    const ParameterView& p = model_.parameters()[k];
    if (!p.value.requires_grad()) continue;
    cuda_copy_on_device(e + p.begin, d + p.begin, static_cast<size_t>(p.end - p.begin) * sizeof(float), cuda_stream());
    vector_scale_cuda(e + p.begin, static_cast<float>(scales[k]), p.end - p.begin, cuda_stream());
  }
  float* e_minus_s = scratch_on_device_.data();
  cuda_copy_on_device(e_minus_s, e, bytes, cuda_stream());
  vector_axpy_cuda(e_minus_s, -1.0f, correction, P, cuda_stream());
  vector_axpy_cuda(mu, 1.0f, e_minus_s, P, cuda_stream());
  vector_axpy_cuda(w, 1.0f, e, P, cuda_stream());
}

void Sam::finish_pass() {
  if (!dual_on_device_.defined()) return;  // a CPU model updates options_.dual in place
  cuda_copy_to_host(options_.dual.data(), dual_on_device_.data(),
                    static_cast<size_t>(dual_on_device_.numel()) * sizeof(float), cuda_stream());
}

// Sam::step on a CUDA model: w saved by a device copy, w += scale_k g_k per trainable tensor (one fused
// multiply-add where the CPU rounds e first: the two agree within a rounding; with FedSMOO's duals the
// CPU's order, perturb_with_dual_on_device), second pass, w restored, g' = alpha g' + linear term,
// clipped, the base step.
float Sam::step_on_device(const std::function<float()>& loss_and_backward) {
  BASTION_CHECK(options_.perturbation != SamOptions::Perturbation::Adaptive,
                "sam on a CUDA model: the adaptive perturbation runs on the CPU only");
  const int64_t P = model_.num_parameters();
  if (!options_.linear_term.empty() && !linear_on_device_.defined())
    linear_on_device_ = Tensor::from_vector({P}, options_.linear_term).to(Device::CUDA);
  if (!saved_on_device_.defined()) saved_on_device_ = Tensor::empty({P}, Device::CUDA);
  const float loss = loss_and_backward();
  clip_gradient_norm(model_, options_.clip_before);
  float* w = model_.state_tensor().data();
  float* g = model_.gradient_tensor().data();
  cuda_copy_on_device(saved_on_device_.data(), w, static_cast<size_t>(P) * sizeof(float), cuda_stream());
  const std::vector<ParameterView>& parameters = model_.parameters();
  if (!options_.dual.empty()) {
    perturb_with_dual_on_device(w, g);
  } else {
    squared_norms_on_device(g);
    const std::vector<double>& scales = scales_from_squared_norms();
    for (size_t k = 0; k < parameters.size(); ++k) {
      const ParameterView& p = parameters[k];
      if (p.value.requires_grad())
        vector_axpy_cuda(w + p.begin, static_cast<float>(scales[k]), g + p.begin, p.end - p.begin, cuda_stream());
    }
  }
  loss_and_backward();
  cuda_copy_on_device(w, saved_on_device_.data(), static_cast<size_t>(P) * sizeof(float), cuda_stream());
  if (options_.ascent_scale != 1.0f) vector_scale_cuda(g, options_.ascent_scale, P, cuda_stream());
  if (linear_on_device_.defined())
    for (const ParameterView& p : parameters)
      if (p.value.requires_grad())
        vector_axpy_cuda(g + p.begin, 1.0f, linear_on_device_.data() + p.begin, p.end - p.begin, cuda_stream());
  clip_gradient_norm(model_, options_.clip_after);
  base_.step();
  return loss;
}

}  // namespace bastion
