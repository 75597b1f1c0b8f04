// Internal to kernels/cpu/conv_direct*.cpp: the channel-vector variant (conv_direct_channels.cpp),
// which conv_direct.cpp dispatches to per pass. Workspace: channel_workspace_floats(g, threads) floats,
// laid out as [packed filters][per-thread slices][weight-gradient region]; the passes of one backward
// run one after another and may reuse it.
#pragma once

#include <cstdint>

#include "kernels/cpu/conv.h"

namespace bastion::conv_direct_detail {

// planes (C, H, W) -> zero-padded (C, H + 2 ph, W + 2 pw), padding ASSIGNED zero.
void pad_planes(float* dst, const float* src, int64_t C, int64_t H, int64_t W, int64_t ph, int64_t pw);

bool channel_forward_ok(const Conv2dGeometry& g);  // K % 16 == 0
bool channel_grad_in_ok(const Conv2dGeometry& g);  // C % 16 == 0
bool channel_weight_ok(const Conv2dGeometry& g);   // K % 16 == 0
int64_t channel_workspace_floats(const Conv2dGeometry& g, int threads);
// row_scatter: passes with 5-wide filters and 1 or 2 channel vectors per block (output channels not a
// multiple of 64) take the row-scatter blocks (conv_direct_channels.cpp); other passes ignore it.
void channel_forward(float* out, const float* in, const float* weight, const float* bias, const Conv2dGeometry& g,
                     float* workspace, int threads, bool row_scatter);
void channel_grad_in(float* grad_in, const float* grad_out, const float* weight, const Conv2dGeometry& g,
                     float* workspace, int threads, bool row_scatter);
void channel_grad_weight(float* grad_weight, const float* grad_out, const float* in, const Conv2dGeometry& g,
                         float* workspace, int threads);

}  // namespace bastion::conv_direct_detail
