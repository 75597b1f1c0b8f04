// CUDA_CHECK: every CUDA runtime call goes through it (STYLE.md §6); a failure throws bastion::Error
// naming the call. Plain C++ over the runtime API, so host-only files (benchmarks) can use it too.
#pragma once

#include "kernels/cuda/compat.h"
#include "tensor/error.h"

#define CUDA_CHECK(expr)                                                                                  \
  do {                                                                                                    \
    const cudaError_t cuda_status_ = (expr);                                                              \
    BASTION_CHECK(cuda_status_ == cudaSuccess, "CUDA error '", cudaGetErrorString(cuda_status_), "' in ", \
                  #expr);                                                                                 \
  } while (0)
