#include "kernels/cpu/vector.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/gemm.h"
#include "tensor/error.h"

namespace bastion {

namespace {
// Columns summed per block by vector_mean_rows_cpu: 512 doubles = 4 KiB of accumulators on the stack,
// which stay in L1 while the rows stream through.
constexpr int64_t kMeanBlock = 512;
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

double vector_norm_cpu(const float* x, int64_t D) {
  double total = 0.0;
  for (int64_t d = 0; d < D; ++d) total += static_cast<double>(x[d]) * x[d];
  return std::sqrt(total);
}

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

void vector_pairwise_squared_distances_cpu(float* out, const float* X, int64_t n, int64_t D) {
  BASTION_CHECK(n >= 0 && D >= 0, "vector_pairwise_squared_distances: n ", n, " and D ", D, " must be >= 0");
  if (n == 0) return;
  // out = X X^T (Gram matrix); only the upper triangle and the diagonal are read below.
  gemm_cpu(false, true, n, n, D, 1.0f, X, D, X, D, 0.0f, out, n);
  // The diagonal becomes |X_i|^2 in double precision (rounded to float), then the scratch for it.
  for (int64_t i = 0; i < n; ++i) out[i * n + i] = static_cast<float>(vector_dot_cpu(X + i * D, X + i * D, D));
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
  const double inv_n = 1.0 / static_cast<double>(n);
  double acc[kMeanBlock];
  for (int64_t d0 = 0; d0 < D; d0 += kMeanBlock) {
    const int64_t width = std::min(kMeanBlock, D - d0);
    std::fill_n(acc, width, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const float* row = X + i * D + d0;
      for (int64_t d = 0; d < width; ++d) acc[d] += row[d];
    }
    for (int64_t d = 0; d < width; ++d) out[d0 + d] = static_cast<float>(acc[d] * inv_n);
  }
}

}  // namespace bastion
