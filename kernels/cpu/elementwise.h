// elementwise and reductions over n contiguous floats (any shape, flattened).
// Outputs first, no allocation, outputs may alias inputs unless noted.
// Reductions accumulate in double so the result does not depend on the order of a long sum more than
// float rounding of the final value; they are sequential, hence thread-count independent.
#pragma once

#include <cstdint>

namespace bastion {

void add_cpu(float* out, const float* a, const float* b, int64_t n);  // out = a + b
void sub_cpu(float* out, const float* a, const float* b, int64_t n);  // out = a - b
void mul_cpu(float* out, const float* a, const float* b, int64_t n);  // out = a * b
void scale_cpu(float* out, const float* in, float alpha, int64_t n);  // out = alpha * in
void add_inplace_cpu(float* dst, const float* src, int64_t n);        // dst += src
double sum_cpu(const float* in, int64_t n);                           // sum of in, in double

// Row-broadcast bias: out[r, c] += bias[c] for an (rows, cols) matrix.
void add_row_bias_cpu(float* out, const float* bias, int64_t rows, int64_t cols);
// Column sums: grad_bias[c] (ASSIGNED) = sum_r grad[r, c].
void sum_rows_cpu(float* grad_bias, const float* grad, int64_t rows, int64_t cols);

}  // namespace bastion
