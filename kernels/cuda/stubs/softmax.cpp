// Stubs of kernels/cuda/softmax.h for the build without CUDA (see runtime.cpp beside this file).
#include "kernels/cuda/softmax.h"

#include "kernels/cuda/stubs/stubs.h"

namespace bastion {

void log_softmax_forward_cuda(float*, const float*, int64_t, int64_t, CudaStream) { cuda_unavailable(); }
void log_softmax_backward_cuda(float*, const float*, const float*, int64_t, int64_t, CudaStream) { cuda_unavailable(); }
void cross_entropy_forward_cuda(float*, float*, const float*, const int32_t*, int64_t, int64_t, CudaStream) {
  cuda_unavailable();
}
void cross_entropy_backward_cuda(float*, const float*, const int32_t*, const float*, int64_t, int64_t, CudaStream) {
  cuda_unavailable();
}
void kl_div_forward_cuda(float*, float*, float*, const float*, const float*, float, int64_t, int64_t, CudaStream) {
  cuda_unavailable();
}
void kl_div_backward_cuda(float*, float*, const float*, const float*, float, const float*, int64_t, int64_t,
                          CudaStream) {
  cuda_unavailable();
}

}  // namespace bastion
