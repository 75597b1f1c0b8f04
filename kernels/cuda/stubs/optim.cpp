// Stubs of kernels/cuda/optim.h for the CPU-only build: every entry point throws "built without CUDA".
#include "kernels/cuda/optim.h"
#include "kernels/cuda/stubs/stubs.h"

namespace bastion {

void sgd_step_cuda(float*, float*, const float*, int64_t, const SgdStepOptions&, CudaStream) { cuda_unavailable(); }

}  // namespace bastion
