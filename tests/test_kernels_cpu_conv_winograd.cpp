// Kernel-level tests of the Winograd F(2x2, 3x3) convolution (kernels/cpu/conv_winograd.h): forward and
// backward against the reference loops and the double backward of conv_test_support.h, chunked batches,
// and thread-count determinism. Outputs and workspaces start as NaN so an unwritten element or an
// uninitialised read shows. Where the CPU lacks AVX2 + FMA (the layouts' kernels) the tests are skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/conv_winograd.h"
#include "tensor/error.h"
#include "tests/conv_test_support.h"
#include "tests/kernel_test_support.h"

namespace bastion {
namespace {

using testing::bitwise_equal;
using testing::conv_backward_reference;
using testing::ConvCase;
using testing::ConvData;
using testing::ConvGrads;
using testing::expect_close;
using testing::kNaN;
using testing::make_conv;
using testing::randn;

// Winograd multiplies transformed terms, each a signed sum of input pixels (B^T d B: up to 4 per
// position) or of weights (G g G^T: up to 9, scaled by 1/4 to 1), and transforms the products back (A^T
// m A: up to 9 per output). So an output's rounding error grows with the terms of its whole 2x2 tile (and
// a weight gradient's with all 9 taps of its filter), not only with its own terms: the bounds below take
// the direct sum's bound (sum of |terms| x number of terms x epsilon) with the largest magnitude in the
// tile (or filter), times kWinogradGrowth for the transforms' growth of absolute values (4 x 2.25 x 1 in
// the worst position, 16). The cases below pass with a growth of 1 on an AVX2 CPU; 4 leaves room for
// other CPUs' contraction of the transforms into multiply-adds.
constexpr int64_t kWinogradGrowth = 4;

// Each element's magnitude replaced by the largest in its 2x2 tile of (n, c) planes of H x W.
std::vector<double> tile_max(const std::vector<double>& magnitude, int64_t planes, int64_t H, int64_t W) {
  std::vector<double> out(magnitude.size());
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w) {
        const int64_t h0 = h / 2 * 2, w0 = w / 2 * 2, base = p * H * W;
        double m = 0;
        for (int64_t i = 0; i < 2; ++i)
          for (int64_t j = 0; j < 2; ++j) m = std::max(m, magnitude[base + (h0 + i) * W + w0 + j]);
        out[base + h * W + w] = m;
      }
  return out;
}

// Each weight gradient's magnitude replaced by the largest over its filter's 9 taps.
std::vector<double> filter_max(const std::vector<double>& magnitude) {
  std::vector<double> out(magnitude.size());
  for (size_t f = 0; f < magnitude.size(); f += 9) {
    const double m = *std::max_element(magnitude.begin() + f, magnitude.begin() + f + 9);
    std::fill(out.begin() + f, out.begin() + f + 9, m);
  }
  return out;
}

// Each case exercises a different part of the plan: 16-channel blocks on either side (C, K = 16, 32, 48,
// 64), planes of one tile (2x2) and tiles in several rows and columns, non-square planes, batches of 1 and
// odd batches.
const ConvCase kWinogradCases[] = {
    {3, 16, 8, 8, 16, 3, 3, 1, 1},   // smallest channel counts
    {3, 32, 6, 10, 48, 3, 3, 1, 1},  // non-square plane, K = 48
    {2, 64, 2, 2, 32, 3, 3, 1, 1},   // one tile a sample: every input pixel is in the padding's reach
    {1, 16, 12, 4, 64, 3, 3, 1, 1},  // batch of 1, tall plane
    {5, 48, 4, 4, 16, 3, 3, 1, 1},   // ResNet18's last stage shape at small C, odd batch
};

bool winograd_available() { return conv2d_winograd_supported(conv2d_geometry(1, 16, 4, 4, 16, 3, 3, 1, 1)); }
constexpr const char* kWinogradNoIsa = "the CPU lacks AVX2 + FMA (the channel-blocked layouts' kernels)";

TEST(KernelsCpuConvWinograd, SupportsEvenStrideOneThreeByThreeLayers) {
  if (!winograd_available()) GTEST_SKIP() << kWinogradNoIsa;
  EXPECT_TRUE(conv2d_winograd_supported(conv2d_geometry(64, 64, 32, 32, 64, 3, 3, 1, 1)));
  EXPECT_TRUE(conv2d_winograd_supported(conv2d_geometry(64, 512, 4, 4, 512, 3, 3, 1, 1)));
  EXPECT_FALSE(conv2d_winograd_supported(conv2d_geometry(1, 16, 8, 8, 16, 3, 3, 2, 1)));   // stride 2
  EXPECT_FALSE(conv2d_winograd_supported(conv2d_geometry(1, 16, 7, 8, 16, 3, 3, 1, 1)));   // odd H
  EXPECT_FALSE(conv2d_winograd_supported(conv2d_geometry(1, 16, 8, 5, 16, 3, 3, 1, 1)));   // odd W
  EXPECT_FALSE(conv2d_winograd_supported(conv2d_geometry(1, 3, 32, 32, 64, 3, 3, 1, 1)));  // C = 3
  EXPECT_FALSE(conv2d_winograd_supported(conv2d_geometry(1, 16, 8, 8, 24, 3, 3, 1, 1)));   // K = 24
  EXPECT_FALSE(conv2d_winograd_supported(conv2d_geometry(1, 16, 8, 8, 16, 3, 3, 1, 0)));   // padding 0
  EXPECT_FALSE(conv2d_winograd_supported(conv2d_geometry(1, 16, 8, 8, 16, 1, 1, 1, 0)));   // 1x1
}

TEST(KernelsCpuConvWinograd, UnsupportedLayersThrow) {
  const Conv2dGeometry g = conv2d_geometry(1, 16, 7, 8, 16, 3, 3, 1, 1);
  std::vector<float> in(16 * 7 * 8), w(16 * 16 * 9), out(16 * 7 * 8), ws(1 << 16);
  EXPECT_THROW(conv2d_winograd_forward_cpu(out.data(), in.data(), w.data(), nullptr, g, ws.data(), 1), Error);
}

void expect_winograd_forward_close(const std::vector<float>& out, const ConvData& d, bool with_bias) {
  const Conv2dGeometry& g = d.g;
  const testing::ForwardReference r = testing::forward_reference(d, with_bias);
  expect_close(out, r.value, tile_max(r.magnitude, g.N * g.K, g.OH, g.OW), kWinogradGrowth * (g.crs() + 1),
               "conv2d_winograd_forward_cpu");
}

TEST(KernelsCpuConvWinograd, ForwardMatchesReference) {
  if (!winograd_available()) GTEST_SKIP() << kWinogradNoIsa;
  uint64_t seed = 800;
  for (const ConvCase& c : kWinogradCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const ConvData d = make_conv(c, seed++);
    const Conv2dGeometry& g = d.g;
    ASSERT_TRUE(conv2d_winograd_supported(g));
    for (const bool with_bias : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "bias " << with_bias);
      std::vector<float> out(g.N * g.K * g.out_plane(), kNaN), workspace(conv2d_winograd_workspace_floats(g), kNaN);
      conv2d_winograd_forward_cpu(out.data(), d.in.data(), d.weight.data(), with_bias ? d.bias.data() : nullptr, g,
                                  workspace.data(), 1);
      expect_winograd_forward_close(out, d, with_bias);
    }
  }
}

