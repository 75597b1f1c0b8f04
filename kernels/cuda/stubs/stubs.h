// Shared by the stub files of the CPU-only build (kernels/cuda/stubs/*.cpp).
#pragma once

#include "kernels/cuda/cuda.h"
#include "tensor/error.h"

namespace bastion {
[[noreturn]] void cuda_unavailable();  // throws "built without CUDA ..."
}  // namespace bastion
