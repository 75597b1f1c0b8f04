// The SGD update as one fused kernel over a flat parameter range: the contract of sgd_step_cpu
// (kernels/cpu/optim.h) on device pointers plus a stream. One read of w, grad and velocity and one
// write of w and velocity per parameter.
#pragma once

#include <cstdint>

#include "kernels/cpu/optim.h"
#include "kernels/cuda/cuda.h"

namespace bastion {

void sgd_step_cuda(float* w, float* velocity, const float* grad, int64_t D, const SgdStepOptions& options,
                   CudaStream stream);

}  // namespace bastion
