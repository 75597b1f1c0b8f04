// Included by kernels/cuda/*.cu only: CUDA_CHECK, and cuda_launch, the single place where a kernel is
// launched, so that every launch is checked (and synchronised in debug mode) and the emulated build
// can run it on CPU threads.
#pragma once

#include <utility>

#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda.h"

namespace bastion {

// After a launch: the launch error, and in debug mode the kernel's own error (synchronises).
void cuda_check_launch(const char* kernel, CudaStream stream);

// Blocks for a grid-stride loop over `n` items with `threads` per block: enough to fill the GPU, capped
// so that a huge `n` loops instead of launching millions of blocks (4 blocks when emulated, which
// still exercises the stride).
unsigned cuda_grid_stride_blocks(int64_t n, int threads);

inline unsigned cuda_ceil_div(int64_t n, int64_t d) { return static_cast<unsigned>((n + d - 1) / d); }

// Device scratch for the launches of one call, from the caching allocator; given back when the call
// has queued them (the engine's work is ordered on one stream), also when a launch throws. A count of
// 0 allocates nothing (ptr is null).
template <class T>
struct CudaScratch {
  explicit CudaScratch(int64_t count)
      : ptr(count > 0 ? static_cast<T*>(cuda_allocate(static_cast<size_t>(count) * sizeof(T))) : nullptr) {}
  ~CudaScratch() {
    if (ptr != nullptr) cuda_release(ptr);
  }
  CudaScratch(const CudaScratch&) = delete;
  CudaScratch& operator=(const CudaScratch&) = delete;
  T* ptr;
};

template <typename... Params, typename... Args>
void cuda_launch(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, CudaStream stream,
                 Args&&... args) {
#if defined(BASTION_CUDA_EMULATION)
  bastion_emulated_launch(kernel, grid, block, name, std::forward<Args>(args)...);
#else
  kernel<<<grid, block, 0, stream>>>(std::forward<Args>(args)...);
#endif
  cuda_check_launch(name, stream);
}

}  // namespace bastion
