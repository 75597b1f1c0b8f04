// Stubs of kernels/cuda/pool.h for the build without CUDA: each throws "built without CUDA".
#include "kernels/cuda/pool.h"

#include "kernels/cuda/stubs/stubs.h"

namespace bastion {

void max_pool2d_forward_cuda(float*, const float*, const Pool2dGeometry&, CudaStream) { cuda_unavailable(); }
void max_pool2d_backward_cuda(float*, const float*, const float*, const Pool2dGeometry&, CudaStream) {
  cuda_unavailable();
}
void avg_pool2d_forward_cuda(float*, const float*, const Pool2dGeometry&, CudaStream) { cuda_unavailable(); }
void avg_pool2d_backward_cuda(float*, const float*, const Pool2dGeometry&, CudaStream) { cuda_unavailable(); }
void global_avg_pool_forward_cuda(float*, const float*, int64_t, int64_t, CudaStream) { cuda_unavailable(); }
void global_avg_pool_backward_cuda(float*, const float*, int64_t, int64_t, CudaStream) { cuda_unavailable(); }

}  // namespace bastion
