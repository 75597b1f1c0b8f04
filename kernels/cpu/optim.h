// sgd_step: one SGD step over a flat parameter range of D floats (PyTorch's torch.optim.SGD, one group):
//   g = grad + weight_decay * w
//   momentum > 0: v = first_step ? g : momentum * v + g;  g = nesterov ? g + momentum * v : v
//   w -= lr * g
// ASSIGNS w and velocity (velocity may be null when momentum == 0). nn/optim.cpp's Sgd calls it once
// per contiguous range of trainable parameters.
// sgd_step_from_cpu: the same step taken from the weights `start` instead of w (w and the weight decay
// read start; w = start - lr * g). SAM's step ends at the weights it saved before its perturbation: this
// restores them and steps in one pass instead of a copy pass and an update pass (issue 38). start must
// not overlap w; the result is bit for bit the copy followed by sgd_step_cpu (one arithmetic, one template).
#pragma once

#include <cstdint>

namespace bastion {

struct SgdStepOptions {
  float lr = 0.01f, momentum = 0.0f, weight_decay = 0.0f;
  bool nesterov = false;
  bool first_step = false;  // the velocity starts as the first gradient (PyTorch's buffer init)
};

void sgd_step_cpu(float* w, float* velocity, const float* grad, int64_t D, const SgdStepOptions& options);
void sgd_step_from_cpu(float* w, const float* start, float* velocity, const float* grad, int64_t D,
                       const SgdStepOptions& options);

}  // namespace bastion
