// sgd_step: one SGD step over a flat parameter range of D floats (PyTorch's torch.optim.SGD, one group):
//   g = grad + weight_decay * w
//   momentum > 0: v = first_step ? g : momentum * v + g;  g = nesterov ? g + momentum * v : v
//   w -= lr * g
// ASSIGNS w and velocity (velocity may be null when momentum == 0). nn/optim.cpp's Sgd calls it once
// per contiguous range of trainable parameters.
#pragma once

#include <cstdint>

namespace bastion {

struct SgdStepOptions {
  float lr = 0.01f, momentum = 0.0f, weight_decay = 0.0f;
  bool nesterov = false;
  bool first_step = false;  // the velocity starts as the first gradient (PyTorch's buffer init)
};

void sgd_step_cpu(float* w, float* velocity, const float* grad, int64_t D, const SgdStepOptions& options);

}  // namespace bastion
