// Flat-vector ops on the GPU (contract: kernels/cuda/vector.h, which is kernels/cpu/vector.h on device
// pointers plus a stream).
//
// axpy, scale: grid-stride loops, float4 when the pointers are 16-byte aligned. nvcc contracts
// y + a * x into one FMA (the CPU may round a * x first), so axpy can differ from the CPU by an ulp.
// dot, norm, cosine, squared distance: one block; thread t sums the terms t, t + T, t + 2T, ... in
// double, then a fixed shuffle tree adds the threads' sums: deterministic, and equal to the CPU's
// sequential double sum up to double rounding (about D * 1e-16 relative to the sum of |terms|).
// The definitions are the CPU's: the products are formed in double, cosine is 0 when a vector is zero
// and is clamped to [-1, 1].
// pairwise distances: the CPU algorithm step by step (see vector.h): per block of kPairwiseBlockColumns
// columns, centre the rows on their mean (the mean summed in double over the rows in order, as on the
// CPU: bitwise the same centred rows), accumulate the Gram matrix with gemm_cuda (FP32, or TF32 when
// gemm_cuda_set_precision asks for it), then d(i, j) = G_ii + G_jj - 2 G_ij in double, clamped at 0,
// mirrored, diagonal 0.
// mean_rows: one thread per column sums the rows in order in double: bitwise the CPU's result.
#include <cstdint>

#include "kernels/cpu/vector.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/vector.h"

namespace bastion {

namespace {

constexpr int kThreads = 256;
// The reductions run in one block (fixed order, no second pass): more threads keep more loads in
// flight on the one SM they occupy.
constexpr int kReduceThreads = 512;


// ---- axpy, scale ----

// y[d] += a * x[d]: the first 4 * D4 elements as float4 (D4 = 0 when unaligned), then the rest.
__global__ void axpy_kernel(float* y, float a, const float* x, int64_t D, int64_t D4) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  float4* y4 = reinterpret_cast<float4*>(y);
  const float4* x4 = reinterpret_cast<const float4*>(x);
  for (int64_t i = first; i < D4; i += stride) {
    const float4 u = x4[i];
    float4 v = y4[i];
    v.x += a * u.x;
    v.y += a * u.y;
    v.z += a * u.z;
    v.w += a * u.w;
    y4[i] = v;
  }
  for (int64_t i = 4 * D4 + first; i < D; i += stride) y[i] += a * x[i];
}

__global__ void scale_kernel(float* x, float a, int64_t D, int64_t D4) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  float4* x4 = reinterpret_cast<float4*>(x);
  for (int64_t i = first; i < D4; i += stride) {
    float4 v = x4[i];
    v.x *= a;
    v.y *= a;
    v.z *= a;
    v.w *= a;
    x4[i] = v;
  }
  for (int64_t i = 4 * D4 + first; i < D; i += stride) x[i] *= a;
}

unsigned blocks_for(int64_t D, int64_t D4) { return cuda_grid_stride_blocks(D4 + (D - 4 * D4), kThreads); }

// ---- one-block reductions in double ----

// The terms of each reduction: add() accumulates element i into acc, finish() turns the block's sums
// into the result, with the CPU twin's definition.
struct DotTerms {
  static constexpr int kCount = 1;
  const float* a;
  const float* b;
  __device__ void add(double (&acc)[kCount], int64_t i) const { acc[0] += static_cast<double>(a[i]) * b[i]; }
  __device__ double finish(const double (&acc)[kCount]) const { return acc[0]; }
};

struct NormTerms {
  static constexpr int kCount = 1;
  const float* x;
  __device__ void add(double (&acc)[kCount], int64_t i) const { acc[0] += static_cast<double>(x[i]) * x[i]; }
  __device__ double finish(const double (&acc)[kCount]) const { return sqrt(acc[0]); }
};

