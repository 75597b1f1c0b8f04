// conv2d on the GPU: the contract of kernels/cpu/conv.h (shapes, layout, ASSIGNS, null outputs skipped)
// on device pointers plus a stream. Geometry from conv2d_geometry() (kernels/cpu/conv.h).
//
// Plan: im2col over a chunk of samples, then gemm_cuda per chunk (as on the CPU), with the output
// scatter and the bias fused into one kernel; backward: gather dY, dW = dY @ cols^T accumulated over
// chunks, dcols = W^T @ dY, col2im (a gather: each input element sums its column entries, no atomics).
// The caller provides conv2d_cuda_workspace_floats(g) floats, laid out as
//   [ cols (CRS, nb*P) | tmp (K, nb*P) ]        nb = conv2d_cuda_chunk_samples(g)
// tmp is the forward's GEMM result, and the backward's dY gathered into (K, nb*P) order.
// nb is the largest sample count whose workspace fits max_workspace_floats (at least 1); every kernel
// result is deterministic (fixed summation orders, no float atomics).
//
// Forward variants (bench/cuda/bench_conv.cu; rung 0 there is cuDNN):
//   1 im2col+gemm   the plan above (conv2d_forward_cuda)
//   2 implicit-gemm the im2col gather done while loading GEMM tiles into shared memory (no workspace)
#pragma once

#include <cstdint>

#include "kernels/cpu/conv.h"
#include "kernels/cuda/cuda.h"

namespace bastion {

// 64 Mi floats (256 MiB) of workspace: ResNet18's first stage at batch 128 (P*(CRS + K) = 640 Ki floats per
// sample) runs in two chunks of 102 and 26 samples, GEMMs large enough to fill an H100, while the
// workspace stays a few percent of its memory. Tests pass a small cap to force several chunks.
inline constexpr int64_t kConvCudaMaxWorkspaceFloats = int64_t{1} << 26;

int64_t conv2d_cuda_chunk_samples(const Conv2dGeometry& g, int64_t max_workspace_floats = kConvCudaMaxWorkspaceFloats);
int64_t conv2d_cuda_workspace_floats(const Conv2dGeometry& g,
                                     int64_t max_workspace_floats = kConvCudaMaxWorkspaceFloats);

// max_workspace_floats must be the value the workspace was sized with.
void conv2d_forward_cuda(float* out, const float* in, const float* weight, const float* bias, const Conv2dGeometry& g,
                         float* workspace, CudaStream stream,
                         int64_t max_workspace_floats = kConvCudaMaxWorkspaceFloats);
void conv2d_backward_cuda(float* grad_in, float* grad_weight, float* grad_bias, const float* grad_out,
                          const float* in, const float* weight, const Conv2dGeometry& g, float* workspace,
                          CudaStream stream, int64_t max_workspace_floats = kConvCudaMaxWorkspaceFloats);

// Building blocks (same layouts as im2col_cpu / col2im_add_cpu; col2im ACCUMULATES into in_grad).
void im2col_cuda(float* cols, const float* in, const Conv2dGeometry& g, int64_t n_begin, int64_t n_count,
                 CudaStream stream);
void col2im_add_cuda(float* in_grad, const float* cols, const Conv2dGeometry& g, int64_t n_begin, int64_t n_count,
                     CudaStream stream);

// Forward rung 2 (implicit GEMM, no workspace) with a chosen block tile of (K rows) x (N*P columns);
// Auto picks the largest tile that still gives the GPU enough blocks. Tests sweep every tile.
enum class ConvTile { Auto, Tile128x128, Tile64x128, Tile64x64 };
void conv2d_forward_implicit_gemm_cuda(float* out, const float* in, const float* weight, const float* bias,
                                       const Conv2dGeometry& g, CudaStream stream, ConvTile tile = ConvTile::Auto);

int conv2d_forward_cuda_variant_count();
const char* conv2d_forward_cuda_variant_name(int variant);
// workspace: conv2d_cuda_workspace_floats(g) floats (variant 2 ignores it).
void conv2d_forward_cuda_variant(int variant, float* out, const float* in, const float* weight, const float* bias,
                                 const Conv2dGeometry& g, float* workspace, CudaStream stream);

}  // namespace bastion
