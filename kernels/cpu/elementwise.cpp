#include "kernels/cpu/elementwise.h"

#include <algorithm>

namespace bastion {

void add_cpu(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void sub_cpu(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] - b[i];
}

void mul_cpu(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

void scale_cpu(float* out, const float* in, float alpha, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = alpha * in[i];
}

void add_inplace_cpu(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

double sum_cpu(const float* in, int64_t n) {
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += in[i];
  return total;
}

void add_row_bias_cpu(float* out, const float* bias, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = out + r * cols;
    for (int64_t c = 0; c < cols; ++c) row[c] += bias[c];
  }
}

void sum_rows_cpu(float* grad_bias, const float* grad, int64_t rows, int64_t cols) {
  std::fill_n(grad_bias, cols, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = grad + r * cols;
    for (int64_t c = 0; c < cols; ++c) grad_bias[c] += row[c];
  }
}

}  // namespace bastion
