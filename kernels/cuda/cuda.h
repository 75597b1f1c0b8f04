// The CUDA runtime layer of Bastion: device query, the engine's stream, the caching allocator,
// host<->device copies and the debug mode. Plain C++: op, tensor and test code include it without
// CUDA's headers. Three builds provide it (CMake option BASTION_CUDA):
//   ON / AUTO with nvcc  kernels/cuda/runtime.cu on the real runtime
//   EMULATE              the same runtime.cu over kernels/cuda/emulator.h (CPU threads, host memory)
//   OFF                  kernels/cuda/stubs/*.cpp, which throw "built without CUDA"
//
// Streams are passed explicitly to every kernel and copy. The engine itself uses one stream,
// cuda_stream(): kernels run in issue order on it, so a buffer freed by an op can be handed to the
// next op without a synchronisation (the caching allocator relies on this). Copies to the host wait for
// the stream; copies from the host are stream-ordered.
//
// Debug mode (cuda_set_debug_sync(true), or BASTION_CUDA_SYNC=1 in the environment) synchronises after
// every launch, so an asynchronous fault is reported at the kernel that caused it.
#pragma once

#include <cstddef>
#include <cstdint>

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace bastion {

using CudaStream = CUstream_st*;

bool cuda_available();  // a device is present (always true in the emulated build)
bool cuda_emulated();   // built with BASTION_CUDA=EMULATE: "device" code runs on CPU threads
const char* cuda_device_description();  // e.g. "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)" or "CUDA emulator"

// Makes device `index` mod (device count) this process's device and returns it; call it before the first
// stream or allocation (under mpirun: the node-local rank, so each rank of a node gets its own GPU).
int cuda_select_device(int index);
CudaStream cuda_stream();  // the engine's stream, created on first use
void cuda_synchronize(CudaStream stream);
void cuda_set_debug_sync(bool on);
bool cuda_debug_sync();

// ---- caching allocator ----
// Sizes are rounded up (512 B below 1 MiB, 2 MiB above) and freed blocks kept per rounded size, so a
// training loop stops calling cudaMalloc after its first step. When cudaMalloc fails the cache is
// released and the allocation tried once more.
void* cuda_allocate(size_t bytes);
void cuda_release(void* ptr);  // back to the cache; the pointer must come from cuda_allocate
float* cuda_alloc_floats(int64_t numel);
void cuda_free_floats(float* ptr);
struct CudaAllocatorStats {
  int64_t fresh_allocations = 0;  // cudaMalloc calls
  int64_t reuses = 0;             // blocks handed out again from the cache
  int64_t cached_bytes = 0;       // free blocks held
  int64_t live_bytes = 0;         // blocks in use
};
CudaAllocatorStats cuda_allocator_stats();
void cuda_allocator_release_all();  // cudaFree every cached block

// ---- copies (bytes) ----
void cuda_copy_to_device(void* dst, const void* src, size_t bytes, CudaStream stream);
void cuda_copy_to_host(void* dst, const void* src, size_t bytes, CudaStream stream);  // waits for the stream
void cuda_copy_on_device(void* dst, const void* src, size_t bytes, CudaStream stream);
void cuda_fill(float* dst, float value, int64_t numel, CudaStream stream);

}  // namespace bastion
