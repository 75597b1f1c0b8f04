// Elementwise ops and reductions on the GPU (contract: kernels/cuda/elementwise.h, which is
// kernels/cpu/elementwise.h on device pointers plus a stream).
//
// add/sub/mul/scale/add_inplace: one grid-stride loop, float4 loads and stores over the first 4*(n/4)
// elements when every pointer is 16-byte aligned (the caching allocator's blocks are; a view at an odd
// offset is not), then a scalar loop over the rest (everything when unaligned). Each output is one
// correctly rounded float operation, as on the CPU: results are bitwise equal to the CPU twin.
// sum_cuda: one block, each thread sums a strided subset in double in index order, then a fixed
// shuffle tree: the same bits on every run, and the float result differs from sum_cpu only in the
// rounding of the double sum.
// sum_rows_cuda: one thread per column sums the rows in order in double (the CPU twin sums in float).
#include <cstdint>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.h"

namespace bastion {

namespace {

constexpr int kThreads = 256;
// sum_cuda runs in one block: more threads keep more loads in flight on the one SM it occupies.
constexpr int kSumThreads = 512;


// Float4 chunks a vectorised loop may take: n/4 when every pointer is 16-byte aligned, else 0 (the
// scalar tail loop then covers everything).
int64_t vector_chunks(int64_t n, bool aligned) { return aligned ? n / 4 : 0; }

// Blocks for a loop of n4 float4 chunks followed by n - 4*n4 scalars.
unsigned blocks_for(int64_t n, int64_t n4) { return cuda_grid_stride_blocks(n4 + (n - 4 * n4), kThreads); }

// kReadsB = false: the op ignores its second operand, and the kernel does not load it.
struct AddOp {
  static constexpr bool kReadsB = true;
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct SubOp {
  static constexpr bool kReadsB = true;
  __device__ float operator()(float a, float b) const { return a - b; }
};
struct MulOp {
  static constexpr bool kReadsB = true;
  __device__ float operator()(float a, float b) const { return a * b; }
};
struct ScaleOp {
  static constexpr bool kReadsB = false;
  float alpha;
  __device__ float operator()(float a, float) const { return alpha * a; }
};

// out[i] = op(a[i], b[i]); out may alias a or b (each element is read before it is written, by the
// same thread). n4: float4 chunks to take first (0 when a pointer is not 16-byte aligned).
template <typename Op>
__global__ void binary_kernel(float* out, const float* a, const float* b, int64_t n, int64_t n4, Op op) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  float4* out4 = reinterpret_cast<float4*>(out);
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  for (int64_t i = first; i < n4; i += stride) {
    const float4 x = a4[i], y = Op::kReadsB ? b4[i] : x;
    out4[i] = make_float4(op(x.x, y.x), op(x.y, y.y), op(x.z, y.z), op(x.w, y.w));
  }
  for (int64_t i = 4 * n4 + first; i < n; i += stride) out[i] = op(a[i], Op::kReadsB ? b[i] : 0.0f);
}

template <typename Op>
void launch_binary(const char* name, float* out, const float* a, const float* b, int64_t n, Op op,
                   CudaStream stream) {
  if (n <= 0) return;
  const int64_t n4 = vector_chunks(n, cuda_aligned16(out) && cuda_aligned16(a) && cuda_aligned16(b));
  cuda_launch(name, binary_kernel<Op>, dim3(blocks_for(n, n4)), dim3(kThreads), stream, out, a, b, n, n4, op);
}

__global__ void sum_kernel(float* out, const float* in, int64_t n) {
  double partial = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) partial += in[i];
  double total[1] = {partial};
  cuda_block_sum(total);
  if (threadIdx.x == 0) *out = static_cast<float>(total[0]);
}

// out[r, c] += bias[c] over the flattened (rows, cols) matrix.
__global__ void add_row_bias_kernel(float* out, const float* bias, int64_t rows, int64_t cols) {
  const int64_t total = rows * cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total; i += stride)
    out[i] += bias[i % cols];
}