void expect_winograd_backward_close(const ConvData& d, uint64_t seed) {
  const Conv2dGeometry& g = d.g;
  Generator gen(seed);
  const std::vector<float> grad_out = randn(g.N * g.K * g.out_plane(), gen);
  const ConvGrads want = conv_backward_reference(d, grad_out);
  std::vector<float> grad_in(d.in.size(), kNaN), grad_w(d.weight.size(), kNaN), grad_b(g.K, kNaN);
  std::vector<float> workspace(conv2d_winograd_workspace_floats(g), kNaN);
  conv2d_winograd_backward_cpu(grad_in.data(), grad_w.data(), grad_b.data(), grad_out.data(), d.in.data(),
                               d.weight.data(), g, workspace.data(), 1);
  expect_close(grad_in, want.in, tile_max(want.in_mag, g.N * g.C, g.H, g.W), kWinogradGrowth * g.K * g.R * g.S,
               "grad_in");
  expect_close(grad_w, want.weight, filter_max(want.weight_mag), kWinogradGrowth * g.N * g.out_plane(), "grad_weight");
  expect_close(grad_b, want.bias, want.bias_mag, g.N * g.out_plane(), "grad_bias");

  // Null outputs are skipped and the others come out bitwise the same.
  std::vector<float> grad_w_only(d.weight.size(), kNaN), grad_in_only(d.in.size(), kNaN);
  std::fill(workspace.begin(), workspace.end(), kNaN);
  conv2d_winograd_backward_cpu(nullptr, grad_w_only.data(), nullptr, grad_out.data(), d.in.data(), d.weight.data(), g,
                               workspace.data(), 1);
  EXPECT_TRUE(bitwise_equal(grad_w, grad_w_only));
  std::fill(workspace.begin(), workspace.end(), kNaN);
  conv2d_winograd_backward_cpu(grad_in_only.data(), nullptr, nullptr, grad_out.data(), d.in.data(), d.weight.data(), g,
                               workspace.data(), 1);
  EXPECT_TRUE(bitwise_equal(grad_in, grad_in_only));
}

