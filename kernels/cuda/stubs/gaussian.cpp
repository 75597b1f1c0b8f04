// Stubs of kernels/cuda/gaussian.h for the build without CUDA (see runtime.cpp beside this file).
#include "kernels/cuda/gaussian.h"

#include "kernels/cuda/stubs/stubs.h"

namespace bastion {

void gaussian_sample_forward_cuda(float*, const float*, const float*, int64_t, int64_t, int64_t, float, CudaStream) {
  cuda_unavailable();
}
void gaussian_sample_backward_cuda(float*, const float*, const float*, const float*, int64_t, int64_t, int64_t, float,
                                   CudaStream) {
  cuda_unavailable();
}
void gaussian_kl_forward_cuda(float*, const float*, const float*, const float*, int64_t, int64_t, float, CudaStream) {
  cuda_unavailable();
}
void gaussian_kl_backward_cuda(float*, const float*, const float*, const float*, const float*, int64_t, int64_t, float,
                               CudaStream) {
  cuda_unavailable();
}
void sample_mean_forward_cuda(float*, const float*, int64_t, int64_t, int64_t, CudaStream) { cuda_unavailable(); }
void sample_mean_backward_cuda(float*, const float*, int64_t, int64_t, int64_t, CudaStream) { cuda_unavailable(); }

}  // namespace bastion
