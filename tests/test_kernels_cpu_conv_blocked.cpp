// Kernel-level tests of the channel-blocked convolution (kernels/cpu/conv_blocked.h), each instruction set
// this build and CPU can run (AVX-512 in a build with it, AVX2 on any x86-64 CPU with AVX2 and FMA): forward
// and backward against the reference loops and the double backward of conv_test_support.h, and thread-count
// determinism. Outputs and workspaces start as NaN so an unwritten element or an uninitialised read shows.
// Where neither runs the tests are reported skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/conv_blocked.h"
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
using testing::expect_forward_matches_reference;
using testing::kNaN;
using testing::make_conv;
using testing::randn;

// Each case exercises a different part of the plan: register blocks of 1, 2 and 4 output-channel vectors
// (K or C = 16 / 48, 32, 64 / 128); rows split into blocks of unequal width (W = 13, 20); planes whose
// pixel count is not a multiple of 16 (the conversions' masked tails); stride 2 on even and odd sizes (the
// 4 parity classes of grad_in, a class with one row); 1x1 and 2x3 planes; odd batches (the threads' sample
// ranges and the weight gradient's sample chunks and groups).
const ConvCase kBlockedCases[] = {
    {3, 16, 8, 8, 16, 3, 3, 1, 1},    // smallest channel counts, KV = 1
    {3, 32, 7, 9, 48, 3, 3, 1, 1},    // K = 48: KV = 1 forward, 2 grad_in; 63 pixels
    {2, 16, 13, 20, 64, 3, 3, 1, 1},  // KV = 4 forward, rows of 20 = 4 blocks of 5, 13 = 7 + 6 ...
    {3, 64, 6, 6, 32, 3, 3, 1, 1},    // grad_in KV = 4
    {3, 16, 9, 7, 32, 3, 3, 2, 1},    // stride 2, odd sizes: parity classes of 5 and 4 rows
    {1, 32, 8, 10, 64, 3, 3, 2, 1},   // stride 2, even sizes
    {5, 16, 1, 1, 16, 3, 3, 1, 1},    // 1x1 plane: only the centre tap meets data
    {3, 16, 2, 3, 32, 3, 3, 2, 1},    // stride 2 on a 2x3 plane: 1x2 output, a class with one pixel
    {7, 48, 4, 4, 64, 3, 3, 1, 1},    // ResNet18's last stage shape at small C: several samples per group
    {3, 128, 4, 4, 64, 3, 3, 2, 1},   // 128 -> 64 channels, stride 2 to 2x2
    // filter banks over 1.5 MB: forward and grad_in run output group by output group over all samples
    {3, 224, 3, 3, 224, 3, 3, 1, 1},  // 1.8 MB; 3-wide rows want KV = 4, which does not divide 14 blocks: 2
    {3, 256, 4, 5, 192, 3, 3, 2, 1},  // 1.8 MB, stride 2, KV = 4
};

// The instruction sets to test: each one this build and CPU can run.
std::vector<ConvBlockedIsa> isas() {
  std::vector<ConvBlockedIsa> out;
  for (const ConvBlockedIsa isa : {ConvBlockedIsa::Avx512, ConvBlockedIsa::Avx2})
    if (conv2d_blocked_isa_available(isa)) out.push_back(isa);
  return out;
}

const char* isa_name(ConvBlockedIsa isa) { return isa == ConvBlockedIsa::Avx512 ? "AVX-512" : "AVX2"; }

bool blocked_path_built() { return !isas().empty(); }
constexpr const char* kNoIsa = "neither AVX-512 (built) nor AVX2 + FMA (CPU) available";

TEST(KernelsCpuConvBlocked, SupportsResNetsThreeByThreeLayers) {
  if (!blocked_path_built()) GTEST_SKIP() << kNoIsa;
  EXPECT_TRUE(conv2d_blocked_supported(conv2d_geometry(64, 64, 32, 32, 64, 3, 3, 1, 1)));
  EXPECT_TRUE(conv2d_blocked_supported(conv2d_geometry(64, 256, 8, 8, 512, 3, 3, 2, 1)));
  EXPECT_FALSE(conv2d_blocked_supported(conv2d_geometry(1, 3, 32, 32, 64, 3, 3, 1, 1)));  // C = 3
  EXPECT_FALSE(conv2d_blocked_supported(conv2d_geometry(1, 16, 8, 8, 24, 3, 3, 1, 1)));   // K = 24
  EXPECT_FALSE(conv2d_blocked_supported(conv2d_geometry(1, 16, 8, 8, 16, 3, 3, 1, 0)));   // padding 0
  EXPECT_FALSE(conv2d_blocked_supported(conv2d_geometry(1, 16, 8, 8, 16, 1, 1, 2, 0)));   // 1x1 shortcut
  EXPECT_FALSE(conv2d_blocked_supported(conv2d_geometry(1, 16, 8, 8, 16, 3, 3, 3, 1)));   // stride 3
}

