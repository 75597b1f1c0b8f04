// Recorded batch norm. Math: kernels/cpu/batchnorm.h (CUDA twin: kernels/cuda/batchnorm.h). Running
// statistics are updated in place (they are buffers of the model's flat buffer), outside autograd.
#include "autograd/ops.h"
#include "kernels/cpu/batchnorm.h"
#include "kernels/cuda/batchnorm.h"

namespace bastion {

namespace {
BatchNormGeometry checked_geometry(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                                   const Tensor& running_var, bool training) {
  BASTION_CHECK(x.rank() == 2 || x.rank() == 4, "batch_norm: input must be (N, C) or (N, C, H, W), got ", x.shape());
  const int64_t C = x.size(1);
  for (const Tensor* t : {&gamma, &beta, &running_mean, &running_var}) {
    BASTION_CHECK(t->defined() && t->rank() == 1 && t->size(0) == C,
                  "batch_norm: per-channel tensors must have shape (", C, ",) for input ", x.shape());
    check_same_device(x, *t, "batch_norm");
  }
  BASTION_CHECK(!training || x.size(0) * (x.rank() == 4 ? x.size(2) * x.size(3) : 1) > 1,
                "batch_norm: training needs more than one value per channel, got input ", x.shape());
  return {x.size(0), C, x.rank() == 4 ? x.size(2) * x.size(3) : 1};
}
}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                  const Tensor& running_var, bool training, float momentum, float eps) {
  const BatchNormGeometry g = checked_geometry(x, gamma, beta, running_mean, running_var, training);
  const Device device = x.device();
  Tensor y = Tensor::empty(x.shape(), device), save_mean = Tensor::empty({g.C}, device),
         save_invstd = Tensor::empty({g.C}, device);
  switch (device) {
    case Device::CPU:
      batch_norm_forward_cpu(y.data(), save_mean.data(), save_invstd.data(), x.data(), gamma.data(), beta.data(),
                             running_mean.data(), running_var.data(), g, training, momentum, eps);
      break;
    case Device::CUDA:
      batch_norm_forward_cuda(y.data(), save_mean.data(), save_invstd.data(), x.data(), gamma.data(), beta.data(),
                              running_mean.data(), running_var.data(), g, training, momentum, eps, cuda_stream());
      break;
  }
  return record(
      y, "batch_norm", {x, gamma, beta},
      [x, gamma, save_mean, save_invstd, g, training, device](const Tensor& dy, const Node& node) {
        Tensor dx = node.needs_grad[0] ? Tensor::empty(x.shape(), device) : Tensor();
        Tensor dgamma = node.needs_grad[1] ? Tensor::empty(gamma.shape(), device) : Tensor();
        Tensor dbeta = node.needs_grad[2] ? Tensor::empty(gamma.shape(), device) : Tensor();
        switch (device) {
          case Device::CPU:
            batch_norm_backward_cpu(data_or_null(dx), data_or_null(dgamma), data_or_null(dbeta), dy.data(), x.data(),
                                    gamma.data(), save_mean.data(), save_invstd.data(), g, training);
            break;
          case Device::CUDA:
            batch_norm_backward_cuda(data_or_null(dx), data_or_null(dgamma), data_or_null(dbeta), dy.data(), x.data(),
                                     gamma.data(), save_mean.data(), save_invstd.data(), g, training, cuda_stream());
            break;
        }
        return std::vector<Tensor>{dx, dgamma, dbeta};
      });
}

}  // namespace bastion