struct CosineTerms {
  static constexpr int kCount = 3;  // a.b, a.a, b.b
  const float* a;
  const float* b;
  __device__ void add(double (&acc)[kCount], int64_t i) const {
    const double x = a[i], y = b[i];
    acc[0] += x * y;
    acc[1] += x * x;
    acc[2] += y * y;
  }
  __device__ double finish(const double (&acc)[kCount]) const {
    if (acc[1] == 0.0 || acc[2] == 0.0) return 0.0;  // a zero vector is unrelated to everything
    const double c = acc[0] / (sqrt(acc[1]) * sqrt(acc[2]));
    return c < -1.0 ? -1.0 : (c > 1.0 ? 1.0 : c);  // std::clamp's order: NaN stays NaN, as on the CPU
  }
};

struct SquaredDistanceTerms {
  static constexpr int kCount = 1;
  const float* a;
  const float* b;
  __device__ void add(double (&acc)[kCount], int64_t i) const {
    const double diff = static_cast<double>(a[i]) - b[i];
    acc[0] += diff * diff;
  }
  __device__ double finish(const double (&acc)[kCount]) const { return acc[0]; }
};

template <typename Terms>
__global__ void reduce_kernel(double* out, Terms terms, int64_t D) {
  double acc[Terms::kCount] = {};
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) terms.add(acc, i);
  cuda_block_sum(acc);
  if (threadIdx.x == 0) *out = terms.finish(acc);
}

template <typename Terms>
void launch_reduce(const char* name, double* out, Terms terms, int64_t D, CudaStream stream) {
  BASTION_CHECK(D >= 0, name, ": D = ", D, " must be >= 0");
  // D = 0 still launches: the result (0) must be written.
  cuda_launch(name, reduce_kernel<Terms>, dim3(1), dim3(kReduceThreads), stream, out, terms, D);
}

// ---- column means, pairwise distances ----

// (1/n) sum_i X[i * ld + d] summed in double over the rows in order: the CPU's mean_rows, bit for bit.
__device__ float column_mean(const float* X, int64_t n, int64_t ld, int64_t d) {
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += X[i * ld + d];
  return static_cast<float>(total / static_cast<double>(n));
}

__global__ void mean_rows_kernel(float* out, const float* X, int64_t n, int64_t D) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t d = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; d < D; d += stride)
    out[d] = column_mean(X, n, D, d);
}

// For the columns d0 .. d0 + width of X (n rows, stride ld): mean[d] = column mean, centred (n, width)
// = X - mean. One thread per column; neighbouring threads read neighbouring floats of a row.
__global__ void centre_columns_kernel(float* centred, float* mean, const float* X, int64_t n, int64_t ld,
                                      int64_t d0, int64_t width) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t d = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; d < width; d += stride) {
    const float m = column_mean(X + d0, n, ld, d);
    mean[d] = m;
    for (int64_t i = 0; i < n; ++i) centred[i * width + d] = X[i * ld + d0 + d] - m;
  }
}

// out holds the Gram matrix G; each pair i < j becomes max(G_ii + G_jj - 2 G_ij, 0) (in double, from the
// float G), written to (i, j) and (j, i). A thread reads only its own (i, j) and the diagonal, and writes
// only (i, j) and the never-read lower triangle, so no thread sees another's write.
__global__ void gram_to_distances_kernel(float* out, int64_t n) {
  const int64_t total = n * n;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total; k += stride) {
    const int64_t i = k / n, j = k % n;
    if (j <= i) continue;
    const double d = static_cast<double>(out[i * n + i]) + static_cast<double>(out[j * n + j]) -
                     2.0 * static_cast<double>(out[i * n + j]);
    const float clamped = static_cast<float>(d < 0.0 ? 0.0 : d);  // std::max(d, 0.0) as on the CPU
    out[i * n + j] = clamped;
    out[j * n + i] = clamped;
  }
}

