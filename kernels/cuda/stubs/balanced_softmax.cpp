// Stubs of kernels/cuda/balanced_softmax.h for the build without CUDA (see runtime.cpp beside this file).
#include "kernels/cuda/balanced_softmax.h"

#include "kernels/cuda/stubs/stubs.h"

namespace bastion {

void balanced_softmax_forward_cuda(float*, float*, const float*, const int32_t*, const float*, int64_t, int64_t,
                                   CudaStream) {
  cuda_unavailable();
}
void balanced_softmax_backward_cuda(float*, const float*, const int32_t*, const float*, int64_t, int64_t, CudaStream) {
  cuda_unavailable();
}

}  // namespace bastion
