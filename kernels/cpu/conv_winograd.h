// conv2d_winograd: ResNet's stride-1 3x3 convolutions (padding 1, C and K multiples of 16, even H and W)
// by Winograd's minimal filtering F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural
// Networks", CVPR 2016). Same math, layouts and contracts as conv2d (kernels/cpu/conv.h): NCHW in, NCHW out.
//   out[n, k, oh, ow] = bias[k] + sum_{c, r, s} weight[k, c, r, s] * in[n, c, oh - 1 + r, ow - 1 + s]
// PyTorch equivalent: F.conv2d(x, w, b, stride=1, padding=1)
//
// The output is cut into 2x2 tiles t, each read from a 4x4 input patch d_t (tiles overlap by 2 pixels).
// With the 4x4 transforms B^T, G (4x3) and A^T (2x4) of F(2x2, 3x3), for each of the 16 positions xi of a
// 4x4 transformed tile:
//   U[xi][c][k] = (G w[k, c] G^T)[xi]      V[xi][t][c] = (B^T d_t[c] B)[xi]
//   M[xi][t][k] = sum_c V[xi][t][c] U[xi][c][k]          (16 GEMMs, tiles x C times C x K)
//   out tile t, channel k = A^T M[.][t][k] A + bias[k]
// 16 multiply-adds per tile and channel pair instead of 4 x 9 = 36: 2.25x fewer in the GEMMs, which are
// OpenBLAS's (single-threaded, one GEMM per thread at a time). The transforms are O(data).
// Backward, by the chain rule through the same linear maps (so it is the exact gradient of the forward):
//   grad_in      a Winograd convolution of grad_out with the weights flipped and transposed
//                (w'[c, k, r, s] = w[k, c, 2 - r, 2 - s]): the same code as the forward
//   grad_weight  dM[xi][t][k] = (A dy_t[k] A^T)[xi];  dU[xi][c][k] = sum_t V[xi][t][c] dM[xi][t][k];
//                grad_weight[k, c] = G^T dU[.][c][k] G
//   grad_bias    conv2d_backward_bias_cpu
// The transforms run on the channel-blocked copies of conv_blocked (16 channels innermost, [n][c / 16][h][w]
// [16]); the batch goes in chunks of whole samples sized by the layer (conv2d_winograd_chunk_samples), so a
// chunk's transformed tiles stay in the caches; the weight gradient's chunks hold at least 2 C K / (C + K)
// tiles, so its GEMMs' running totals (16 C K floats) are read and written no more than the tiles.
//
// Rounding: Winograd sums other terms than the direct sum (the transformed weights and inputs are rounded
// before they are multiplied), so results differ from conv2d_direct, im2col and conv_blocked by more than
// summation order: for F(2x2, 3x3) a few float epsilons times the magnitude of the terms (the tests'
// tolerances say how much).
// Determinism: the chunks depend on the geometry only; inside a chunk the transforms write disjoint outputs
// and each of the 16 GEMMs runs on one thread; grad_weight adds the chunks' GEMMs in chunk order. Results
// therefore do not depend on the thread count.
// Backward ASSIGNS grad_in, grad_weight and grad_bias; any may be null. The caller provides
// conv2d_winograd_workspace_floats(g) floats; the kernels never allocate and run at most `threads` OpenMP
// threads.
#pragma once

#include <cstdint>

#include "kernels/cpu/conv.h"

namespace bastion {

// True when g is a 3x3, stride-1, padding-1 convolution with C and K multiples of 16 and even H and W, and
// the CPU has the channel-blocked layouts' instruction sets (AVX2 + FMA or AVX-512).
bool conv2d_winograd_supported(const Conv2dGeometry& g);

// The op (autograd/ops/conv.cpp) takes this path, for all three passes, where this is true: on CPUs without
// AVX-512, every supported layer (the rule and its ladder in conv_winograd.cpp).
bool conv2d_winograd_preferred(const Conv2dGeometry& g);

int64_t conv2d_winograd_chunk_samples(const Conv2dGeometry& g);
int64_t conv2d_winograd_workspace_floats(const Conv2dGeometry& g);

// Both throw when conv2d_winograd_supported(g) is false.
void conv2d_winograd_forward_cpu(float* out, const float* in, const float* weight, const float* bias,
                                 const Conv2dGeometry& g, float* workspace, int threads);
void conv2d_winograd_backward_cpu(float* grad_in, float* grad_weight, float* grad_bias, const float* grad_out,
                                  const float* in, const float* weight, const Conv2dGeometry& g, float* workspace,
                                  int threads);

}  // namespace bastion
