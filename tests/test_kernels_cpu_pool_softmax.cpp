// Kernel-level tests for kernels/cpu pooling (max, average, global average; the 2x2 fast path against
// plain loops, ties, odd sizes) and softmax / cross-entropy / KL (hand-computed, large logits). Output
// buffers start as NaN so an element a kernel forgot to write shows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/softmax.h"
#include "tensor/error.h"
#include "tensor/random.h"
#include "tests/kernel_test_support.h"

namespace bastion {
namespace {

using testing::absolute;
using testing::expect_close;
using testing::kHandTolerance;
using testing::kNaN;
using testing::randn;

// ================================================================================================ pool

// A 4x4 plane with a distinct maximum in every 2x2 block (and no ties anywhere).
const std::vector<float> kPoolPlane = {1,  3,  2,  0,   //
                                       4,  6,  5,  7,   //
                                       8,  10, 9,  11,  //
                                       15, 12, 14, 13};

TEST(KernelsCpuPool, MaxPoolKnownAnswers) {
  {
    const Pool2dGeometry g = pool2d_geometry(1, 4, 4, 2, 2, 0);
    std::vector<float> out(4, kNaN);
    max_pool2d_forward_cpu(out.data(), kPoolPlane.data(), g);
    EXPECT_EQ(out, (std::vector<float>{6, 7, 15, 14}));
    const std::vector<float> grad_out = {1, 2, 3, 4};
    std::vector<float> grad_in(16, kNaN);
    max_pool2d_backward_cpu(grad_in.data(), grad_out.data(), kPoolPlane.data(), g);
    EXPECT_EQ(grad_in, (std::vector<float>{0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 3, 0, 4, 0}));
  }
  {  // kernel 3, stride 2, padding 1: windows rows/cols {0,1} and {1,2,3}, overlapping at 1
    const Pool2dGeometry g = pool2d_geometry(1, 4, 4, 3, 2, 1);
    ASSERT_EQ(g.OH, 2);
    std::vector<float> out(4, kNaN);
    max_pool2d_forward_cpu(out.data(), kPoolPlane.data(), g);
    EXPECT_EQ(out, (std::vector<float>{6, 7, 15, 14}));
  }
  {  // all equal (and negative, so padding must not win): each gradient goes to its window's FIRST element
    const std::vector<float> flat(16, -2.0f);
    const Pool2dGeometry g = pool2d_geometry(1, 4, 4, 3, 2, 1);
    std::vector<float> out(4, kNaN), grad_in(16, kNaN);
    max_pool2d_forward_cpu(out.data(), flat.data(), g);
    EXPECT_EQ(out, (std::vector<float>{-2, -2, -2, -2}));
    const std::vector<float> grad_out = {1, 2, 3, 4};
    max_pool2d_backward_cpu(grad_in.data(), grad_out.data(), flat.data(), g);
    // Window starts (clipped): (0,0), (0,1), (1,0), (1,1).
    EXPECT_EQ(grad_in, (std::vector<float>{1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  }
}

TEST(KernelsCpuPool, AvgPoolKnownAnswers) {
  {
    const Pool2dGeometry g = pool2d_geometry(1, 4, 4, 2, 2, 0);
    std::vector<float> out(4, kNaN);
    avg_pool2d_forward_cpu(out.data(), kPoolPlane.data(), g);
    EXPECT_EQ(out, (std::vector<float>{3.5f, 3.5f, 11.25f, 11.75f}));
    const std::vector<float> grad_out = {4, 8, 12, 16};
    std::vector<float> grad_in(16, kNaN);
    avg_pool2d_backward_cpu(grad_in.data(), grad_out.data(), g);
    EXPECT_EQ(grad_in, (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  }
  {  // padding counts as zeros in the divisor (count_include_pad): every window divides by 9
    const Pool2dGeometry g = pool2d_geometry(1, 4, 4, 3, 2, 1);
    std::vector<float> out(4, kNaN);
    avg_pool2d_forward_cpu(out.data(), kPoolPlane.data(), g);
    const float want[] = {14.0f / 9, 23.0f / 9, 55.0f / 9, 87.0f / 9};
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], want[i], kHandTolerance * want[i]) << i;
    const std::vector<float> grad_out = {9, 18, 27, 36};  // shares 1, 2, 3, 4
    std::vector<float> grad_in(16, kNaN);
    avg_pool2d_backward_cpu(grad_in.data(), grad_out.data(), g);
    // Row/col 1 lies in both windows of its axis.
    const std::vector<float> want_grad = {1, 3, 2, 2, 4, 10, 6, 6, 3, 7, 4, 4, 3, 7, 4, 4};
    for (int i = 0; i < 16; ++i) EXPECT_NEAR(grad_in[i], want_grad[i], kHandTolerance * want_grad[i]) << i;
  }
}

TEST(KernelsCpuPool, TwoByTwoTiesGoToTheFirstElement) {        // the 2x2 / stride 2 case, odd sizes, all ties
  const Pool2dGeometry g = pool2d_geometry(1, 5, 5, 2, 2, 0);  // the last row and column fall outside
  ASSERT_EQ(g.OH, 2);
  const std::vector<float> flat(25, 3.0f), grad_out = {1, 2, 3, 4};
  std::vector<float> out(4, kNaN), grad_in(25, kNaN);
  max_pool2d_forward_cpu(out.data(), flat.data(), g);
  EXPECT_EQ(out, (std::vector<float>{3, 3, 3, 3}));
  max_pool2d_backward_cpu(grad_in.data(), grad_out.data(), flat.data(), g);
  std::vector<float> want(25, 0.0f);
  want[0] = 1, want[2] = 2, want[10] = 3, want[12] = 4;
  EXPECT_EQ(grad_in, want);
}

// Ties in rows longer than one 16-window block: every window's gradient goes to its top-left element.
TEST(KernelsCpuPool, TwoByTwoTiesInLongRowsGoToTheFirstElement) {
  const Pool2dGeometry g = pool2d_geometry(2, 4, 42, 2, 2, 0);  // rows of 21 windows
  const std::vector<float> flat(2 * 4 * 42, -1.5f);
  std::vector<float> grad_out(g.planes * g.OH * g.OW), grad_in(flat.size(), kNaN);
  for (size_t i = 0; i < grad_out.size(); ++i) grad_out[i] = static_cast<float>(i + 1);
  max_pool2d_backward_cpu(grad_in.data(), grad_out.data(), flat.data(), g);
  std::vector<float> want(flat.size(), 0.0f);
  for (int64_t p = 0; p < g.planes; ++p)
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow)
        want[(p * g.H + 2 * oh) * g.W + 2 * ow] = grad_out[(p * g.OH + oh) * g.OW + ow];
  EXPECT_EQ(grad_in, want);
}

// The AVX2 row (pool_avx2.cpp) routes every gradient where the op's own path does, bit for bit, on random
// planes (full 8-window blocks and partial ones) and on ties; on a build without AVX-512 the op runs it, so
// the tests above cover it there too, and on one with AVX-512 this checks it against the AVX-512 row.
TEST(KernelsCpuPool, TwoByTwoBackwardOnAvx2MatchesTheOpsPath) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU lacks AVX2 or FMA";
  Generator gen(33);
  for (const int64_t W : {2, 14, 16, 18, 30, 48, 50}) {
    SCOPED_TRACE(::testing::Message() << "W " << W);
    const Pool2dGeometry g = pool2d_geometry(3, 6, W, 2, 2, 0);
    std::vector<float> in = randn(g.planes * g.H * g.W, gen);
    for (size_t i = 0; i < in.size(); i += 7) in[i] = in[i + 1 < in.size() ? i + 1 : i];  // some ties
    const std::vector<float> grad_out = randn(g.planes * g.OH * g.OW, gen);
    std::vector<float> want(in.size(), kNaN), got(in.size(), kNaN);
    max_pool2d_backward_cpu(want.data(), grad_out.data(), in.data(), g);
    max_pool2d_backward_avx2_cpu(got.data(), grad_out.data(), in.data(), g);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
  }
  const Pool2dGeometry odd = pool2d_geometry(1, 5, 5, 2, 2, 0);
  const std::vector<float> flat(25, 3.0f), grad_out = {1, 2, 3, 4};
  std::vector<float> grad_in(25, kNaN), want(25, 0.0f);
  max_pool2d_backward_avx2_cpu(grad_in.data(), grad_out.data(), flat.data(), odd);
  want[0] = 1, want[2] = 2, want[10] = 3, want[12] = 4;
  EXPECT_EQ(grad_in, want);
  EXPECT_THROW(
      max_pool2d_backward_avx2_cpu(grad_in.data(), grad_out.data(), flat.data(), pool2d_geometry(1, 5, 5, 3, 2, 1)),
      Error);
}

// Plain loops over the clipped window, in double, as the oracle for every pooling geometry.
// The *_mag arrays hold the same sums over absolute values, for the tolerance.
struct PoolReference {
  std::vector<double> max_out, avg_out, avg_out_mag, max_grad, max_grad_mag, avg_grad, avg_grad_mag;
};

PoolReference pool_reference(const std::vector<float>& in, const std::vector<float>& grad_out,
                             const Pool2dGeometry& g) {
  PoolReference ref;
  auto& [max_out, avg_out, avg_out_mag, max_grad, max_grad_mag, avg_grad, avg_grad_mag] = ref;
  max_out.assign(g.planes * g.OH * g.OW, 0.0);
  avg_out.assign(max_out.size(), 0.0);
  avg_out_mag.assign(max_out.size(), 0.0);
  max_grad.assign(in.size(), 0.0);
  max_grad_mag.assign(in.size(), 0.0);
  avg_grad.assign(in.size(), 0.0);
  avg_grad_mag.assign(in.size(), 0.0);
  const double area = static_cast<double>(g.kernel * g.kernel);
  for (int64_t p = 0; p < g.planes; ++p)
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const int64_t o = (p * g.OH + oh) * g.OW + ow;
        int64_t best = -1;
        double total = 0.0, total_mag = 0.0;
        for (int64_t r = 0; r < g.kernel; ++r)
          for (int64_t s = 0; s < g.kernel; ++s) {
            const int64_t h = oh * g.stride - g.padding + r, w = ow * g.stride - g.padding + s;
            if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
            const int64_t i = (p * g.H + h) * g.W + w;
            total += in[i];
            total_mag += std::abs(in[i]);
            if (best < 0 || in[i] > in[best]) best = i;
          }
        max_out[o] = in[best];
        max_grad[best] += grad_out[o];
        max_grad_mag[best] += std::abs(grad_out[o]);
        avg_out[o] = total / area;
        avg_out_mag[o] = total_mag / area;
        for (int64_t r = 0; r < g.kernel; ++r)
          for (int64_t s = 0; s < g.kernel; ++s) {
            const int64_t h = oh * g.stride - g.padding + r, w = ow * g.stride - g.padding + s;
            if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
            avg_grad[(p * g.H + h) * g.W + w] += grad_out[o] / area;
            avg_grad_mag[(p * g.H + h) * g.W + w] += std::abs(grad_out[o]) / area;
          }
      }
  return ref;
}

TEST(KernelsCpuPool, MatchesPlainLoopsOverGeometries) {
  struct Case {
    int64_t planes, H, W, kernel, stride, padding;
  };
  const Case cases[] = {{6, 8, 8, 2, 2, 0},
                        {5, 7, 9, 2, 2, 0},
                        {3, 7, 6, 3, 2, 1},
                        {4, 5, 5, 3, 1, 1},
                        {2, 6, 7, 2, 1, 1},
                        {3, 9, 4, 3, 3, 0},
                        {2, 1, 1, 1, 1, 0},
                        {130, 4, 4, 2, 2, 0},
                        // 2x2 rows of 24, 19 and 11 windows: the vector path's full and partial blocks
                        {3, 6, 48, 2, 2, 0},
                        {2, 6, 39, 2, 2, 0},
                        {2, 5, 22, 2, 2, 0}};
  Generator gen(21);
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.planes << " planes " << c.H << "x" << c.W << " kernel " << c.kernel
                                      << " stride " << c.stride << " pad " << c.padding);
    const Pool2dGeometry g = pool2d_geometry(c.planes, c.H, c.W, c.kernel, c.stride, c.padding);
    const std::vector<float> in = randn(c.planes * c.H * c.W, gen), grad_out = randn(c.planes * g.OH * g.OW, gen);
    const PoolReference ref = pool_reference(in, grad_out, g);
    std::vector<float> out(ref.max_out.size(), kNaN), grad_in(in.size(), kNaN);
    max_pool2d_forward_cpu(out.data(), in.data(), g);
    EXPECT_EQ(out, std::vector<float>(ref.max_out.begin(), ref.max_out.end()));  // copies: exact
    max_pool2d_backward_cpu(grad_in.data(), grad_out.data(), in.data(), g);
    // Routed gradients are exact unless overlapping windows add a few of them into one input.
    expect_close(grad_in, ref.max_grad, ref.max_grad_mag, c.kernel * c.kernel, "max_pool2d_backward_cpu");
    // Averages: float sums of at most kernel^2 terms per output (and per input, in the backward).
    std::fill(out.begin(), out.end(), kNaN);
    avg_pool2d_forward_cpu(out.data(), in.data(), g);
    expect_close(out, ref.avg_out, ref.avg_out_mag, c.kernel * c.kernel, "avg_pool2d_forward_cpu");
    std::fill(grad_in.begin(), grad_in.end(), kNaN);
    avg_pool2d_backward_cpu(grad_in.data(), grad_out.data(), g);
    expect_close(grad_in, ref.avg_grad, ref.avg_grad_mag, c.kernel * c.kernel, "avg_pool2d_backward_cpu");
  }
}

