// Recorded ReLU and dropout. Kernels: kernels/cpu/activation.cpp, kernels/cuda/activation.cu.
#include "autograd/ops.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/elementwise.h"

namespace bastion {

Tensor relu(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), x.device());
  switch (x.device()) {
    case Device::CPU:
      relu_forward_cpu(out.data(), x.data(), x.numel());
      break;
    case Device::CUDA:
      relu_forward_cuda(out.data(), x.data(), x.numel(), cuda_stream());
      break;
  }
  // Save the output's storage, not the output tensor: holding the tensor itself would make the node
  // own a handle to its own output (a reference cycle through grad_fn).
  const Tensor saved = out.detach();
  return record(out, "relu", {x}, [saved](const Tensor& g, const Node&) {
    Tensor dx = Tensor::empty(g.shape(), g.device());
    switch (g.device()) {
      case Device::CPU:
        relu_backward_cpu(dx.data(), g.data(), saved.data(), g.numel());
        break;
      case Device::CUDA:
        relu_backward_cuda(dx.data(), g.data(), saved.data(), g.numel(), cuda_stream());
        break;
    }
    return std::vector<Tensor>{dx};
  });
}

Tensor dropout(const Tensor& x, float p, bool training, Generator& gen) {
  BASTION_CHECK(p >= 0.0f && p < 1.0f, "dropout: probability ", p, " must be in [0, 1)");
  if (!training || p == 0.0f) return x;
  // The uniform draws come from the host generator on either device, so a CUDA run drops the same
  // units as a CPU run with the same seed.
  Tensor mask = Tensor::uniform(x.shape(), gen, 0.0f, 1.0f).to(x.device());
  Tensor out = Tensor::empty(x.shape(), x.device());
  switch (x.device()) {
    case Device::CPU:
      dropout_mask_cpu(mask.data(), mask.data(), p, mask.numel());
      mul_cpu(out.data(), x.data(), mask.data(), x.numel());
      break;
    case Device::CUDA:
      dropout_mask_cuda(mask.data(), mask.data(), p, mask.numel(), cuda_stream());
      mul_cuda(out.data(), x.data(), mask.data(), x.numel(), cuda_stream());
      break;
  }
  return record(out, "dropout", {x}, [mask](const Tensor& g, const Node&) {
    Tensor dx = Tensor::empty(g.shape(), g.device());
    switch (g.device()) {
      case Device::CPU:
        dropout_backward_cpu(dx.data(), g.data(), mask.data(), g.numel());
        break;
      case Device::CUDA:
        dropout_backward_cuda(dx.data(), g.data(), mask.data(), g.numel(), cuda_stream());
        break;
    }
    return std::vector<Tensor>{dx};
  });
}

}  // namespace bastion
