// Internal to kernels/cpu/conv_blocked*.cpp: the weight-gradient pass (conv_blocked_weight.cpp), which
// conv_blocked.cpp runs on the blocked copies it makes. Layouts and plan: kernels/cpu/conv_blocked.h.
#pragma once

#include <cstdint>

#include "kernels/cpu/conv.h"

namespace bastion::conv_blocked_detail {

constexpr int64_t kLanes = 16;  // channels per block, floats per zmm register
constexpr int64_t kTaps = 9;    // 3 x 3

struct WeightPass {
  int64_t N, C, K, OH, OW, stride;
  int64_t x_plane, x_row;    // padded input: floats per channel block, per row
  int64_t dy_plane, dy_row;  // grad_out padded by one pixel
  int KV;
  int64_t samples_per_chunk, samples_per_group, rows_per_group;
};

WeightPass weight_pass(const Conv2dGeometry& g);

// totals: [k / (16 KV)][c / 16][c % 16][kv][tap][16], summed over all samples.
void run_weight(float* totals, const float* dy_blocked, const float* x_blocked, const WeightPass& p, int threads);

}  // namespace bastion::conv_blocked_detail