TEST(KernelsCpuConvBlocked, ForwardMatchesReference) {
  if (!blocked_path_built()) GTEST_SKIP() << kNoIsa;
  for (const ConvBlockedIsa isa : isas()) {
    SCOPED_TRACE(isa_name(isa));
    uint64_t seed = 500;
    for (const ConvCase& c : kBlockedCases) {
      SCOPED_TRACE(::testing::Message() << c);
      const ConvData d = make_conv(c, seed++);
      const Conv2dGeometry& g = d.g;
      ASSERT_TRUE(conv2d_blocked_supported(g, isa));
      for (const bool with_bias : {true, false}) {
        SCOPED_TRACE(::testing::Message() << "bias " << with_bias);
        std::vector<float> out(g.N * g.K * g.out_plane(), kNaN);
        std::vector<float> workspace(conv2d_blocked_forward_workspace_floats(g), kNaN);
        conv2d_blocked_forward_cpu(out.data(), d.in.data(), d.weight.data(), with_bias ? d.bias.data() : nullptr, g,
                                   workspace.data(), 1, isa);
        expect_forward_matches_reference(out, d, with_bias, "conv2d_blocked_forward_cpu");
      }
    }
  }
}

// Planes large enough that the forward runs the batch in chunks (48 MiB of blocked copies: 4 samples of
// 16 channels at 280 x 280, then 1): the samples on both sides of the chunk boundary, and the first,
// against the reference loops one sample at a time.
TEST(KernelsCpuConvBlocked, ForwardRunsLargeBatchesInChunks) {
  if (!blocked_path_built()) GTEST_SKIP() << kNoIsa;
  const ConvCase c{5, 16, 280, 280, 16, 3, 3, 1, 1};
  const ConvData d = make_conv(c, 650);
  const Conv2dGeometry& g = d.g;
  ASSERT_LT(conv2d_blocked_forward_workspace_floats(g), g.N * (g.C * (g.H + 2) * (g.W + 2) + g.K * g.out_plane()));
  std::vector<float> out(g.N * g.K * g.out_plane(), kNaN), workspace(conv2d_blocked_forward_workspace_floats(g), kNaN);
  conv2d_blocked_forward_cpu(out.data(), d.in.data(), d.weight.data(), d.bias.data(), g, workspace.data(), 1);
  const int64_t in_sample = g.C * g.H * g.W, out_sample = g.K * g.out_plane();
  for (const int64_t n : {0, 3, 4}) {
    SCOPED_TRACE(::testing::Message() << "sample " << n);
    ConvData one{conv2d_geometry(1, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.padding),
                 std::vector<float>(d.in.begin() + n * in_sample, d.in.begin() + (n + 1) * in_sample), d.weight,
                 d.bias};
    expect_forward_matches_reference(
        std::vector<float>(out.begin() + n * out_sample, out.begin() + (n + 1) * out_sample), one, true,
        "conv2d_blocked_forward_cpu");
  }
}

TEST(KernelsCpuConvBlocked, BackwardMatchesReference) {
  if (!blocked_path_built()) GTEST_SKIP() << kNoIsa;
  for (const ConvBlockedIsa isa : isas()) {
    SCOPED_TRACE(isa_name(isa));
    uint64_t seed = 600;
    for (const ConvCase& c : kBlockedCases) {
      SCOPED_TRACE(::testing::Message() << c);
      const ConvData d = make_conv(c, seed++);
      const Conv2dGeometry& g = d.g;
      Generator gen(seed * 7);
      const std::vector<float> grad_out = randn(g.N * g.K * g.out_plane(), gen);
      const ConvGrads want = conv_backward_reference(d, grad_out);
      std::vector<float> grad_in(d.in.size(), kNaN), grad_w(d.weight.size(), kNaN), grad_b(g.K, kNaN);
      std::vector<float> workspace(conv2d_blocked_workspace_floats(g), kNaN);
      conv2d_blocked_backward_cpu(grad_in.data(), grad_w.data(), grad_b.data(), grad_out.data(), d.in.data(),
                                  d.weight.data(), g, workspace.data(), 1, isa);
      // Same bounds as the direct path's test: each gradient element is a sum of K R S (grad_in) or
      // N OH OW (grad_weight, grad_bias) float products, checked against sum|terms| in double.
      expect_close(grad_in, want.in, want.in_mag, g.K * g.R * g.S, "grad_in");
      expect_close(grad_w, want.weight, want.weight_mag, g.N * g.out_plane(), "grad_weight");
      expect_close(grad_b, want.bias, want.bias_mag, g.N * g.out_plane(), "grad_bias");

      // Null outputs are skipped and the others come out bitwise the same.
      std::vector<float> grad_w_only(d.weight.size(), kNaN), grad_in_only(d.in.size(), kNaN);
      std::fill(workspace.begin(), workspace.end(), kNaN);
      conv2d_blocked_backward_cpu(nullptr, grad_w_only.data(), nullptr, grad_out.data(), d.in.data(), d.weight.data(),
                                  g, workspace.data(), 1, isa);
      EXPECT_TRUE(bitwise_equal(grad_w, grad_w_only));
      std::fill(workspace.begin(), workspace.end(), kNaN);
      conv2d_blocked_backward_cpu(grad_in_only.data(), nullptr, nullptr, grad_out.data(), d.in.data(), d.weight.data(),
                                  g, workspace.data(), 1, isa);
      EXPECT_TRUE(bitwise_equal(grad_in, grad_in_only));
    }
  }
}

