// Stubs linked when Bastion is built without CUDA (BASTION_CUDA=OFF, or AUTO without nvcc): every entry
// point throws, so asking for a CUDA tensor gives a clear error instead of a link failure. One file per
// kernel family beside this one; they share cuda_unavailable().
#include "kernels/cuda/stubs/stubs.h"

namespace bastion {

void cuda_unavailable() {
  BASTION_FAIL("built without CUDA: rebuild with -DBASTION_CUDA=ON on a machine with nvcc, or -DBASTION_CUDA=EMULATE "
               "to run the CUDA kernels on CPU threads");
}

bool cuda_available() { return false; }
bool cuda_emulated() { return false; }
const char* cuda_device_description() { return "built without CUDA"; }
int cuda_select_device(int) { cuda_unavailable(); }
CudaStream cuda_stream() { cuda_unavailable(); }
void cuda_synchronize(CudaStream) { cuda_unavailable(); }
void cuda_set_debug_sync(bool) {}
bool cuda_debug_sync() { return false; }
void* cuda_allocate(size_t) { cuda_unavailable(); }
void cuda_release(void*) { cuda_unavailable(); }
float* cuda_alloc_floats(int64_t) { cuda_unavailable(); }
void cuda_free_floats(float*) { cuda_unavailable(); }
CudaAllocatorStats cuda_allocator_stats() { return {}; }
void cuda_allocator_release_all() {}
void cuda_copy_to_device(void*, const void*, size_t, CudaStream) { cuda_unavailable(); }
void cuda_copy_to_host(void*, const void*, size_t, CudaStream) { cuda_unavailable(); }
void cuda_copy_on_device(void*, const void*, size_t, CudaStream) { cuda_unavailable(); }
void cuda_fill(float*, float, int64_t, CudaStream) { cuda_unavailable(); }

}  // namespace bastion
