// Stubs of kernels/cuda/batchnorm.h for the build without CUDA (see runtime.cpp beside this file).
#include "kernels/cuda/batchnorm.h"

#include "kernels/cuda/stubs/stubs.h"

namespace bastion {

int64_t batch_norm_slices(const BatchNormGeometry&) { cuda_unavailable(); }
void batch_norm_forward_cuda(float*, float*, float*, const float*, const float*, const float*, float*, float*,
                             const BatchNormGeometry&, bool, float, float, CudaStream) {
  cuda_unavailable();
}
void batch_norm_backward_cuda(float*, float*, float*, const float*, const float*, const float*, const float*,
                              const float*, const BatchNormGeometry&, bool, CudaStream) {
  cuda_unavailable();
}

}  // namespace bastion
