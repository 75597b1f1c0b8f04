// Pooling on the GPU: the contract of kernels/cpu/pool.h (ASSIGNS, first maximum wins, padding as -inf
// for max and as zeros for avg) on device pointers plus a stream. One thread per output element in the
// forward; the backward computes each input element as a gather over the windows that contain it, so
// no atomics are needed and results are deterministic.
#pragma once

#include <cstdint>

#include "kernels/cpu/pool.h"
#include "kernels/cuda/cuda.h"

namespace bastion {

void max_pool2d_forward_cuda(float* out, const float* in, const Pool2dGeometry& g, CudaStream stream);
void max_pool2d_backward_cuda(float* grad_in, const float* grad_out, const float* in, const Pool2dGeometry& g,
                              CudaStream stream);
void avg_pool2d_forward_cuda(float* out, const float* in, const Pool2dGeometry& g, CudaStream stream);
void avg_pool2d_backward_cuda(float* grad_in, const float* grad_out, const Pool2dGeometry& g, CudaStream stream);
void global_avg_pool_forward_cuda(float* out, const float* in, int64_t planes, int64_t plane_size, CudaStream stream);
void global_avg_pool_backward_cuda(float* grad_in, const float* grad_out, int64_t planes, int64_t plane_size,
                                   CudaStream stream);

}  // namespace bastion
