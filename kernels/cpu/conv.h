// conv2d: out[n, k, oh, ow] = bias[k] + sum_{c, r, s} weight[k, c, r, s] * in[n, c, oh*st - pad + r, ow*st - pad + s]
// in: (N, C, H, W); weight: (K, C, R, S); bias: (K) or null; out: (N, K, OH, OW), all NCHW float32.
// OH = (H + 2*pad - R) / stride + 1 (floor), likewise OW. Zero padding, groups = 1, dilation = 1.
// PyTorch equivalent: F.conv2d(x, w, b, stride, padding)
//
// Fast path (conv2d_forward_cpu / conv2d_backward_cpu): im2col over a chunk of samples, then ONE GEMM
// per chunk, so OpenBLAS sees large matrices even for LeNet's 6-channel layers:
//   cols (CRS, nb*P) = im2col(in[chunk]);  tmp (K, nb*P) = weight (K, CRS) @ cols;  out = scatter(tmp) + bias
//   backward: dYt (K, nb*P) = gather(grad_out); grad_weight += dYt @ cols^T; dcols = weight^T @ dYt;
//             grad_in = col2im(dcols)
// A chunk holds as many samples as keep cols under kConvMaxColumnFloats, which bounds the workspace
// (ResNet18 at batch 128 would otherwise need 300 MB of columns in its first stage).
// The caller provides `workspace` of conv2d_workspace_floats(g) floats; kernels never allocate.
// Backward ASSIGNS grad_weight, grad_bias and grad_in; pass null for any that is not needed (the
// first layer's grad_in is skipped, which saves its col2im and one GEMM).
//
// Reference path (conv2d_forward_reference_cpu): seven plain loops, for tests only.
#pragma once

#include <cstdint>

namespace bastion {

struct Conv2dGeometry {
  int64_t N, C, H, W;  // input
  int64_t K, R, S;     // filters
  int64_t stride, padding;
  int64_t OH, OW;  // output

  int64_t crs() const { return C * R * S; }
  int64_t out_plane() const { return OH * OW; }
};

Conv2dGeometry conv2d_geometry(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t S,
                               int64_t stride, int64_t padding);
int64_t conv2d_chunk_samples(const Conv2dGeometry& g);
int64_t conv2d_workspace_floats(const Conv2dGeometry& g);

void conv2d_forward_cpu(float* out, const float* in, const float* weight, const float* bias, const Conv2dGeometry& g,
                        float* workspace);
// workspace_holds_cols: the workspace still holds the columns of the forward pass (possible only when
// the whole batch is one chunk, conv2d_chunk_samples(g) >= N), so the backward skips its im2col.
void conv2d_backward_cpu(float* grad_in, float* grad_weight, float* grad_bias, const float* grad_out, const float* in,
                         const float* weight, const Conv2dGeometry& g, float* workspace,
                         bool workspace_holds_cols = false);

// grad_weight alone (ASSIGNED) by columns, for conv_blocked's stride-2 layers on AVX2. The batch runs in
// chunks of `chunk` samples (>= 1, the caller's choice); grad_weight's columns in panels of 16 input
// channels (their C R S columns) split over `threads` OpenMP threads in fixed ranges. Each thread walks
// the chunks with its own copy of the chunk's grad_out rows and of its panel's columns, one single-threaded
// NT GEMM per chunk and panel: one parallel region, no barrier. workspace:
// conv2d_backward_weight_workspace_floats(g, chunk, threads). Bits depend on the chunk (the sum over
// samples is split at chunk boundaries), never on the thread count.
void conv2d_backward_weight_cpu(float* grad_weight, const float* grad_out, const float* in, const Conv2dGeometry& g,
                                int64_t chunk, float* workspace, int threads);
int64_t conv2d_backward_weight_workspace_floats(const Conv2dGeometry& g, int64_t chunk, int threads);

// grad_bias[k] = sum over n, oh, ow of grad_out (ASSIGNED; summed in double, one thread per channel).
void conv2d_backward_bias_cpu(float* grad_bias, const float* grad_out, const Conv2dGeometry& g);

void conv2d_forward_reference_cpu(float* out, const float* in, const float* weight, const float* bias,
                                  const Conv2dGeometry& g);

// Building blocks, exposed for tests and benchmarks.
void im2col_cpu(float* cols, const float* in, const Conv2dGeometry& g, int64_t n_begin, int64_t n_count);
void col2im_add_cpu(float* in_grad, const float* cols, const Conv2dGeometry& g, int64_t n_begin, int64_t n_count);

}  // namespace bastion
