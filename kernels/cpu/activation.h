// activation: ReLU and dropout over n contiguous floats.
// relu_forward:   out = max(in, 0)                                   PyTorch: F.relu
// relu_backward:  ASSIGNS grad_in = grad_out * (out > 0)             (uses the saved output, not input)
// dropout_forward: out = in * mask, mask[i] = 1/(1-p) with probability 1-p, else 0; the caller passes the
//   uniform draws so the kernel stays deterministic and RNG-free.   PyTorch: F.dropout (inverted dropout)
// dropout_backward: ASSIGNS grad_in = grad_out * mask
#pragma once

#include <cstdint>

namespace bastion {

void relu_forward_cpu(float* out, const float* in, int64_t n);
void relu_backward_cpu(float* grad_in, const float* grad_out, const float* out, int64_t n);

void dropout_mask_cpu(float* mask, const float* uniform01, float p, int64_t n);
void dropout_backward_cpu(float* grad_in, const float* grad_out, const float* mask, int64_t n);

}  // namespace bastion
