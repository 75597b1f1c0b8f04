// Device helpers shared by kernels/cuda/*.cu (include after launch.h): the one-block reduction in
// double used by the deterministic sums, and the 16-byte alignment test that picks float4 paths.
#pragma once

#include <cstdint>

#include "kernels/cuda/compat.h"

namespace bastion {

inline bool cuda_aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Sums each v[k] over the block in a fixed order (shuffle tree within each warp, then over the warp
// sums); the results are valid in thread 0. Every thread of the block must call it (it synchronises).
// Blocks of up to 1024 threads (32 warps).
template <int K>
__device__ void cuda_block_sum(double (&v)[K]) {
  constexpr unsigned kFullMask = 0xffffffffu;
  __shared__ double warp_sums[K][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int k = 0; k < K; ++k) {
    for (int offset = 16; offset > 0; offset /= 2) v[k] += __shfl_down_sync(kFullMask, v[k], offset);
    if (lane == 0) warp_sums[k][warp] = v[k];
  }
  __syncthreads();
  if (warp == 0) {
    for (int k = 0; k < K; ++k) {
      v[k] = lane < static_cast<int>(blockDim.x / 32) ? warp_sums[k][lane] : 0.0;
      for (int offset = 16; offset > 0; offset /= 2) v[k] += __shfl_down_sync(kFullMask, v[k], offset);
    }
  }
}

}  // namespace bastion
