// pool: 2-D pooling over NCHW planes (planes = N*C, each H x W -> OH x OW).
// OH = (H + 2*pad - kernel) / stride + 1 (floor, PyTorch's ceil_mode=False).
// max_pool2d_forward:  out = max over the window (padding never wins: it counts as -inf).
//   PyTorch: F.max_pool2d(x, kernel, stride, padding)
// max_pool2d_backward: ASSIGNS grad_in; each output's gradient goes to the FIRST maximum of its window
//   in row-major order, recomputed from the saved input (no index buffer to keep).
// avg_pool2d_forward:  out = sum over the window / (kernel*kernel), padding counts as zeros
//   (PyTorch's default count_include_pad=True).   PyTorch: F.avg_pool2d(x, kernel, stride, padding)
// avg_pool2d_backward: ASSIGNS grad_in.
// global_avg_pool_forward: (N, C, H, W) -> (N, C), out = mean over H*W.  PyTorch: AdaptiveAvgPool2d(1)+flatten
// global_avg_pool_backward: ASSIGNS grad_in = grad_out / (H*W) broadcast over the plane.
#pragma once

#include <cstdint>

namespace bastion {

struct Pool2dGeometry {
  int64_t planes, H, W;
  int64_t kernel, stride, padding;
  int64_t OH, OW;
};

Pool2dGeometry pool2d_geometry(int64_t planes, int64_t H, int64_t W, int64_t kernel, int64_t stride, int64_t padding);

void max_pool2d_forward_cpu(float* out, const float* in, const Pool2dGeometry& g);
void max_pool2d_backward_cpu(float* grad_in, const float* grad_out, const float* in, const Pool2dGeometry& g);
// The 2x2 / stride 2 backward with pool_avx2.cpp's row, which max_pool2d_backward_cpu runs on CPUs with AVX2
// but a build without AVX-512; exposed so the tests run it on every CPU with AVX2 and FMA (else it throws).
void max_pool2d_backward_avx2_cpu(float* grad_in, const float* grad_out, const float* in, const Pool2dGeometry& g);
void avg_pool2d_forward_cpu(float* out, const float* in, const Pool2dGeometry& g);
void avg_pool2d_backward_cpu(float* grad_in, const float* grad_out, const Pool2dGeometry& g);
void global_avg_pool_forward_cpu(float* out, const float* in, int64_t planes, int64_t plane_size);
void global_avg_pool_backward_cpu(float* grad_in, const float* grad_out, int64_t planes, int64_t plane_size);

}  // namespace bastion
