// Recorded batch norm. Math: kernels/cpu/batchnorm.h. Running statistics are updated in place
// (they are buffers of the model's flat buffer), outside autograd.
#include "autograd/ops.h"
#include "kernels/cpu/batchnorm.h"

namespace bastion {

Tensor batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                  const Tensor& running_var, bool training, float momentum, float eps) {
  BASTION_CHECK(x.rank() == 2 || x.rank() == 4, "batch_norm: input must be (N, C) or (N, C, H, W), got ", x.shape());
  require_cpu(x, "batch_norm");
  const int64_t C = x.size(1);
  for (const Tensor* t : {&gamma, &beta, &running_mean, &running_var})
    BASTION_CHECK(t->defined() && t->rank() == 1 && t->size(0) == C, "batch_norm: per-channel tensors must have shape (",
                  C, ",) for input ", x.shape());
  BASTION_CHECK(!training || x.size(0) * (x.rank() == 4 ? x.size(2) * x.size(3) : 1) > 1,
                "batch_norm: training needs more than one value per channel, got input ", x.shape());
  const BatchNormGeometry g{x.size(0), C, x.rank() == 4 ? x.size(2) * x.size(3) : 1};
  Tensor y = Tensor::empty(x.shape()), save_mean = Tensor::empty({C}), save_invstd = Tensor::empty({C});
  batch_norm_forward_cpu(y.data(), save_mean.data(), save_invstd.data(), x.data(), gamma.data(), beta.data(),
                         running_mean.data(), running_var.data(), g, training, momentum, eps);
  return record(y, "batch_norm", {x, gamma, beta},
                [x, gamma, save_mean, save_invstd, g, training](const Tensor& dy, const Node& node) {
                  Tensor dx = node.needs_grad[0] ? Tensor::empty(x.shape()) : Tensor();
                  Tensor dgamma = node.needs_grad[1] ? Tensor::empty(gamma.shape()) : Tensor();
                  Tensor dbeta = node.needs_grad[2] ? Tensor::empty(gamma.shape()) : Tensor();
                  batch_norm_backward_cpu(dx.defined() ? dx.data() : nullptr,
                                          dgamma.defined() ? dgamma.data() : nullptr,
                                          dbeta.defined() ? dbeta.data() : nullptr, dy.data(), x.data(),
                                          gamma.data(), save_mean.data(), save_invstd.data(), g, training);
                  return std::vector<Tensor>{dx, dgamma, dbeta};
                });
}

}  // namespace bastion