TEST(KernelsCpuPool, GlobalAvgPoolKnownAnswer) {
  std::vector<float> two_planes = kPoolPlane;
  for (float v : kPoolPlane) two_planes.push_back(-2.0f * v);
  std::vector<float> out(2, kNaN);
  global_avg_pool_forward_cpu(out.data(), two_planes.data(), 2, 16);
  EXPECT_EQ(out, (std::vector<float>{7.5f, -15.0f}));
  const std::vector<float> grad_out = {16, 32};
  std::vector<float> grad_in(32, kNaN);
  global_avg_pool_backward_cpu(grad_in.data(), grad_out.data(), 2, 16);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(grad_in[i], i < 16 ? 1.0f : 2.0f) << i;
}

// ============================================================================================= softmax

// x = [[1, 2, 3], [0, 0, 0]], y = [2, 0].
// Row 0: logsumexp = 3 + log(1 + e^-1 + e^-2) = 3.40760596444438; row 1: log 3 = 1.0986122886681098.
TEST(KernelsCpuSoftmax, HandComputedTwoByThree) {
  const float x[] = {1, 2, 3, 0, 0, 0};
  const int32_t y[] = {2, 0};
  const double lse0 = 3.40760596444438, log3 = 1.0986122886681098;
  const double want_log[] = {1 - lse0, 2 - lse0, 3 - lse0, -log3, -log3, -log3};

  std::vector<float> log_probs(6, kNaN);
  log_softmax_forward_cpu(log_probs.data(), x, 2, 3);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(log_probs[i], want_log[i], kHandTolerance * 3) << i;

  std::vector<float> probs(6, kNaN);
  const double loss = cross_entropy_forward_cpu(probs.data(), x, y, 2, 3);
  EXPECT_NEAR(loss, ((lse0 - 3) + log3) / 2, kHandTolerance);  // 0.7531091265562449
  const double want_probs[] = {0.09003057317038048, 0.2447284710547977, 0.665240955774822, 1 / 3.0, 1 / 3.0, 1 / 3.0};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(probs[i], want_probs[i], kHandTolerance) << i;

  // dx = (probs - onehot(y)) * g / N with g = 3.
  std::vector<float> dx(6, kNaN);
  cross_entropy_backward_cpu(dx.data(), probs.data(), y, 3.0f, 2, 3);
  const double onehot[] = {0, 0, 1, 1, 0, 0};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(dx[i], (want_probs[i] - onehot[i]) * 1.5, kHandTolerance * 2) << i;

  // log_softmax backward with g = [1, 0, 0]: dx = g - softmax * 1.
  const float g[] = {1, 0, 0, 0, 0, 0};
  log_softmax_backward_cpu(dx.data(), g, log_probs.data(), 2, 3);
  const double want_dx[] = {1 - want_probs[0], -want_probs[1], -want_probs[2], 0, 0, 0};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(dx[i], want_dx[i], kHandTolerance) << i;
}

