// sam_perturb_cpu, sam_direction_cpu (contract: kernels/cpu/sam.h). Compiled with -ffp-contract=off
// (CMakeLists.txt): every product is rounded before the sum, as in the unfused passes.
#include "kernels/cpu/sam.h"

namespace bastion {

void sam_perturb_cpu(float* __restrict w, float* __restrict saved, float* e, const float* d, float scale, int64_t D) {
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

void sam_direction_cpu(float* __restrict g, const float* __restrict linear, float alpha, int64_t D) {
  if (linear == nullptr) {
    for (int64_t i = 0; i < D; ++i) g[i] = alpha * g[i];
    return;
  }
  for (int64_t i = 0; i < D; ++i) g[i] = alpha * g[i] + linear[i];
}

}  // namespace bastion
