// Device memory for CUDA tensors. CUDA_CHECK wraps every runtime call (STYLE.md §6).
// The caching allocator and the kernels proper belong to the CUDA backend issue.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda.h"
#include "tensor/error.h"

#define CUDA_CHECK(expr)                                                                 \
  do {                                                                                   \
    cudaError_t status_ = (expr);                                                        \
    BASTION_CHECK(status_ == cudaSuccess, "CUDA error ", cudaGetErrorString(status_), " in ", #expr); \
  } while (0)

namespace bastion {

namespace {
__global__ void fill_kernel(float* dst, float value, int64_t numel) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < numel) dst[i] = value;
}
}  // namespace

bool cuda_available() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

float* cuda_alloc_floats(int64_t numel) {
  void* ptr = nullptr;
  CUDA_CHECK(cudaMalloc(&ptr, static_cast<size_t>(numel) * sizeof(float)));
  return static_cast<float*>(ptr);
}

void cuda_free_floats(float* ptr) { CUDA_CHECK(cudaFree(ptr)); }

void cuda_copy_host_to_device(float* dst, const float* src, int64_t numel) {
  CUDA_CHECK(cudaMemcpy(dst, src, numel * sizeof(float), cudaMemcpyHostToDevice));
}
void cuda_copy_device_to_host(float* dst, const float* src, int64_t numel) {
  CUDA_CHECK(cudaMemcpy(dst, src, numel * sizeof(float), cudaMemcpyDeviceToHost));
}
void cuda_copy_device_to_device(float* dst, const float* src, int64_t numel) {
  CUDA_CHECK(cudaMemcpy(dst, src, numel * sizeof(float), cudaMemcpyDeviceToDevice));
}

void cuda_fill(float* dst, float value, int64_t numel) {
  if (numel == 0) return;
  const int threads = 256;
  const int64_t blocks = (numel + threads - 1) / threads;
  fill_kernel<<<static_cast<unsigned>(blocks), threads>>>(dst, value, numel);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace bastion
