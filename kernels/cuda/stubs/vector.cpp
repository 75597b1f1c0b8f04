// Stubs of kernels/cuda/vector.h for the CPU-only build: every entry point throws "built without CUDA".
#include "kernels/cuda/stubs/stubs.h"
#include "kernels/cuda/vector.h"

namespace bastion {

void vector_axpy_cuda(float*, float, const float*, int64_t, CudaStream) { cuda_unavailable(); }
void vector_scale_cuda(float*, float, int64_t, CudaStream) { cuda_unavailable(); }
void vector_dot_cuda(double*, const float*, const float*, int64_t, CudaStream) { cuda_unavailable(); }
void vector_norm_cuda(double*, const float*, int64_t, CudaStream) { cuda_unavailable(); }
void vector_cosine_cuda(double*, const float*, const float*, int64_t, CudaStream) { cuda_unavailable(); }
void vector_squared_distance_cuda(double*, const float*, const float*, int64_t, CudaStream) { cuda_unavailable(); }
void vector_pairwise_squared_distances_cuda(float*, float*, const float*, int64_t, int64_t, CudaStream) {
  cuda_unavailable();
}
void vector_mean_rows_cuda(float*, const float*, int64_t, int64_t, CudaStream) { cuda_unavailable(); }

}  // namespace bastion
