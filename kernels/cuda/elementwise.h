// Elementwise ops and reductions on the GPU: the contract of kernels/cpu/elementwise.h on device
// pointers plus a stream. Vectorised (float4) grid-stride loops where the pointers allow it.
// sum_cuda writes the sum to the device scalar `out` (accumulated in double by one block in a fixed
// order: deterministic, and no host synchronisation).
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda.h"

namespace bastion {

void add_cuda(float* out, const float* a, const float* b, int64_t n, CudaStream stream);
void sub_cuda(float* out, const float* a, const float* b, int64_t n, CudaStream stream);
void mul_cuda(float* out, const float* a, const float* b, int64_t n, CudaStream stream);
void scale_cuda(float* out, const float* in, float alpha, int64_t n, CudaStream stream);
void add_inplace_cuda(float* dst, const float* src, int64_t n, CudaStream stream);
void sum_cuda(float* out, const float* in, int64_t n, CudaStream stream);
void add_row_bias_cuda(float* out, const float* bias, int64_t rows, int64_t cols, CudaStream stream);
void sum_rows_cuda(float* grad_bias, const float* grad, int64_t rows, int64_t cols, CudaStream stream);
// out = alpha * in, alpha read from the device scalar (the backward of scale by a loss gradient).
void scale_by_device_scalar_cuda(float* out, const float* in, const float* alpha, float factor, int64_t n,
                                 CudaStream stream);  // out = factor * (*alpha) * in

}  // namespace bastion
