// Stubs of kernels/cuda/gemm.h for the build without CUDA (see stubs/runtime.cpp): every entry point
// throws "built without CUDA".
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/stubs/stubs.h"

namespace bastion {

void gemm_cuda_set_precision(GemmPrecision) { cuda_unavailable(); }
GemmPrecision gemm_cuda_precision() { cuda_unavailable(); }
void gemm_cuda(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t, float,
               float*, int64_t, CudaStream) {
  cuda_unavailable();
}
GemmSplitK gemm_cuda_split_k(int64_t, int64_t, int64_t) { cuda_unavailable(); }
int gemm_cuda_variant_count() { cuda_unavailable(); }
const char* gemm_cuda_variant_name(int) { cuda_unavailable(); }
bool gemm_cuda_variant_emulated(int) { cuda_unavailable(); }
void gemm_cuda_variant(int, bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                       float, float*, int64_t, CudaStream) {
  cuda_unavailable();
}

}  // namespace bastion
