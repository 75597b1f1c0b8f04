// Pooling on the GPU (contract: kernels/cuda/pool.h, math: kernels/cpu/pool.h). Forward: one thread per
// output element. Backward: one thread per input element, summing over the windows that contain it in
// the (oh, ow) order the CPU adds them, so no atomics and the same result on every run. Global average
// pooling: one warp per plane.
#include "kernels/cuda/pool.h"

#include <climits>

#include "kernels/cuda/launch.h"

namespace bastion {

namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;

// The geometry as 32-bit ints inside a plane (checked on the host), planes counted in 64 bits.
struct PoolDims {
  int64_t planes;
  int H, W, kernel, stride, padding, OH, OW;
};

PoolDims device_dims(const Pool2dGeometry& g) {
  BASTION_CHECK(g.H * g.W <= INT_MAX && g.OH * g.OW <= INT_MAX, "pool2d_cuda: plane ", g.H, "x", g.W,
                " exceeds 32-bit indexing");
  return {g.planes,
          static_cast<int>(g.H),
          static_cast<int>(g.W),
          static_cast<int>(g.kernel),
          static_cast<int>(g.stride),
          static_cast<int>(g.padding),
          static_cast<int>(g.OH),
          static_cast<int>(g.OW)};
}

// Window [lo, hi) along one axis of output index o, clipped to [0, size).
__device__ __forceinline__ void window_along(int o, int stride, int padding, int kernel, int size, int* lo, int* hi) {
  const int start = o * stride - padding;
  *lo = max(start, 0);
  *hi = min(start + kernel, size);
}

// Outputs along one axis whose window contains input index i: [lo, hi).
__device__ __forceinline__ void outputs_containing(int i, int stride, int padding, int kernel, int outputs, int* lo,
                                                   int* hi) {
  // o * stride - padding <= i  and  i < o * stride - padding + kernel
  const int first = i + padding - kernel + 1;  // o * stride >= first
  *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  *hi = min((i + padding) / stride + 1, outputs);
}

// Position in the plane of the first maximum of output (oh, ow)'s window (row-major, strict >).
__device__ int argmax_in_window(const float* plane, const PoolDims& d, int oh, int ow) {
  int h0, h1, w0, w1;
  window_along(oh, d.stride, d.padding, d.kernel, d.H, &h0, &h1);
  window_along(ow, d.stride, d.padding, d.kernel, d.W, &w0, &w1);
  int best = h0 * d.W + w0;
  float best_value = plane[best];
  for (int h = h0; h < h1; ++h)
    for (int w = w0; w < w1; ++w)
      if (plane[h * d.W + w] > best_value) {
        best = h * d.W + w;
        best_value = plane[best];
      }
  return best;
}

__global__ void max_pool_forward_kernel(float* out, const float* in, PoolDims d) {
  const int out_plane = d.OH * d.OW;
  const int64_t total = d.planes * out_plane, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total; i += stride) {
    const int64_t plane = i / out_plane;
    const int q = static_cast<int>(i - plane * out_plane), oh = q / d.OW, ow = q - oh * d.OW;
    const float* src = in + plane * d.H * d.W;
    out[i] = src[argmax_in_window(src, d, oh, ow)];
  }
}

__global__ void max_pool_backward_kernel(float* grad_in, const float* grad_out, const float* in, PoolDims d) {
  const int in_plane = d.H * d.W, out_plane = d.OH * d.OW;
  const int64_t total = d.planes * in_plane, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total; i += stride) {
    const int64_t plane = i / in_plane;
    const int position = static_cast<int>(i - plane * in_plane), h = position / d.W, w = position - h * d.W;
    const float* src = in + plane * in_plane;
    const float* dy = grad_out + plane * out_plane;
    int oh0, oh1, ow0, ow1;
    outputs_containing(h, d.stride, d.padding, d.kernel, d.OH, &oh0, &oh1);
    outputs_containing(w, d.stride, d.padding, d.kernel, d.OW, &ow0, &ow1);
    float total_grad = 0.0f;
    for (int oh = oh0; oh < oh1; ++oh)
      for (int ow = ow0; ow < ow1; ++ow)
        if (argmax_in_window(src, d, oh, ow) == position) total_grad += dy[oh * d.OW + ow];
    grad_in[i] = total_grad;
  }
}

// Sum over the clipped window in row-major order (padding adds zeros), times 1 / kernel^2.
__global__ void avg_pool_forward_kernel(float* out, const float* in, PoolDims d, float inv_area) {
  const int out_plane = d.OH * d.OW;
  const int64_t total = d.planes * out_plane, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total; i += stride) {
    const int64_t plane = i / out_plane;
    const int q = static_cast<int>(i - plane * out_plane), oh = q / d.OW, ow = q - oh * d.OW;
    const float* src = in + plane * d.H * d.W;
    int h0, h1, w0, w1;
    window_along(oh, d.stride, d.padding, d.kernel, d.H, &h0, &h1);
    window_along(ow, d.stride, d.padding, d.kernel, d.W, &w0, &w1);
    float window_sum = 0.0f;
    for (int h = h0; h < h1; ++h)
      for (int w = w0; w < w1; ++w) window_sum += src[h * d.W + w];
    out[i] = window_sum * inv_area;
  }
}

