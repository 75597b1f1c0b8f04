// The CUDA side of the kernel layer: device memory and the kernels of kernels/cuda/*.cu.
// A CPU-only build links kernels/cuda/no_cuda.cpp instead, whose functions throw "built without CUDA",
// so op and autograd code has no #ifdef (STYLE.md §2). The full backend is the CUDA issue's work.
#pragma once

#include <cstdint>

namespace bastion {

bool cuda_available();  // built with CUDA and a device is present
float* cuda_alloc_floats(int64_t numel);
void cuda_free_floats(float* ptr);
void cuda_copy_host_to_device(float* dst, const float* src, int64_t numel);
void cuda_copy_device_to_host(float* dst, const float* src, int64_t numel);
void cuda_copy_device_to_device(float* dst, const float* src, int64_t numel);
void cuda_fill(float* dst, float value, int64_t numel);

}  // namespace bastion
