// Internal to kernels/cpu/conv_blocked*.cpp: the layout conversions and weight packing
// (conv_blocked_layout.cpp), the weight-gradient pass (conv_blocked_weight.cpp), and the register-blocked
// kernels of each instruction set (AVX-512 in conv_blocked_gather.cpp and conv_blocked_weight.cpp, AVX2 in
// conv_blocked_avx2.cpp), which conv_blocked.cpp runs on the blocked copies it makes. Layouts and plan:
// kernels/cpu/conv_blocked.h. This header includes no C++ library header but <cstdint>, because
// conv_blocked_avx2.cpp, compiled for AVX2 on every x86-64 build, includes it (gemm_small_blocks.h says why).
#pragma once

#include <cstdint>

#include "kernels/cpu/conv.h"

namespace bastion::conv_blocked_detail {

constexpr int64_t kLanes = 16;              // channels per block, floats per zmm register (two ymm registers on AVX2)
constexpr int64_t kTaps = 9;                // 3 x 3
constexpr int64_t kTile = kLanes * kLanes;  // one (input block, output block) tap of packed weights

struct WeightPass {
  int64_t N, C, K, OH, OW, stride;
  int64_t x_plane, x_row;    // padded input: floats per channel block, per row
  int64_t dy_plane, dy_row;  // grad_out padded by one pixel
  int KV;
  int64_t samples_per_chunk, samples_per_group, rows_per_group;
};

// One class of output pixels of a gather pass (forward, grad_in): a grid (rows x cols) of the output plane
// with its own taps. The forward and stride-1 grad_in have one class; stride-2 grad_in has the 4 parity
// classes.
struct GatherClass {
  int64_t rows, cols;
  int64_t out_origin, out_row_step;  // output pixels: origin + i * row_step + j * out_col_step
  int64_t in_row_step;               // input pixels: i * in_row_step + j * in_col_step + tap offset
  int ntaps;
  int64_t in_off[kTaps];  // floats, relative to the pixel's input base
  int64_t w_off[kTaps];   // floats / KV, relative to an (output group, input block) weight slab
};

struct GatherArgs {
  int64_t out_group_stride;           // between the KV output blocks
  int64_t in_cb_stride, w_cb_stride;  // between input blocks
  int64_t cbs;                        // input blocks in this call
  const GatherClass* cls;
  // Flat blocks only (BlockedKernels::gather_flat): pixel t's input and output offsets in floats, relative
  // to the call's input and output pointers; null for a block of one row's adjacent pixels.
  const int64_t* pixel_in;
  const int64_t* pixel_out;
};

// A gather register block: KV output blocks x T pixels of one row, out (+)= sum over the call's input
// blocks, the class's taps and 16 input channels of weight vector x broadcast input; init: the start values
// (bias or zeros, KV x 16 floats), or null to continue from the values in out.
using GatherFn = void (*)(float* out, const float* in, const float* w, const float* init, const GatherArgs& a);
// A weight-gradient block: the totals of one input channel (KV x 9 vectors) += the group's pixels.
using WeightFn = void (*)(float* totals, const float* dy, const float* x, const WeightPass& p, int64_t samples,
                          int64_t rows);
// One sample: planes (C, H, W) -> [C / 16][H + 2 pad][W + 2 pad][16], the border ASSIGNED zero.
using ToBlockedFn = void (*)(float* dst, const float* src, int64_t C, int64_t H, int64_t W, int64_t pad);
// One sample: [C / 16][P][16] -> planes (C, P), ASSIGNED.
using FromBlockedFn = void (*)(float* dst, const float* src, int64_t C, int64_t P);

// What differs between the instruction sets: the kernels and the register and L1 budgets the plan sizes
// its blocks by.
struct BlockedKernels {
  int accumulators;            // 16-lane accumulators a gather block may hold
  int max_pixels;              // pixels per gather block
  int max_gather_kv;           // output blocks per gather block (1, 2 or 4)
  int max_weight_kv;           // output blocks per weight-gradient block (1 or 2)
  int64_t l1_weight_bytes;     // packed weights a gather pass keeps in L1 per input-block chunk
  int64_t weight_group_bytes;  // what a weight-gradient group keeps in L1
  GatherFn (*gather)(int KV, int T, int in_col_step, int out_col_step);
  // Blocks of T pixels anywhere in the class's grid (KV = 1; GatherArgs::pixel_in and pixel_out), taken on
  // rows narrower than flat_below_cols, where a row's blocks would hold few accumulators; null: never.
  GatherFn (*gather_flat)(int T);
  int64_t flat_below_cols;
  WeightFn (*weight)(int KV, int64_t stride);
  ToBlockedFn to_blocked;
  FromBlockedFn from_blocked;
};

// The weights in the gather passes' order (conv_blocked_layout.cpp has the layouts); `transposed` for grad_in.
void pack_weights(float* packed, const float* weight, int64_t K, int64_t C, int KV, bool transposed, int threads);

WeightPass weight_pass(const Conv2dGeometry& g, const BlockedKernels& isa);

// totals: [k / (16 KV)][c / 16][c % 16][kv][tap][16], summed over all samples.
void run_weight(float* totals, const float* dy_blocked, const float* x_blocked, const WeightPass& p,
                const BlockedKernels& isa, int threads);

// The AVX-512 set (conv_blocked_gather.cpp; only in builds with AVX-512), and its parts in the other files.
const BlockedKernels& avx512_kernels();
WeightFn avx512_weight_fn(int KV, int64_t stride);
void avx512_to_blocked(float* dst, const float* src, int64_t C, int64_t H, int64_t W, int64_t pad);
void avx512_from_blocked(float* dst, const float* src, int64_t C, int64_t P);

// The AVX2 + FMA set (conv_blocked_avx2.cpp), on every x86-64 build; null where the CPU lacks AVX2 or FMA.
const BlockedKernels* avx2_kernels();

// What conv_blocked runs by default (conv_blocked.cpp): AVX-512 in a build with it, else AVX2 where the CPU
// has it, else null. conv_winograd's layout conversions use the same set.
const BlockedKernels* default_kernels();

}  // namespace bastion::conv_blocked_detail
