// Stubs linked when Bastion is built without CUDA (BASTION_CUDA=OFF or no nvcc): every entry point
// throws, so asking for a CUDA tensor gives a clear error instead of a link failure.
#include "kernels/cuda/cuda.h"
#include "tensor/error.h"

namespace bastion {

namespace {
[[noreturn]] void no_cuda() { BASTION_FAIL("built without CUDA: rebuild with -DBASTION_CUDA=ON on a machine with nvcc"); }
}  // namespace

bool cuda_available() { return false; }
float* cuda_alloc_floats(int64_t) { no_cuda(); }
void cuda_free_floats(float*) { no_cuda(); }
void cuda_copy_host_to_device(float*, const float*, int64_t) { no_cuda(); }
void cuda_copy_device_to_host(float*, const float*, int64_t) { no_cuda(); }
void cuda_copy_device_to_device(float*, const float*, int64_t) { no_cuda(); }
void cuda_fill(float*, float, int64_t) { no_cuda(); }

}  // namespace bastion
