// conv2d_blocked: ResNet's 3x3 convolutions (stride 1 and 2, padding 1, C and K multiples of 16) by
// register-blocked AVX-512 loops over channel-blocked copies of the tensors, or on CPUs without AVX-512 by
// the same plan's AVX2 + FMA kernels (conv_blocked_avx2.cpp, resized for 16 ymm registers: one output
// vector x up to 6 pixels, the weight gradient's 9 taps in passes of 5 and 4, blocks of pixels across rows
// on planes narrower than 12; compiled for AVX2 on every x86-64 build and chosen at run time). Same math,
// layouts and contracts as conv2d (kernels/cpu/conv.h): NCHW in, NCHW out. The paragraphs below describe
// the AVX-512 plan; the plan's budgets per instruction set are conv_blocked_internal.h's BlockedKernels.
//   out[n, k, oh, ow] = bias[k] + sum_{c, r, s} weight[k, c, r, s] * in[n, c, oh*st - 1 + r, ow*st - 1 + s]
// PyTorch equivalent: F.conv2d(x, w, b, stride=st, padding=1)
//
// Plan. Inside the call the tensors are copied into a channel-blocked layout, 16 channels innermost:
//   activations  [n][c / 16][h][w][16], zero-padded by one pixel on every side
//   weights      forward [k / 16 KV][c / 16][r][s][c % 16][k % 16 KV], grad_in the same with k and c swapped
// (16x16 in-register transposes; O(data) against 2 * 9 * C multiply-adds per output.) A register block
// holds KV vectors of 16 output channels x T output pixels of one row (KV * T <= 24 of the 32 zmm
// registers: KV = 2, T <= 12 on rows of 8 or more pixels, KV = 4, T <= 6 on narrower ones); each step
// loads KV weight vectors and broadcasts T input scalars (one input channel at one tap):
//   forward      the block above over the padded input, input pixels st apart
//   grad_in      the same gather over grad_out padded by one pixel, taps flipped: stride 1 is one pass;
//                stride 2 splits grad_in into its 4 (row, column) parity classes, each a stride-1 gather
//                with the taps of that parity (1, 2 or 4 of the 9), written 2 pixels apart
//   grad_weight  dw[k, c, r, s] = sum_n sum_{oh, ow} dy[n, k, oh, ow] * in[n, c, oh*st - 1 + r, ow*st - 1 + s]:
//                a block holds KV = 2 vectors of output channels x the 9 taps of ONE input channel, summed
//                over every output pixel (2 dy loads + 9 broadcasts per pixel for 18 FMAs)
// Loop order (forward and grad_in): a call covers one output group, one class and a chunk of input
// blocks whose weights stay in L1 (<= 36 KB); the accumulators are reloaded from the blocked output
// between chunks. Filter banks up to 1.5 MB (64- and 128-channel layers) run sample by sample, so a
// sample's blocked copies are converted, used and converted back while in L2; larger ones run output
// group by output group over all the thread's samples, so each group's weights are read once a pass.
// grad_weight walks the batch in chunks of samples (~1 MB of blocked data, in L2) and inside an item
// in groups of rows or samples (~32 KB, in L1) that its 16 input channels pass over.
//
// Where the op takes it (conv2d_blocked_preferred): with AVX-512 every supported layer; with AVX2 only the
// rule and ladder above conv2d_blocked_preferred in conv_blocked.cpp, less the stride-1 layers on even planes
// that Winograd takes first (kernels/cpu/conv_winograd.h). bench/conv_blocked_ladder.cpp
// (ResNet18's CIFAR layers, batch 64, 1 thread, 2026-11-28, bench/RESULTS.md "conv_blocked") against what
// the op ran before (conv2d_direct at stride 1, im2col + OpenBLAS at stride 2): every layer's three passes
// together are faster, x1.06 (256 -> 512, stride 2) to x3.1 (512 channels, 4x4), and so is every pass
// in the final run; the closest, the weight gradient of 256 -> 512 at stride 2, measured x0.89-1.04 over
// five runs, where the layer's forward and grad_in win x1.06-1.2.
//
// Determinism: forward and grad_in split samples over threads in a fixed partition and every output sums
// its terms in one fixed order (bias, then input-channel blocks, taps, channels), whichever thread
// computes it. grad_weight splits its (output-channel group, input-channel block) items over threads in
// fixed ranges; each item walks the batch in fixed chunks of samples and adds their pixels to its own
// totals in a fixed order. Results therefore do not depend on the thread count.
// Without AVX-512 the weight gradient of stride-2 layers with 128 or more input channels is not this pass
// but columns and NT GEMMs (conv2d_backward_weight_cpu, kernels/cpu/conv.h; the rule and its ladder in
// conv_blocked.cpp), also independent of the thread count; it sums in another order.
// Rounding differs from conv2d_direct and im2col + GEMM (other summation orders). The AVX2 kernels make
// each output's chain of multiply-adds in the AVX-512 order (they cut it at other points, through exact
// stores and reloads), so the two should agree bit for bit; that was not checked on a CPU that runs both.
// Backward ASSIGNS grad_in, grad_weight and grad_bias; any may be null.
// The caller provides conv2d_blocked_workspace_floats(g) floats (the forward alone needs only
// conv2d_blocked_forward_workspace_floats(g): it runs the batch in chunks of samples whose blocked copies
// stay under 48 MiB; the backward holds the whole batch's blocked grad_out and input, grad_in's blocked
// result in the input's place, like conv2d_direct's backward); the kernels never allocate and run at most `threads` OpenMP threads.
#pragma once

#include <cstdint>

#include "kernels/cpu/conv.h"

namespace bastion {

// Which kernels run: Auto takes AVX-512 in a build with it, else AVX2 + FMA where the CPU has them; the
// others name one set (tests and benchmarks), which must be available.
enum class ConvBlockedIsa { Auto, Avx512, Avx2 };
bool conv2d_blocked_isa_available(ConvBlockedIsa isa);

// True when `isa` is available and g is a 3x3, padding-1 convolution with stride 1 or 2 and C and K
// multiples of 16 (ResNet's 3x3 layers).
bool conv2d_blocked_supported(const Conv2dGeometry& g, ConvBlockedIsa isa = ConvBlockedIsa::Auto);

// The op (autograd/ops/conv.cpp) takes this path where this is true: every supported layer (the rule and
// its measurement in the comment above).
bool conv2d_blocked_preferred(const Conv2dGeometry& g);

int64_t conv2d_blocked_forward_workspace_floats(const Conv2dGeometry& g);  // enough for the forward
int64_t conv2d_blocked_workspace_floats(const Conv2dGeometry& g);          // enough for both passes

// Both throw when conv2d_blocked_supported(g, isa) is false.
void conv2d_blocked_forward_cpu(float* out, const float* in, const float* weight, const float* bias,
                                const Conv2dGeometry& g, float* workspace, int threads,
                                ConvBlockedIsa isa = ConvBlockedIsa::Auto);
void conv2d_blocked_backward_cpu(float* grad_in, float* grad_weight, float* grad_bias, const float* grad_out,
                                 const float* in, const float* weight, const Conv2dGeometry& g, float* workspace,
                                 int threads, ConvBlockedIsa isa = ConvBlockedIsa::Auto);

}  // namespace bastion