__global__ void avg_pool_backward_kernel(float* grad_in, const float* grad_out, PoolDims d, float inv_area) {
  const int in_plane = d.H * d.W, out_plane = d.OH * d.OW;
  const int64_t total = d.planes * in_plane, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total; i += stride) {
    const int64_t plane = i / in_plane;
    const int position = static_cast<int>(i - plane * in_plane), h = position / d.W, w = position - h * d.W;
    const float* dy = grad_out + plane * out_plane;
    int oh0, oh1, ow0, ow1;
    outputs_containing(h, d.stride, d.padding, d.kernel, d.OH, &oh0, &oh1);
    outputs_containing(w, d.stride, d.padding, d.kernel, d.OW, &ow0, &ow1);
    float total_grad = 0.0f;
    for (int oh = oh0; oh < oh1; ++oh)
      for (int ow = ow0; ow < ow1; ++ow) total_grad += dy[oh * d.OW + ow] * inv_area;
    grad_in[i] = total_grad;
  }
}

// One warp per plane: lanes sum a strided subset, then a fixed shuffle tree (deterministic). The plane
// loop is uniform across the warp, so every lane reaches every shuffle.
__global__ void global_avg_pool_forward_kernel(float* out, const float* in, int64_t planes, int64_t plane_size,
                                               float inv_size) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t plane = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32; plane < planes;
       plane += warps) {
    const float* src = in + plane * plane_size;
    float total = 0.0f;
    for (int64_t i = lane; i < plane_size; i += 32) total += src[i];
    for (int offset = 16; offset > 0; offset /= 2) total += __shfl_down_sync(0xffffffffu, total, offset);
    if (lane == 0) out[plane] = total * inv_size;
  }
}

__global__ void global_avg_pool_backward_kernel(float* grad_in, const float* grad_out, int64_t planes,
                                                int64_t plane_size, float inv_size) {
  const int64_t total = planes * plane_size, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total; i += stride)
    grad_in[i] = grad_out[i / plane_size] * inv_size;
}

dim3 grid_for(int64_t items) { return dim3(cuda_grid_stride_blocks(items, kThreads)); }

float inverse_area(const Pool2dGeometry& g) { return 1.0f / static_cast<float>(g.kernel * g.kernel); }

}  // namespace

void max_pool2d_forward_cuda(float* out, const float* in, const Pool2dGeometry& g, CudaStream stream) {
  const int64_t total = g.planes * g.OH * g.OW;
  if (total == 0) return;
  cuda_launch("max_pool_forward_kernel", max_pool_forward_kernel, grid_for(total), dim3(kThreads), stream, out, in,
              device_dims(g));
}

void max_pool2d_backward_cuda(float* grad_in, const float* grad_out, const float* in, const Pool2dGeometry& g,
                              CudaStream stream) {
  const int64_t total = g.planes * g.H * g.W;
  if (total == 0) return;
  cuda_launch("max_pool_backward_kernel", max_pool_backward_kernel, grid_for(total), dim3(kThreads), stream, grad_in,
              grad_out, in, device_dims(g));
}

void avg_pool2d_forward_cuda(float* out, const float* in, const Pool2dGeometry& g, CudaStream stream) {
  const int64_t total = g.planes * g.OH * g.OW;
  if (total == 0) return;
  cuda_launch("avg_pool_forward_kernel", avg_pool_forward_kernel, grid_for(total), dim3(kThreads), stream, out, in,
              device_dims(g), inverse_area(g));
}

void avg_pool2d_backward_cuda(float* grad_in, const float* grad_out, const Pool2dGeometry& g, CudaStream stream) {
  const int64_t total = g.planes * g.H * g.W;
  if (total == 0) return;
  cuda_launch("avg_pool_backward_kernel", avg_pool_backward_kernel, grid_for(total), dim3(kThreads), stream, grad_in,
              grad_out, device_dims(g), inverse_area(g));
}

void global_avg_pool_forward_cuda(float* out, const float* in, int64_t planes, int64_t plane_size, CudaStream stream) {
  if (planes == 0) return;
  // One warp (32 threads) per plane: as many blocks as planes / kWarpsPerBlock, capped for a grid stride.
  cuda_launch("global_avg_pool_forward_kernel", global_avg_pool_forward_kernel, grid_for(planes * 32), dim3(kThreads),
              stream, out, in, planes, plane_size, 1.0f / static_cast<float>(plane_size));
}

void global_avg_pool_backward_cuda(float* grad_in, const float* grad_out, int64_t planes, int64_t plane_size,
                                   CudaStream stream) {
  const int64_t total = planes * plane_size;
  if (total == 0) return;
  cuda_launch("global_avg_pool_backward_kernel", global_avg_pool_backward_kernel, grid_for(total), dim3(kThreads),
              stream, grad_in, grad_out, planes, plane_size, 1.0f / static_cast<float>(plane_size));
}

}  // namespace bastion
