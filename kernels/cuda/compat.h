// The one include through which kernels/cuda/*.cu see CUDA's language and runtime: the real toolkit,
// or, in a BASTION_CUDA=EMULATE build, kernels/cuda/emulator.h, which runs the same kernels on the
// CPU. Kernel code therefore sticks to the subset the emulator provides (emulator.h lists it):
// no dynamic shared memory, no <<< >>> outside kernels/cuda/launch.h, and tensor-core code inside
// `#if !defined(BASTION_CUDA_EMULATION)`.
#pragma once

#if defined(BASTION_CUDA_EMULATION)
#include "kernels/cuda/emulator.h"
#else
#include <cuda_runtime.h>
#endif
