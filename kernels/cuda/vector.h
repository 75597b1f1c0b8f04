// Flat-vector ops on the GPU: the contract of kernels/cpu/vector.h on device pointers plus a stream.
// The reductions write a double to the device scalar `out` (one block, fixed order: deterministic);
// pairwise distances use gemm_cuda (FP32) on centred rows as on the CPU.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda.h"

namespace bastion {

void vector_axpy_cuda(float* y, float a, const float* x, int64_t D, CudaStream stream);
void vector_scale_cuda(float* x, float a, int64_t D, CudaStream stream);
void vector_dot_cuda(double* out, const float* a, const float* b, int64_t D, CudaStream stream);
void vector_norm_cuda(double* out, const float* x, int64_t D, CudaStream stream);
void vector_cosine_cuda(double* out, const float* a, const float* b, int64_t D, CudaStream stream);
void vector_squared_distance_cuda(double* out, const float* a, const float* b, int64_t D, CudaStream stream);
// workspace: vector_pairwise_workspace_floats(n, D) floats (kernels/cpu/vector.h).
void vector_pairwise_squared_distances_cuda(float* out, float* workspace, const float* X, int64_t n, int64_t D,
                                            CudaStream stream);
void vector_mean_rows_cuda(float* out, const float* X, int64_t n, int64_t D, CudaStream stream);

}  // namespace bastion
