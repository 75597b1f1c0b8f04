// conv2d_direct: the stride-1 convolution of the small CNNs FL trains, by register-blocked AVX-512 loops,
// or AVX2 + FMA loops on CPUs without AVX-512 (no im2col copy, no GEMM packing). Same math, layouts and contracts as conv2d (kernels/cpu/conv.h):
//   out[n, k, oh, ow] = bias[k] + sum_{c, r, s} weight[k, c, r, s] * in[n, c, oh - pad + r, ow - pad + s]
// PyTorch equivalent: F.conv2d(x, w, b, stride=1, padding=pad)
//
// Plan ("row-strided planes"). A valid (unpadded) stride-1 correlation of planes of width Wp writes
// output q = oh * Wp + ow, i.e. with the INPUT's row stride: then filter tap (r, s) of output q reads
// input q + r * Wp + s, so one contiguous 16-float load feeds 16 outputs for any plane size. The lanes
// with ow >= OW (the last S - 1 of each row) wrap into the next row, compute garbage and are dropped
// when the rows are copied out: Wp / OW more multiply-adds (LeNet conv2: 12 / 8) against no im2col and
// no packing of the columns (together 37 % of a LeNet-28 step with im2col + OpenBLAS, 2026-11-23).
//   forward      out = valid(in zero-padded by pad, weight) + bias
//   grad_in      valid(grad_out zero-padded by R-1-pad / S-1-pad, weight flipped and transposed)
//   grad_weight  dw[k, c, r, s] = sum_n sum_q dyS[n, k, q] * inP[n, c, q + r * Wp + s], where dyS is
//                grad_out in the row-strided layout with zeros in the dropped columns
// A register block holds KB output channels x NV vectors of 16 outputs (24 of the 32 zmm registers);
// the weight gradient's block holds KB channels x TB filter taps, summed over every sample and position.
// On AVX2 (kernels/cpu/conv_direct_avx2.cpp) the same plan runs on 8-lane vectors, 12 accumulators of 16
// ymm registers.
//
// Determinism: forward and grad_in split samples over threads, grad_weight splits (channel block, input
// channel, tap block) items; every output is computed by one thread in a fixed order, so results do
// not depend on the thread count. Rounding differs from the im2col path (a different summation order).
// Backward ASSIGNS grad_in, grad_weight and grad_bias; any may be null.
// The caller provides conv2d_direct_workspace_floats(g, threads) floats and passes the same `threads`:
// the kernels run at most that many OpenMP threads and never allocate.
#pragma once

#include <cstdint>

#include "kernels/cpu/conv.h"

namespace bastion {

// True when this build has the AVX-512 kernels, or the CPU has AVX2 and FMA, and g is stride 1 with
// padding < R and < S (the grad_in transposed convolution needs R - 1 - pad >= 0).
bool conv2d_direct_supported(const Conv2dGeometry& g);
// Whether the op takes the direct path for g. With AVX-512: every supported layer but those
// conv2d_blocked_preferred takes (ResNet's 3x3 layers, kernels/cpu/conv_blocked.h), since it beat im2col +
// OpenBLAS on every layer of bench_kernels' conv ladder, forward and backward (bench/RESULTS.md, "CPU
// speed", 2026-11-23, 1 thread). On AVX2: only the small layers where its own ladder won (conv_direct.cpp).
bool conv2d_direct_preferred(const Conv2dGeometry& g);

int64_t conv2d_direct_workspace_floats(const Conv2dGeometry& g, int threads);

// Which loops a pass runs. RowStrided: the plan above. ChannelVector: 16 output channels per vector
// (kernels/cpu/conv_direct_channels.cpp) for passes whose output channels are a multiple of 16 (forward
// and grad_weight: K; grad_in: C); other passes fall back to RowStrided. ChannelScatter: ChannelVector
// whose forward and grad_in take row-scatter blocks where the filters are 5 wide and a block holds 1 or
// 2 channel vectors (conv_direct_channels.cpp). Auto: the measured choice (conv_direct.cpp,
// use_channels). RowStridedAvx2: the plan above on AVX2 vectors, what every variant runs on a build
// without AVX-512 (the channel-vector passes are AVX-512 only); a build with AVX-512 runs it only when
// asked, so that its tests run there too. Tests and bench_kernels pin a variant; the op uses Auto.
enum class ConvDirectVariant { Auto, RowStrided, ChannelVector, ChannelScatter, RowStridedAvx2 };

void conv2d_direct_forward_cpu(float* out, const float* in, const float* weight, const float* bias,
                               const Conv2dGeometry& g, float* workspace, int threads,
                               ConvDirectVariant variant = ConvDirectVariant::Auto);
void conv2d_direct_backward_cpu(float* grad_in, float* grad_weight, float* grad_bias, const float* grad_out,
                                const float* in, const float* weight, const Conv2dGeometry& g, float* workspace,
                                int threads, ConvDirectVariant variant = ConvDirectVariant::Auto);

}  // namespace bastion
