// sam_perturb_cpu, sam_direction_cpu (contract: kernels/cpu/sam.h). Compiled with -ffp-contract=off
// (CMakeLists.txt): every product is rounded before the sum, as in the unfused passes.
#include "kernels/cpu/sam.h"

#include <algorithm>

#include "kernels/cpu/vector.h"

namespace bastion {

void sam_perturb_cpu(float* __restrict w, float* __restrict saved, float* e, const float* d, float scale, int64_t D) {
  // GCC splits `saved[i] = w[i]` out of these loops into a memcpy (loop distribution), a second pass over w;
  // kept so: with -fno-tree-loop-distribute-patterns the single loop took 9.1 % of a FedFSA round, against
  // 7.1 % for the memcpy and the loop together (perf, Intel Xeon, 2026-11-29): the copy's fast-string
  // stores skip reading `saved` into the cache first, which the loop's stores cannot.
  if (e == nullptr) {  // e is not kept: a loop without its store (one vector less written)
    const float* __restrict direction = d;
    for (int64_t i = 0; i < D; ++i) {
      saved[i] = w[i];
      w[i] = w[i] + scale * direction[i];
    }
    return;
  }
  for (int64_t i = 0; i < D; ++i) {
    const float step = scale * d[i];  // d may alias e: read before the store
    e[i] = step;
    saved[i] = w[i];
    w[i] = w[i] + step;
  }
}

void sam_perturb_into_cpu(float* __restrict out, const float* __restrict w, float* e, const float* d, float scale,
                          int64_t D) {
  if (e == nullptr) {
    const float* __restrict direction = d;
    for (int64_t i = 0; i < D; ++i) out[i] = w[i] + scale * direction[i];
    return;
  }
  for (int64_t i = 0; i < D; ++i) {
    const float step = scale * d[i];  // d may alias e: read before the store
    e[i] = step;
    out[i] = w[i] + step;
  }
}

void sam_direction_cpu(float* __restrict g, const float* __restrict linear, float alpha, int64_t D) {
  if (linear == nullptr) {
    for (int64_t i = 0; i < D; ++i) g[i] = alpha * g[i];
    return;
  }
  for (int64_t i = 0; i < D; ++i) g[i] = alpha * g[i] + linear[i];
}

void sam_direction_norm_cpu(float* g, const float* linear, float alpha, int64_t D, double* lanes, int64_t first) {
  for (int64_t begin = 0; begin < D; begin += kSamChunk) {
    const int64_t n = std::min(kSamChunk, D - begin);
    sam_direction_cpu(g + begin, linear ? linear + begin : nullptr, alpha, n);
    vector_squared_norm_lanes_cpu(lanes, nullptr, g + begin, n, first + begin);  // the chunk is still in L1
  }
}

void sam_perturb_into_zeroing_cpu(float* __restrict out, const float* __restrict w, float* __restrict d, float scale,
                                  int64_t D) {
  for (int64_t i = 0; i < D; ++i) {
    out[i] = w[i] + scale * d[i];
    d[i] = 0.0f;
  }
}

}  // namespace bastion
