// Recorded ReLU and dropout. Kernels: kernels/cpu/activation.cpp.
#include "autograd/ops.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/elementwise.h"

namespace bastion {

Tensor relu(const Tensor& x) {
  require_cpu(x, "relu");
  Tensor out = Tensor::empty(x.shape());
  relu_forward_cpu(out.data(), x.data(), x.numel());
  // Save the output's storage, not the output tensor: holding the tensor itself would make the node
  // own a handle to its own output (a reference cycle through grad_fn).
  const Tensor saved = out.detach();
  return record(out, "relu", {x}, [saved](const Tensor& g, const Node&) {
    Tensor dx = Tensor::empty(g.shape());
    relu_backward_cpu(dx.data(), g.data(), saved.data(), g.numel());
    return std::vector<Tensor>{dx};
  });
}

Tensor dropout(const Tensor& x, float p, bool training, Generator& gen) {
  BASTION_CHECK(p >= 0.0f && p < 1.0f, "dropout: probability ", p, " must be in [0, 1)");
  if (!training || p == 0.0f) return x;
  require_cpu(x, "dropout");
  Tensor mask = Tensor::uniform(x.shape(), gen, 0.0f, 1.0f);
  dropout_mask_cpu(mask.data(), mask.data(), p, mask.numel());
  Tensor out = Tensor::empty(x.shape());
  mul_cpu(out.data(), x.data(), mask.data(), x.numel());
  return record(out, "dropout", {x}, [mask](const Tensor& g, const Node&) {
    Tensor dx = Tensor::empty(g.shape());
    dropout_backward_cpu(dx.data(), g.data(), mask.data(), g.numel());
    return std::vector<Tensor>{dx};
  });
}

}  // namespace bastion
