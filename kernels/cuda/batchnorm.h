// Batch norm on the GPU: the contract of kernels/cpu/batchnorm.h on device pointers plus a stream.
// Each channel is cut into batch_norm_slices(g) slices of one block each; statistics and backward sums
// are accumulated in double in a fixed order (per-thread strided sums, a tree over the block, then the
// slices in order), so results are deterministic run to run and across GPUs.
#pragma once

#include <cstdint>

#include "kernels/cpu/batchnorm.h"
#include "kernels/cuda/cuda.h"

namespace bastion {

// Slices per channel: about 528 blocks in all, none of fewer than 1024 values, at least 1, at most 1024.
int64_t batch_norm_slices(const BatchNormGeometry& g);

void batch_norm_forward_cuda(float* y, float* save_mean, float* save_invstd, const float* x, const float* gamma,
                             const float* beta, float* running_mean, float* running_var, const BatchNormGeometry& g,
                             bool training, float momentum, float eps, CudaStream stream);
void batch_norm_backward_cuda(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                              const float* gamma, const float* save_mean, const float* save_invstd,
                              const BatchNormGeometry& g, bool training, CudaStream stream);

}  // namespace bastion
