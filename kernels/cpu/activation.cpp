#include "kernels/cpu/activation.h"

namespace bastion {

void relu_forward_cpu(float* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void relu_backward_cpu(float* grad_in, const float* grad_out, const float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) grad_in[i] = out[i] > 0.0f ? grad_out[i] : 0.0f;
}

void dropout_mask_cpu(float* mask, const float* uniform01, float p, int64_t n) {
  const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  for (int64_t i = 0; i < n; ++i) mask[i] = uniform01[i] >= p ? keep_scale : 0.0f;
}

void dropout_backward_cpu(float* grad_in, const float* grad_out, const float* mask, int64_t n) {
  for (int64_t i = 0; i < n; ++i) grad_in[i] = grad_out[i] * mask[i];
}

}  // namespace bastion