// A separate launch, after every pair has read the diagonal.
__global__ void zero_diagonal_kernel(float* out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    out[i * n + i] = 0.0f;
}

}  // namespace

void vector_axpy_cuda(float* y, float a, const float* x, int64_t D, CudaStream stream) {
  if (D <= 0) return;
  const int64_t D4 = cuda_aligned16(y) && cuda_aligned16(x) ? D / 4 : 0;
  cuda_launch("vector_axpy_kernel", axpy_kernel, dim3(blocks_for(D, D4)), dim3(kThreads), stream, y, a, x, D, D4);
}

void vector_scale_cuda(float* x, float a, int64_t D, CudaStream stream) {
  if (D <= 0) return;
  const int64_t D4 = cuda_aligned16(x) ? D / 4 : 0;
  cuda_launch("vector_scale_kernel", scale_kernel, dim3(blocks_for(D, D4)), dim3(kThreads), stream, x, a, D, D4);
}

void vector_dot_cuda(double* out, const float* a, const float* b, int64_t D, CudaStream stream) {
  launch_reduce("vector_dot_kernel", out, DotTerms{a, b}, D, stream);
}

void vector_norm_cuda(double* out, const float* x, int64_t D, CudaStream stream) {
  launch_reduce("vector_norm_kernel", out, NormTerms{x}, D, stream);
}

void vector_cosine_cuda(double* out, const float* a, const float* b, int64_t D, CudaStream stream) {
  launch_reduce("vector_cosine_kernel", out, CosineTerms{a, b}, D, stream);
}

void vector_squared_distance_cuda(double* out, const float* a, const float* b, int64_t D, CudaStream stream) {
  launch_reduce("vector_squared_distance_kernel", out, SquaredDistanceTerms{a, b}, D, stream);
}

void vector_pairwise_squared_distances_cuda(float* out, float* workspace, const float* X, int64_t n, int64_t D,
                                            CudaStream stream) {
  BASTION_CHECK(n >= 0 && D >= 0, "vector_pairwise_squared_distances_cuda: n ", n, " and D ", D, " must be >= 0");
  if (n == 0) return;
  if (D == 0) {
    cuda_fill(out, 0.0f, n * n, stream);
    return;
  }
  // out = C C^T (Gram matrix of the centred rows), summed block by block; the workspace holds one
  // block's centred rows (n, width) and its mean row (width).
  for (int64_t d0 = 0; d0 < D; d0 += kPairwiseBlockColumns) {
    const int64_t width = D - d0 < kPairwiseBlockColumns ? D - d0 : kPairwiseBlockColumns;
    float* centred = workspace;
    float* mean = workspace + n * width;
    cuda_launch("vector_centre_columns_kernel", centre_columns_kernel, dim3(cuda_grid_stride_blocks(width, kThreads)),
                dim3(kThreads), stream, centred, mean, X, n, D, d0, width);
    gemm_cuda(false, true, n, n, width, 1.0f, centred, width, centred, width, d0 == 0 ? 0.0f : 1.0f, out, n, stream);
  }
  cuda_launch("vector_gram_to_distances_kernel", gram_to_distances_kernel,
              dim3(cuda_grid_stride_blocks(n * n, kThreads)), dim3(kThreads), stream, out, n);
  cuda_launch("vector_zero_diagonal_kernel", zero_diagonal_kernel, dim3(cuda_grid_stride_blocks(n, kThreads)),
              dim3(kThreads), stream, out, n);
}

void vector_mean_rows_cuda(float* out, const float* X, int64_t n, int64_t D, CudaStream stream) {
  BASTION_CHECK(n >= 1, "vector_mean_rows_cuda: needs at least one row, got n = ", n);
  if (D <= 0) return;
  cuda_launch("vector_mean_rows_kernel", mean_rows_kernel, dim3(cuda_grid_stride_blocks(D, kThreads)),
              dim3(kThreads), stream, out, X, n, D);
}

}  // namespace bastion
