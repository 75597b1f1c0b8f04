// Stubs of kernels/cuda/activation.h for the build without CUDA (see runtime.cpp beside this file).
#include "kernels/cuda/activation.h"

#include "kernels/cuda/stubs/stubs.h"

namespace bastion {

void relu_forward_cuda(float*, const float*, int64_t, CudaStream) { cuda_unavailable(); }
void relu_backward_cuda(float*, const float*, const float*, int64_t, CudaStream) { cuda_unavailable(); }
void dropout_mask_cuda(float*, const float*, float, int64_t, CudaStream) { cuda_unavailable(); }
void dropout_backward_cuda(float*, const float*, const float*, int64_t, CudaStream) { cuda_unavailable(); }

}  // namespace bastion
