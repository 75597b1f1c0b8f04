#include "kernels/cpu/vector.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/gemm.h"
#include "tensor/error.h"

namespace bastion {

namespace {
// Columns summed at a time by mean_rows: 512 doubles = 4 KiB of accumulators on the stack, which stay
// in L1 while the rows stream through.
constexpr int64_t kMeanBlock = 512;

// out[d] = mean over the n rows (stride ld) of X[i, d] for d < width, summed in double.
void mean_rows(float* out, const float* X, int64_t n, int64_t ld, int64_t width) {
  double acc[kMeanBlock];
  for (int64_t b0 = 0; b0 < width; b0 += kMeanBlock) {
    const int64_t w = std::min(kMeanBlock, width - b0);
    std::fill_n(acc, w, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const float* row = X + i * ld + b0;
      for (int64_t d = 0; d < w; ++d) acc[d] += row[d];
    }
    for (int64_t d = 0; d < w; ++d) out[b0 + d] = static_cast<float>(acc[d] / static_cast<double>(n));
  }
}
}  // namespace

void vector_axpy_cpu(float* y, float a, const float* x, int64_t D) {
  for (int64_t d = 0; d < D; ++d) y[d] += a * x[d];
}

void vector_scale_cpu(float* x, float a, int64_t D) {
  for (int64_t d = 0; d < D; ++d) x[d] *= a;
}

double vector_dot_cpu(const float* a, const float* b, int64_t D) {
  double total = 0.0;
  for (int64_t d = 0; d < D; ++d) total += static_cast<double>(a[d]) * b[d];
  return total;
}

namespace {
// Element i of x goes to lanes[(shift + i) mod kNormLanes] and, with kPart, to part[i mod kNormLanes]. The
// lanes are held rotated in a local array (element i meets its index i mod kNormLanes), which the compiler
// can keep in registers.
template <bool kPart>
void add_squares(double* lanes, double* part, const float* x, int64_t D, int64_t shift) {
  double mine[kNormLanes], own[kNormLanes] = {};
  for (int64_t j = 0; j < kNormLanes; ++j) mine[j] = lanes[(shift + j) % kNormLanes];
  int64_t d = 0;
  for (; d + kNormLanes <= D; d += kNormLanes)
    for (int64_t j = 0; j < kNormLanes; ++j) {
      const double square = static_cast<double>(x[d + j]) * x[d + j];  // exact: 48 bits of product
      mine[j] += square;
      if (kPart) own[j] += square;
    }
  for (int64_t j = 0; d + j < D; ++j) {
    const double square = static_cast<double>(x[d + j]) * x[d + j];
    mine[j] += square;
    if (kPart) own[j] += square;
  }
  for (int64_t j = 0; j < kNormLanes; ++j) lanes[(shift + j) % kNormLanes] = mine[j];
  if (kPart) std::copy_n(own, kNormLanes, part);
}
}  // namespace

void vector_squared_norm_lanes_cpu(double* lanes, double* part, const float* x, int64_t D, int64_t first) {
  if (part)
    add_squares<true>(lanes, part, x, D, first % kNormLanes);
  else
    add_squares<false>(lanes, nullptr, x, D, first % kNormLanes);
}

double vector_reduce_norm_lanes(double* lanes) {
  for (int64_t width = kNormLanes / 2; width > 0; width /= 2)  // pairwise: lane j += lane j + width
    for (int64_t j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  return lanes[0];
}

double vector_squared_norm_cpu(const float* x, int64_t D) {
  double lanes[kNormLanes] = {};
  vector_squared_norm_lanes_cpu(lanes, nullptr, x, D, 0);
  return vector_reduce_norm_lanes(lanes);
}

double vector_squared_norm_parts_cpu(double* parts, const float* x, const int64_t* offsets, int64_t n_parts) {
  double lanes[kNormLanes] = {};
  for (int64_t k = 0; k < n_parts; ++k) {
    double part[kNormLanes];
    vector_squared_norm_lanes_cpu(lanes, part, x + offsets[k], offsets[k + 1] - offsets[k], offsets[k]);
    parts[k] = vector_reduce_norm_lanes(part);
  }
  return vector_reduce_norm_lanes(lanes);
}

double vector_norm_cpu(const float* x, int64_t D) { return std::sqrt(vector_squared_norm_cpu(x, D)); }

double vector_cosine_cpu(const float* a, const float* b, int64_t D) {
  double ab = 0.0, aa = 0.0, bb = 0.0;
  for (int64_t d = 0; d < D; ++d) {
    const double x = a[d], y = b[d];
    ab += x * y;
    aa += x * x;
    bb += y * y;
  }
  if (aa == 0.0 || bb == 0.0) return 0.0;
  return std::clamp(ab / (std::sqrt(aa) * std::sqrt(bb)), -1.0, 1.0);
}

double vector_squared_distance_cpu(const float* a, const float* b, int64_t D) {
  double total = 0.0;
  for (int64_t d = 0; d < D; ++d) {
    const double diff = static_cast<double>(a[d]) - b[d];
    total += diff * diff;
  }
  return total;
}

int64_t vector_pairwise_workspace_floats(int64_t n, int64_t D) { return (n + 1) * std::min(D, kPairwiseBlockColumns); }

void vector_pairwise_squared_distances_cpu(float* out, float* workspace, const float* X, int64_t n, int64_t D) {
  vector_pairwise_squared_distances_strided_cpu(out, workspace, X, n, D, D);
}

void vector_pairwise_squared_distances_strided_cpu(float* out, float* workspace, const float* X, int64_t n, int64_t D,
                                                   int64_t ld) {
  BASTION_CHECK(n >= 0 && D >= 0, "vector_pairwise_squared_distances: n ", n, " and D ", D, " must be >= 0");
  BASTION_CHECK(ld >= D, "vector_pairwise_squared_distances: row stride ", ld, " < D = ", D);
  if (n == 0) return;
  if (D == 0) {
    std::fill_n(out, n * n, 0.0f);
    return;
  }
  // out = C C^T (Gram matrix of the centred rows), summed block by block; only its upper triangle and
  // diagonal are read below.
  for (int64_t d0 = 0; d0 < D; d0 += kPairwiseBlockColumns) {
    const int64_t width = std::min(kPairwiseBlockColumns, D - d0);
    float* centred = workspace;           // (n, width)
    float* mean = workspace + n * width;  // (width)
    mean_rows(mean, X + d0, n, ld, width);
    for (int64_t i = 0; i < n; ++i) {
      const float* row = X + i * ld + d0;
      float* dst = centred + i * width;
      for (int64_t d = 0; d < width; ++d) dst[d] = row[d] - mean[d];
    }
    gemm_cpu(false, true, n, n, width, 1.0f, centred, width, centred, width, d0 == 0 ? 0.0f : 1.0f, out, n);
  }
  for (int64_t i = 0; i < n; ++i) {
    const double norm_i = out[i * n + i];
    for (int64_t j = i + 1; j < n; ++j) {
      const double d = norm_i + static_cast<double>(out[j * n + j]) - 2.0 * static_cast<double>(out[i * n + j]);
      const float clamped = static_cast<float>(std::max(d, 0.0));
      out[i * n + j] = clamped;
      out[j * n + i] = clamped;  // the lower triangle is never read, so mirroring here is safe
    }
  }
  for (int64_t i = 0; i < n; ++i) out[i * n + i] = 0.0f;
}

void vector_mean_rows_cpu(float* out, const float* X, int64_t n, int64_t D) {
  BASTION_CHECK(n >= 1, "vector_mean_rows: needs at least one row, got n = ", n);
  mean_rows(out, X, n, D, D);
}

}  // namespace bastion
