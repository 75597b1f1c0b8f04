// The balanced-softmax cross-entropy on the GPU: the contract of kernels/cpu/balanced_softmax.h on device
// pointers plus a stream, with the softmax family's difference (kernels/cuda/softmax.h): the forward
// writes the loss to the device scalar `loss` instead of returning it, and the backward reads the upstream
// gradient from the device scalar `grad`. y (N) int32 and log_prior (C) float live on the device.
// The backward is cross-entropy's on the balanced probabilities (cross_entropy_backward_cuda).
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda.h"

namespace bastion {

void balanced_softmax_forward_cuda(float* loss, float* probs, const float* x, const int32_t* y, const float* log_prior,
                                   int64_t N, int64_t C, CudaStream stream);
void balanced_softmax_backward_cuda(float* dx, const float* probs, const int32_t* y, const float* grad, int64_t N,
                                    int64_t C, CudaStream stream);

}  // namespace bastion
