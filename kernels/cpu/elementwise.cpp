#include "kernels/cpu/elementwise.h"

#include <algorithm>

#include "kernels/cpu/parallel.h"

namespace bastion {

namespace {

// One thread's range of each pass, as a plain function of its pointers (kernels/cpu/activation.cpp says
// why: a loop written inside parallel_elements' lambda may not vectorise).
void add_range(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void sub_range(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] - b[i];
}

void mul_range(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

void scale_range(float* out, const float* in, float alpha, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = alpha * in[i];
}

void add_inplace_range(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

}  // namespace

void add_cpu(float* out, const float* a, const float* b, int64_t n) {
  parallel_elements(n, [=](int64_t begin, int64_t end) { add_range(out + begin, a + begin, b + begin, end - begin); });
}

void sub_cpu(float* out, const float* a, const float* b, int64_t n) {
  parallel_elements(n, [=](int64_t begin, int64_t end) { sub_range(out + begin, a + begin, b + begin, end - begin); });
}

void mul_cpu(float* out, const float* a, const float* b, int64_t n) {
  parallel_elements(n, [=](int64_t begin, int64_t end) { mul_range(out + begin, a + begin, b + begin, end - begin); });
}

void scale_cpu(float* out, const float* in, float alpha, int64_t n) {
  parallel_elements(n, [=](int64_t begin, int64_t end) { scale_range(out + begin, in + begin, alpha, end - begin); });
}

void add_inplace_cpu(float* dst, const float* src, int64_t n) {
  parallel_elements(n, [=](int64_t begin, int64_t end) { add_inplace_range(dst + begin, src + begin, end - begin); });
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
