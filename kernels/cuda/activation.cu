// ReLU and dropout on the GPU (contract: kernels/cuda/activation.h, math: kernels/cpu/activation.h).
// All four are element-wise maps out[i] = op(a[i], b[i]) over n floats, so one grid-stride kernel
// template serves them, parameterised by a small functor. When every pointer is 16-byte aligned the
// map reads and writes float4 (one 16-byte access per thread per array, the memory-bound habit) and the
// last n % 4 elements are done one by one; otherwise (a view that starts mid-vector) a scalar kernel.
// Each functor is the CPU twin's expression, so the results are bitwise equal.
#include <cstdint>

#include "kernels/cuda/activation.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.h"

namespace bastion {

namespace {

constexpr int kThreads = 256;

struct ReluForward {  // a = in
  __device__ float operator()(float in, float) const { return in > 0.0f ? in : 0.0f; }
};
struct ReluBackward {  // a = grad_out, b = out (the saved output, not the input)
  __device__ float operator()(float grad_out, float out) const { return out > 0.0f ? grad_out : 0.0f; }
};
struct DropoutMask {  // a = uniform draw in [0, 1)
  float p, keep_scale;
  __device__ float operator()(float uniform01, float) const { return uniform01 >= p ? keep_scale : 0.0f; }
};
struct DropoutBackward {  // a = grad_out, b = mask
  __device__ float operator()(float grad_out, float mask) const { return grad_out * mask; }
};

// b may be null for the one-input maps (the functor ignores its second argument).
template <typename Op>
__device__ __forceinline__ float apply_op(Op op, const float* a, const float* b, int64_t i) {
  return op(a[i], b != nullptr ? b[i] : 0.0f);
}

template <typename Op>
__global__ void map_kernel(float* out, const float* a, const float* b, Op op, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = apply_op(op, a, b, i);
}

// out, a and b (when present) are 16-byte aligned. Vectors 0 .. n/4-1 by grid stride; the first n % 4
// threads of the grid then take the tail.
template <typename Op>
__global__ void map_vec4_kernel(float* out, const float* a, const float* b, Op op, int64_t n) {
  const int64_t vectors = n / 4, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  float4* out4 = reinterpret_cast<float4*>(out);
  for (int64_t v = first; v < vectors; v += stride) {
    const float4 x = a4[v];
    const float4 y = b != nullptr ? b4[v] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    out4[v] = make_float4(op(x.x, y.x), op(x.y, y.y), op(x.z, y.z), op(x.w, y.w));
  }
  const int64_t tail = vectors * 4 + first;
  if (tail < n) out[tail] = apply_op(op, a, b, tail);
}


template <typename Op>
void launch_map(const char* name, float* out, const float* a, const float* b, Op op, int64_t n, CudaStream stream) {
  if (n == 0) return;
  if (cuda_aligned16(out) && cuda_aligned16(a) && (b == nullptr || cuda_aligned16(b))) {
    cuda_launch(name, map_vec4_kernel<Op>, dim3(cuda_grid_stride_blocks(n / 4, kThreads)), dim3(kThreads), stream, out,
                a, b, op, n);
  } else {
    cuda_launch(name, map_kernel<Op>, dim3(cuda_grid_stride_blocks(n, kThreads)), dim3(kThreads), stream, out, a, b, op,
                n);
  }
}

}  // namespace

void relu_forward_cuda(float* out, const float* in, int64_t n, CudaStream stream) {
  launch_map("relu_forward", out, in, nullptr, ReluForward{}, n, stream);
}

void relu_backward_cuda(float* grad_in, const float* grad_out, const float* out, int64_t n, CudaStream stream) {
  launch_map("relu_backward", grad_in, grad_out, out, ReluBackward{}, n, stream);
}

void dropout_mask_cuda(float* mask, const float* uniform01, float p, int64_t n, CudaStream stream) {
  const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;  // computed as dropout_mask_cpu does
  launch_map("dropout_mask", mask, uniform01, nullptr, DropoutMask{p, keep_scale}, n, stream);
}

void dropout_backward_cuda(float* grad_in, const float* grad_out, const float* mask, int64_t n, CudaStream stream) {
  launch_map("dropout_backward", grad_in, grad_out, mask, DropoutBackward{}, n, stream);
}

}  // namespace bastion
