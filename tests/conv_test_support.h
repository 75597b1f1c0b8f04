// Conv test helpers shared by test_kernels_cpu.cpp (im2col + GEMM) and test_kernels_cpu_conv_direct.cpp
// (the direct AVX-512 path): the case table, seeded data, the forward check against the reference
// loops and the double-precision backward reference.
#pragma once

#include <ostream>
#include <vector>

#include "kernels/cpu/conv.h"
#include "tests/kernel_test_support.h"

namespace bastion::testing {

struct ConvCase {
  int64_t N, C, H, W, K, R, S, stride, padding;
};

inline std::ostream& operator<<(std::ostream& os, const ConvCase& c) {
  return os << "N" << c.N << " C" << c.C << " " << c.H << "x" << c.W << " K" << c.K << " " << c.R << "x" << c.S
            << " stride " << c.stride << " pad " << c.padding;
}

inline const ConvCase kConvCases[] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 0},     // smallest possible
    {2, 3, 7, 9, 4, 3, 3, 1, 1},     // same padding, non-square input
    {3, 2, 8, 7, 5, 5, 5, 2, 2},     // kernel 5, stride 2, padding 2
    {2, 3, 9, 7, 4, 3, 3, 2, 0},     // stride 2 leaves a remainder row/column
    {2, 4, 5, 5, 3, 1, 1, 1, 0},     // 1x1 conv
    {2, 1, 6, 6, 2, 3, 3, 3, 1},     // stride 3
    {2, 3, 5, 4, 4, 5, 3, 1, 2},     // non-square kernel
    {3, 2, 4, 4, 2, 4, 4, 1, 0},     // kernel covers the whole input: 1x1 output
    {2, 2, 3, 3, 3, 3, 3, 1, 2},     // padding 2 on 3x3: corner outputs see a single input pixel
    {16, 10, 64, 64, 3, 3, 3, 1, 1}  // columns exceed one chunk: chunks of 14 and 2 samples
};

struct ConvData {
  Conv2dGeometry g;
  std::vector<float> in, weight, bias;
};

inline ConvData make_conv(const ConvCase& c, uint64_t seed) {
  Generator gen(seed);
  ConvData d{conv2d_geometry(c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.padding), {}, {}, {}};
  d.in = randn(c.N * c.C * c.H * c.W, gen);
  d.weight = randn(c.K * c.C * c.R * c.S, gen);
  d.bias = randn(c.K, gen);
  return d;
}

// The reference loops' forward in double: the loops give the value, the same loops over |in|, |weight|,
// |bias| give sum|terms|; the reference is a double sum rounded once to float, so the magnitude is doubled
// to allow that rounding too.
struct ForwardReference {
  std::vector<double> value, magnitude;
};

inline ForwardReference forward_reference(const ConvData& d, bool with_bias) {
  const Conv2dGeometry& g = d.g;
  const int64_t out_numel = g.N * g.K * g.OH * g.OW;
  const float* bias = with_bias ? d.bias.data() : nullptr;
  std::vector<float> direct(out_numel, kNaN), magnitude_f(out_numel, kNaN);
  conv2d_forward_reference_cpu(direct.data(), d.in.data(), d.weight.data(), bias, g);
  const std::vector<float> abs_in = absolute(d.in), abs_w = absolute(d.weight), abs_b = absolute(d.bias);
  conv2d_forward_reference_cpu(magnitude_f.data(), abs_in.data(), abs_w.data(), with_bias ? abs_b.data() : nullptr, g);
  ForwardReference r{std::vector<double>(direct.begin(), direct.end()), std::vector<double>(out_numel)};
  for (int64_t i = 0; i < out_numel; ++i) r.magnitude[i] = 2.0 * magnitude_f[i];
  return r;
}

// Checks a conv forward result against the reference loops, within the direct sum's bound.
inline void expect_forward_matches_reference(const std::vector<float>& out, const ConvData& d, bool with_bias,
                                             const char* what) {
  const ForwardReference r = forward_reference(d, with_bias);
  expect_close(out, r.value, r.magnitude, d.g.crs() + 1, what);
}

// run(threads) returns a kernel's outputs at that thread count; 2 and 3 threads must give the bits of 1.
template <class Run>
void expect_same_bits_at_any_thread_count(const Run& run) {
  const std::vector<std::vector<float>> one = run(1);
  for (const int threads : {2, 3}) {
    const std::vector<std::vector<float>> many = run(threads);
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_TRUE(bitwise_equal(one[i], many[i])) << "output " << i << ", " << threads << " threads";
  }
}

// Direct backward in double: gradients and the sums of |terms| they are made of.
struct ConvGrads {
  std::vector<double> in, weight, bias, in_mag, weight_mag, bias_mag;
};

inline ConvGrads conv_backward_reference(const ConvData& d, const std::vector<float>& grad_out) {
  const Conv2dGeometry& g = d.g;
  ConvGrads r;
  r.in.assign(d.in.size(), 0.0);
  r.in_mag.assign(d.in.size(), 0.0);
  r.weight.assign(d.weight.size(), 0.0);
  r.weight_mag.assign(d.weight.size(), 0.0);
  r.bias.assign(g.K, 0.0);
  r.bias_mag.assign(g.K, 0.0);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const double dy = grad_out[((n * g.K + k) * g.OH + oh) * g.OW + ow];
          r.bias[k] += dy;
          r.bias_mag[k] += std::abs(dy);
          for (int64_t c = 0; c < g.C; ++c)
            for (int64_t rr = 0; rr < g.R; ++rr)
              for (int64_t s = 0; s < g.S; ++s) {
                const int64_t ih = oh * g.stride - g.padding + rr, iw = ow * g.stride - g.padding + s;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                const int64_t wi = ((k * g.C + c) * g.R + rr) * g.S + s, xi = ((n * g.C + c) * g.H + ih) * g.W + iw;
                r.weight[wi] += dy * d.in[xi];
                r.weight_mag[wi] += std::abs(dy * d.in[xi]);
                r.in[xi] += dy * d.weight[wi];
                r.in_mag[xi] += std::abs(dy * d.weight[wi]);
              }
        }
  return r;
}

}  // namespace bastion::testing
