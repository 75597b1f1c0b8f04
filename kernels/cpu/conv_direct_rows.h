// Internal to kernels/cpu/conv_direct*.cpp: the row-strided plan's shared pieces. conv_direct.cpp runs its
// forward and input-gradient passes; conv_direct_rows_weight.cpp its weight gradient. A pass is a valid
// stride-1 correlation (ValidConv) over zero-padded planes whose outputs are numbered row-strided: output
// (oh, ow) at oh * Wp + ow, so one 16-lane vector covers consecutive positions across row ends.
#pragma once

#include <cstdint>

#include "kernels/cpu/conv.h"

#if defined(__AVX512F__)
#include <immintrin.h>

namespace bastion::conv_direct_rows {

// Copies n floats by 16-float vectors and a masked tail. The rows these files copy are short (LeNet: 10
// to 28 floats, tens of thousands per training step), and a memcpy call per row cost more than its copy:
// memmove was 5.4 % of a cnn-spmc step (perf, 2026-11-29).
inline void copy_row(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, _mm512_loadu_ps(src + i));
  if (i < n) {
    const auto tail = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(dst + i, tail, _mm512_maskz_loadu_ps(tail, src + i));
  }
}

constexpr int64_t kLanes = 16;
// Register budget of a block: 24 accumulators, leaving 8 of the 32 zmm registers for the loaded
// vectors (forward: NV input vectors; weight gradient: KB output-gradient vectors + 1 input vector).
constexpr int kAccumulators = 24;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Output channels per register block: a divisor of K when one of 8 or 6 is, else 4 with K rounded up
// (the padded channels have zero weights and are never copied out).
inline int block_channels(int64_t K) { return K % 8 == 0 ? 8 : K % 6 == 0 ? 6 : 4; }

// A valid stride-1 correlation of C planes (Hp, Wp) with (K, C, R, S) filters, row-strided output.
struct ValidConv {
  int64_t C, Hp, Wp, K, R, S;
  int64_t pad_rows;  // zero rows above (and below) the data rows of every plane
  int KB;            // output channels per register block
  int64_t K_padded;  // K rounded up to KB
  int64_t OH, OW;    // valid output size
  int64_t Q;         // outputs in row-strided numbering: (OH - 1) * Wp + OW
  int64_t vectors;   // ceil(Q / 16): the last one is masked
  int64_t plane() const { return Hp * Wp; }
  int64_t out_stride() const { return vectors * kLanes; }  // floats per output channel of the buffer
  __mmask16 last_mask() const {
    const int64_t rest = Q - (vectors - 1) * kLanes;
    return static_cast<__mmask16>((1u << rest) - 1u);
  }
};

inline ValidConv valid_conv(int64_t C, int64_t Hp, int64_t Wp, int64_t K, int64_t R, int64_t S, int64_t pad_rows) {
  ValidConv v{C, Hp, Wp, K, R, S, pad_rows, block_channels(K), 0, Hp - R + 1, Wp - S + 1, 0, 0};
  v.K_padded = ceil_div(K, v.KB) * v.KB;
  v.Q = (v.OH - 1) * Wp + v.OW;
  v.vectors = ceil_div(v.Q, kLanes);
  return v;
}

// ---- weight gradient (conv_direct_rows_weight.cpp) ----------------------------------------------------

// Floats of the workspace the weight gradient needs after the row-strided output gradients: the vector
// totals and partial sums, plus one vector of slack to align them to 64 bytes.
int64_t weight_grad_totals_floats(const ValidConv& v);
// The first 64-byte boundary at or after `at`: where weight_grad's totals start.
__m512* aligned_totals(float* at);
// grad_out (N, K, OH, OW) -> row-strided rows of width Wp with zeros in the dropped columns, the tail
// and the padded channels: (N, K_padded, out_stride()).
void grad_out_rows(float* rows, const float* grad_out, const Conv2dGeometry& g, const ValidConv& v, int threads);
// grad_weight (K, C, R, S) ASSIGNED from the row-strided output gradients and the padded inputs (N, C, Hp,
// Wp); totals: weight_grad_totals_floats(v) floats, aligned. Bitwise the same for any thread count.
void weight_grad(float* grad_weight, __m512* totals, const float* grad_rows, const float* inputs, const ValidConv& v,
                 int64_t N, int threads);

}  // namespace bastion::conv_direct_rows

#endif
