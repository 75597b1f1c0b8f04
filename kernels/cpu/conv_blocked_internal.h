// Internal to kernels/cpu/conv_blocked*.cpp: the layout conversions and weight packing
// (conv_blocked_layout.cpp) and the weight-gradient pass (conv_blocked_weight.cpp), which conv_blocked.cpp
// runs on the blocked copies it makes. Layouts and plan: kernels/cpu/conv_blocked.h.
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

// One sample: planes (C, H, W) -> [C / 16][H + 2 pad][W + 2 pad][16], the border ASSIGNED zero.
void to_blocked(float* dst, const float* src, int64_t C, int64_t H, int64_t W, int64_t pad);
// One sample: [C / 16][P][16] -> planes (C, P), ASSIGNED.
void from_blocked(float* dst, const float* src, int64_t C, int64_t P);
// The weights in the gather passes' order (conv_blocked_layout.cpp has the layouts); `transposed` for grad_in.
void pack_weights(float* packed, const float* weight, int64_t K, int64_t C, int KV, bool transposed, int threads);

WeightPass weight_pass(const Conv2dGeometry& g);

// totals: [k / (16 KV)][c / 16][c % 16][kv][tap][16], summed over all samples.
void run_weight(float* totals, const float* dy_blocked, const float* x_blocked, const WeightPass& p, int threads);

}  // namespace bastion::conv_blocked_detail
