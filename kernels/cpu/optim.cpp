// sgd_step_cpu (contract: kernels/cpu/optim.h).
#include "kernels/cpu/optim.h"

namespace bastion {

void sgd_step_cpu(float* w, float* velocity, const float* grad, int64_t D, const SgdStepOptions& options) {
  const float lr = options.lr, mu = options.momentum, wd = options.weight_decay;
  for (int64_t i = 0; i < D; ++i) {
    float g = grad[i] + wd * w[i];
    if (mu > 0.0f) {
      float& v = velocity[i];
      v = options.first_step ? g : mu * v + g;
      g = options.nesterov ? g + mu * v : v;
    }
    w[i] -= lr * g;
  }
}

}  // namespace bastion
