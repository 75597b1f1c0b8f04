// Batch norm on the GPU: the contract of kernels/cpu/batchnorm.h on device pointers plus a stream.
// One block per channel; the block's statistics and backward sums are accumulated in double in a fixed
// order (per-thread strided partial sums, then a tree), so results are deterministic run to run.
#pragma once

#include <cstdint>

#include "kernels/cpu/batchnorm.h"
#include "kernels/cuda/cuda.h"

namespace bastion {

void batch_norm_forward_cuda(float* y, float* save_mean, float* save_invstd, const float* x, const float* gamma,
                             const float* beta, float* running_mean, float* running_var, const BatchNormGeometry& g,
                             bool training, float momentum, float eps, CudaStream stream);
void batch_norm_backward_cuda(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                              const float* gamma, const float* save_mean, const float* save_invstd,
                              const BatchNormGeometry& g, bool training, CudaStream stream);

}  // namespace bastion