// grad_bias[c] = sum_r grad[r, c], rows in order; neighbouring threads read neighbouring columns.
__global__ void sum_rows_kernel(float* grad_bias, const float* grad, int64_t rows, int64_t cols) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < cols; c += stride) {
    double total = 0.0;
    for (int64_t r = 0; r < rows; ++r) total += grad[r * cols + c];
    grad_bias[c] = static_cast<float>(total);
  }
}

// out[i] = (factor * *alpha) * in[i]: the scalar is read once per thread, after the kernel that wrote
// it (stream order), without a copy to the host.
__global__ void scale_by_device_scalar_kernel(float* out, const float* in, const float* alpha, float factor,
                                              int64_t n, int64_t n4) {
  const float s = factor * *alpha;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  float4* out4 = reinterpret_cast<float4*>(out);
  const float4* in4 = reinterpret_cast<const float4*>(in);
  for (int64_t i = first; i < n4; i += stride) {
    const float4 x = in4[i];
    out4[i] = make_float4(s * x.x, s * x.y, s * x.z, s * x.w);
  }
  for (int64_t i = 4 * n4 + first; i < n; i += stride) out[i] = s * in[i];
}

}  // namespace

void add_cuda(float* out, const float* a, const float* b, int64_t n, CudaStream stream) {
  launch_binary("add_kernel", out, a, b, n, AddOp{}, stream);
}

void sub_cuda(float* out, const float* a, const float* b, int64_t n, CudaStream stream) {
  launch_binary("sub_kernel", out, a, b, n, SubOp{}, stream);
}

void mul_cuda(float* out, const float* a, const float* b, int64_t n, CudaStream stream) {
  launch_binary("mul_kernel", out, a, b, n, MulOp{}, stream);
}

void scale_cuda(float* out, const float* in, float alpha, int64_t n, CudaStream stream) {
  launch_binary("scale_kernel", out, in, in, n, ScaleOp{alpha}, stream);  // b = in is never loaded
}

void add_inplace_cuda(float* dst, const float* src, int64_t n, CudaStream stream) {
  launch_binary("add_inplace_kernel", dst, dst, src, n, AddOp{}, stream);
}

void sum_cuda(float* out, const float* in, int64_t n, CudaStream stream) {
  // n = 0 still launches: the empty sum is 0 and must be written.
  cuda_launch("sum_kernel", sum_kernel, dim3(1), dim3(kSumThreads), stream, out, in, n);
}

void add_row_bias_cuda(float* out, const float* bias, int64_t rows, int64_t cols, CudaStream stream) {
  if (rows <= 0 || cols <= 0) return;
  cuda_launch("add_row_bias_kernel", add_row_bias_kernel, dim3(cuda_grid_stride_blocks(rows * cols, kThreads)),
              dim3(kThreads), stream, out, bias, rows, cols);
}

void sum_rows_cuda(float* grad_bias, const float* grad, int64_t rows, int64_t cols, CudaStream stream) {
  if (cols <= 0) return;  // rows = 0 still runs: the columns of an empty matrix sum to 0
  cuda_launch("sum_rows_kernel", sum_rows_kernel, dim3(cuda_grid_stride_blocks(cols, kThreads)), dim3(kThreads),
              stream, grad_bias, grad, rows, cols);
}

void scale_by_device_scalar_cuda(float* out, const float* in, const float* alpha, float factor, int64_t n,
                                 CudaStream stream) {
  if (n <= 0) return;
  const int64_t n4 = vector_chunks(n, cuda_aligned16(out) && cuda_aligned16(in));
  cuda_launch("scale_by_device_scalar_kernel", scale_by_device_scalar_kernel, dim3(blocks_for(n, n4)),
              dim3(kThreads), stream, out, in, alpha, factor, n, n4);
}

}  // namespace bastion