TEST(KernelsCpuConvWinograd, BackwardMatchesReference) {
  if (!winograd_available()) GTEST_SKIP() << kWinogradNoIsa;
  uint64_t seed = 900;
  for (const ConvCase& c : kWinogradCases) {
    SCOPED_TRACE(::testing::Message() << c);
    expect_winograd_backward_close(make_conv(c, seed), seed * 7);
    ++seed;
  }
}

// A layer whose batch runs in several chunks (the last one shorter): every sample of the forward and the
// weight gradient's sum over chunks against the reference.
TEST(KernelsCpuConvWinograd, LargeBatchesRunInChunks) {
  if (!winograd_available()) GTEST_SKIP() << kWinogradNoIsa;
  const ConvCase c{7, 32, 32, 32, 16, 3, 3, 1, 1};
  const ConvData d = make_conv(c, 950);
  const int64_t chunk = conv2d_winograd_chunk_samples(d.g);
  ASSERT_GT(chunk, 1);
  ASSERT_LT(chunk, c.N);
  ASSERT_NE(c.N % chunk, 0);
  std::vector<float> out(c.N * c.K * c.H * c.W, kNaN), workspace(conv2d_winograd_workspace_floats(d.g), kNaN);
  conv2d_winograd_forward_cpu(out.data(), d.in.data(), d.weight.data(), d.bias.data(), d.g, workspace.data(), 1);
  expect_winograd_forward_close(out, d, true);
  expect_winograd_backward_close(d, 951);
}

// The thread count changes who computes an output, never how: 1, 2 and 3 threads agree bitwise, on layers
// large enough for every loop to go parallel, one of them in several chunks.
TEST(KernelsCpuConvWinograd, ResultsDoNotDependOnTheThreadCount) {
  if (!winograd_available()) GTEST_SKIP() << kWinogradNoIsa;
  for (const ConvCase& c : {ConvCase{7, 32, 10, 10, 64, 3, 3, 1, 1}, ConvCase{7, 32, 32, 32, 16, 3, 3, 1, 1}}) {
    SCOPED_TRACE(::testing::Message() << c);
    const ConvData d = make_conv(c, 970);
    const Conv2dGeometry& g = d.g;
    Generator gen(971);
    const std::vector<float> grad_out = randn(g.N * g.K * g.out_plane(), gen);
    auto run = [&](int threads) {
      std::vector<float> workspace(conv2d_winograd_workspace_floats(g), kNaN);
      std::vector<float> out(g.N * g.K * g.out_plane()), gi(d.in.size()), gw(d.weight.size()), gb(g.K);
      conv2d_winograd_forward_cpu(out.data(), d.in.data(), d.weight.data(), d.bias.data(), g, workspace.data(),
                                  threads);
      conv2d_winograd_backward_cpu(gi.data(), gw.data(), gb.data(), grad_out.data(), d.in.data(), d.weight.data(), g,
                                   workspace.data(), threads);
      return std::vector<std::vector<float>>{out, gi, gw, gb};
    };
    testing::expect_same_bits_at_any_thread_count(run);
  }
}

// The op's rule (conv2d_winograd_preferred): without AVX-512 every supported layer, where its ladder won
// against the channel-blocked AVX2 kernels; with AVX-512 none (not measured against that path).
TEST(KernelsCpuConvWinograd, TheOpPrefersItOnlyWithoutAvx512) {
  if (!winograd_available()) GTEST_SKIP() << kWinogradNoIsa;
  const Conv2dGeometry resnet_layers[] = {conv2d_geometry(64, 64, 32, 32, 64, 3, 3, 1, 1),
                                          conv2d_geometry(64, 512, 4, 4, 512, 3, 3, 1, 1)};
#if defined(__AVX512F__)
  for (const Conv2dGeometry& g : resnet_layers) EXPECT_FALSE(conv2d_winograd_preferred(g));
#else
  for (const Conv2dGeometry& g : resnet_layers) EXPECT_TRUE(conv2d_winograd_preferred(g));
#endif
  EXPECT_FALSE(conv2d_winograd_preferred(conv2d_geometry(64, 64, 32, 32, 128, 3, 3, 2, 1)));  // stride 2
  EXPECT_FALSE(conv2d_winograd_preferred(conv2d_geometry(64, 3, 32, 32, 64, 3, 3, 1, 1)));    // the stem
}

}  // namespace
}  // namespace bastion
