// Stubs of kernels/cuda/conv.h for the build without CUDA: each throws "built without CUDA".
#include "kernels/cuda/conv.h"

#include "kernels/cuda/stubs/stubs.h"

namespace bastion {

int64_t conv2d_cuda_chunk_samples(const Conv2dGeometry&, int64_t) { cuda_unavailable(); }
int64_t conv2d_cuda_workspace_floats(const Conv2dGeometry&, int64_t) { cuda_unavailable(); }
void conv2d_forward_cuda(float*, const float*, const float*, const float*, const Conv2dGeometry&, float*, CudaStream,
                         int64_t) {
  cuda_unavailable();
}
void conv2d_backward_cuda(float*, float*, float*, const float*, const float*, const float*, const Conv2dGeometry&,
                          float*, CudaStream, int64_t) {
  cuda_unavailable();
}
void im2col_cuda(float*, const float*, const Conv2dGeometry&, int64_t, int64_t, CudaStream) { cuda_unavailable(); }
void col2im_add_cuda(float*, const float*, const Conv2dGeometry&, int64_t, int64_t, CudaStream) { cuda_unavailable(); }
void conv2d_forward_implicit_gemm_cuda(float*, const float*, const float*, const float*, const Conv2dGeometry&,
                                       CudaStream, ConvTile) {
  cuda_unavailable();
}
int conv2d_forward_cuda_variant_count() { cuda_unavailable(); }
const char* conv2d_forward_cuda_variant_name(int) { cuda_unavailable(); }
void conv2d_forward_cuda_variant(int, float*, const float*, const float*, const float*, const Conv2dGeometry&, float*,
                                 CudaStream) {
  cuda_unavailable();
}

}  // namespace bastion
