// ReLU and dropout on the GPU: the contract of kernels/cpu/activation.h on device pointers plus a
// stream. dropout_mask_cuda turns uniform [0, 1) draws (made on the host by the op's Generator and
// copied over, so CPU and CUDA runs drop the same units) into the inverted-dropout mask.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda.h"

namespace bastion {

void relu_forward_cuda(float* out, const float* in, int64_t n, CudaStream stream);
void relu_backward_cuda(float* grad_in, const float* grad_out, const float* out, int64_t n, CudaStream stream);
void dropout_mask_cuda(float* mask, const float* uniform01, float p, int64_t n, CudaStream stream);
void dropout_backward_cuda(float* grad_in, const float* grad_out, const float* mask, int64_t n, CudaStream stream);

}  // namespace bastion
