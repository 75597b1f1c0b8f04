// Internal to kernels/cpu/conv_direct*.cpp: conv_direct's row-strided plan (conv_direct.h) on 8-lane AVX2 +
// FMA vectors, for x86-64 CPUs without AVX-512 (AMD Zen 2 and 3 among them). conv_direct.cpp dispatches to
// it: on such CPUs for every variant, elsewhere for ConvDirectVariant::RowStridedAvx2 (tests, benchmarks).
// Same contracts as the passes of conv_direct.cpp: ASSIGNED outputs, no allocation, results bitwise
// independent of the thread count.
#pragma once

#include <cstdint>

#include "kernels/cpu/conv.h"

namespace bastion::conv_direct_avx2 {

// True when this build compiled the AVX2 kernels (x86-64) and the CPU has AVX2 and FMA.
bool available();
int64_t workspace_floats(const Conv2dGeometry& g, int threads);
void forward(float* out, const float* in, const float* weight, const float* bias, const Conv2dGeometry& g,
             float* workspace, int threads);
void grad_in(float* grad_in, const float* grad_out, const float* weight, const Conv2dGeometry& g, float* workspace,
             int threads);
void grad_weight(float* grad_weight, const float* grad_out, const float* in, const Conv2dGeometry& g, float* workspace,
                 int threads);

}  // namespace bastion::conv_direct_avx2