TEST(KernelsCpuSoftmax, LargeLogitsDoNotOverflow) {
  const float x[] = {1000, 1001, -1000};
  std::vector<float> out(3, kNaN);
  log_softmax_forward_cpu(out.data(), x, 1, 3);
  EXPECT_NEAR(out[0], -1.3132616875182228, 1e-4);  // -log(1 + e)
  EXPECT_NEAR(out[1], -0.3132616875182228, 1e-4);  // -log(1 + 1/e)
  EXPECT_TRUE(std::isfinite(out[2]));
}

// Student [0, 0] (ps = [1/2, 1/2]), teacher [0, T log 3] (pt = [1/4, 3/4] at temperature T = 2).
// KL(pt || ps) = 1/4 log(1/2) + 3/4 log(3/2) = 0.13081203594113697; loss = T^2 * KL.
TEST(KernelsCpuSoftmax, KlDivHandComputed) {
  const float T = 2.0f;
  const float s[] = {0, 0}, t[] = {0, static_cast<float>(2.0 * std::log(3.0))};
  const double kl = 0.13081203594113697;
  std::vector<float> log_ps(2, kNaN), log_pt(2, kNaN);
  EXPECT_NEAR(kl_div_forward_cpu(log_ps.data(), log_pt.data(), s, t, T, 1, 2), 4 * kl, 4 * kHandTolerance);
  std::vector<float> ds(2, kNaN), dt(2, kNaN);
  kl_div_backward_cpu(ds.data(), dt.data(), log_ps.data(), log_pt.data(), T, 1.0f, 1, 2);
  // ds = T (ps - pt); dt = T pt ((log pt - log ps) - kl)
  EXPECT_NEAR(ds[0], 0.5, kHandTolerance);
  EXPECT_NEAR(ds[1], -0.5, kHandTolerance);
  EXPECT_NEAR(dt[0], 2 * 0.25 * (std::log(0.5) - kl), 2 * kHandTolerance);
  EXPECT_NEAR(dt[1], 2 * 0.75 * (std::log(1.5) - kl), 2 * kHandTolerance);
  // Identical logits: zero loss, zero gradients.
  EXPECT_NEAR(kl_div_forward_cpu(log_ps.data(), log_pt.data(), t, t, T, 1, 2), 0.0, 1e-7);
}

}  // namespace
}  // namespace bastion
