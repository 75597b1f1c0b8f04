// Stubs of kernels/cuda/elementwise.h for the CPU-only build: every entry point throws "built without CUDA".
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/stubs/stubs.h"

namespace bastion {

void add_cuda(float*, const float*, const float*, int64_t, CudaStream) { cuda_unavailable(); }
void sub_cuda(float*, const float*, const float*, int64_t, CudaStream) { cuda_unavailable(); }
void mul_cuda(float*, const float*, const float*, int64_t, CudaStream) { cuda_unavailable(); }
void scale_cuda(float*, const float*, float, int64_t, CudaStream) { cuda_unavailable(); }
void add_inplace_cuda(float*, const float*, int64_t, CudaStream) { cuda_unavailable(); }
void sum_cuda(float*, const float*, int64_t, CudaStream) { cuda_unavailable(); }
void add_row_bias_cuda(float*, const float*, int64_t, int64_t, CudaStream) { cuda_unavailable(); }
void sum_rows_cuda(float*, const float*, int64_t, int64_t, CudaStream) { cuda_unavailable(); }
void scale_by_device_scalar_cuda(float*, const float*, const float*, float, int64_t, CudaStream) {
  cuda_unavailable();
}

}  // namespace bastion