// The thread count changes who computes an output, never how: 1, 2 and 3 threads agree bitwise, on a
// stride-1 and a stride-2 layer large enough for every pass to go parallel (kParallelMinWork), on a
// filter bank over 1.5 MB (output group by output group), and on a stride-2 layer of 128 channels (its
// weight gradient by columns without AVX-512).
TEST(KernelsCpuConvBlocked, ResultsDoNotDependOnTheThreadCount) {
  if (!blocked_path_built()) GTEST_SKIP() << kNoIsa;
  for (const ConvBlockedIsa isa : isas()) {
    SCOPED_TRACE(isa_name(isa));
    for (const ConvCase& c : {ConvCase{7, 32, 10, 10, 64, 3, 3, 1, 1}, ConvCase{5, 32, 11, 12, 64, 3, 3, 2, 1},
                              ConvCase{5, 224, 3, 3, 224, 3, 3, 1, 1}, ConvCase{5, 128, 6, 6, 32, 3, 3, 2, 1}}) {
      SCOPED_TRACE(::testing::Message() << c);
      const ConvData d = make_conv(c, 700 + c.stride);
      const Conv2dGeometry& g = d.g;
      Generator gen(710 + c.stride);
      const std::vector<float> grad_out = randn(g.N * g.K * g.out_plane(), gen);
      auto run = [&](int threads) {
        std::vector<float> workspace(conv2d_blocked_workspace_floats(g), kNaN);
        std::vector<float> out(g.N * g.K * g.out_plane()), gi(d.in.size()), gw(d.weight.size()), gb(g.K);
        conv2d_blocked_forward_cpu(out.data(), d.in.data(), d.weight.data(), d.bias.data(), g, workspace.data(),
                                   threads, isa);
        conv2d_blocked_backward_cpu(gi.data(), gw.data(), gb.data(), grad_out.data(), d.in.data(), d.weight.data(), g,
                                    workspace.data(), threads, isa);
        return std::vector<std::vector<float>>{out, gi, gw, gb};
      };
      testing::expect_same_bits_at_any_thread_count(run);
    }
  }
}

// Without AVX-512 the op takes the AVX2 kernels where their ladder won (conv2d_blocked_preferred): every
// stride-1 layer, and stride 2 on planes at least 16 wide.
TEST(KernelsCpuConvBlocked, WithoutAvx512TheOpPrefersItWhereItsLadderWon) {
  if (conv2d_blocked_isa_available(ConvBlockedIsa::Avx512)) GTEST_SKIP() << "built with AVX-512: every layer";
  if (!conv2d_blocked_isa_available(ConvBlockedIsa::Avx2)) GTEST_SKIP() << kNoIsa;
  EXPECT_TRUE(conv2d_blocked_preferred(conv2d_geometry(64, 64, 32, 32, 64, 3, 3, 1, 1)));
  EXPECT_TRUE(conv2d_blocked_preferred(conv2d_geometry(64, 512, 4, 4, 512, 3, 3, 1, 1)));
  EXPECT_TRUE(conv2d_blocked_preferred(conv2d_geometry(64, 128, 16, 16, 256, 3, 3, 2, 1)));
  EXPECT_FALSE(conv2d_blocked_preferred(conv2d_geometry(64, 256, 8, 8, 512, 3, 3, 2, 1)));
  EXPECT_FALSE(conv2d_blocked_preferred(conv2d_geometry(64, 3, 32, 32, 64, 3, 3, 1, 1)));  // C = 3
}

}  // namespace
}  // namespace bastion
