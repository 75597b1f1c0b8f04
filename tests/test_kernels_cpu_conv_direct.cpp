// Kernel-level tests of the direct convolution (kernels/cpu/conv_direct.h): forward and backward of every
// variant, the AVX2 one included, against the reference loops and the double backward of
// conv_test_support.h, on the supported cases of kConvCases plus the FL layer shapes, and thread-count
// determinism. Outputs and workspaces start as NaN so an unwritten element or an uninitialised read shows.
// On a build without AVX-512 every variant runs the AVX2 kernels; on a CPU with neither the tests are
// reported skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

#include "kernels/cpu/conv_direct.h"
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
using testing::kConvCases;
using testing::kNaN;
using testing::make_conv;
using testing::randn;

// ---- the direct path (kernels/cpu/conv_direct.h): the same oracles, on every case it supports plus the
// FL layer shapes it was written for. Each shape exercises a different register-block choice: K = 6
// (6-channel blocks), 16 and 32 (8), 7 and 50 (4, padded channels); row-strided planes whose last
// vector is partial; padding up to R - 1 (the grad_in transposed convolution then pads by 0).
const ConvCase kDirectConvCases[] = {
    {3, 1, 28, 28, 6, 5, 5, 1, 0},   // LeNet-28 conv1
    {2, 6, 12, 12, 16, 5, 5, 1, 0},  // LeNet-28 conv2
    {2, 3, 14, 14, 32, 5, 5, 1, 0},  // cnn-fedcap-like
    {2, 5, 9, 11, 7, 3, 3, 1, 1},    // K = 7, padding 1
    {1, 2, 3, 40, 5, 3, 2, 1, 1},    // wide, short plane: many vectors per row block
    {2, 4, 6, 5, 50, 3, 3, 1, 2},    // padding R - 1
    {9, 2, 5, 5, 3, 2, 2, 1, 0},     // N not a multiple of the weight-gradient sample chunk
    {3, 1, 28, 28, 4, 5, 5, 1, 0},   // cnn-fedfsa conv1 (AVX2: 4 channels x 3 vectors)
    {2, 4, 12, 12, 12, 5, 5, 1, 0},  // cnn-fedfsa conv2 (AVX2: 6 channels x 2 vectors; grad_in 4 channels)
    // channel vectors (K % 16 == 0; grad_in also C % 16 == 0): 1, 2 and 4 vectors per block
    {3, 16, 14, 14, 64, 5, 5, 1, 0},  // cnn-fedcap conv2 shape, smaller C
    {2, 16, 7, 9, 32, 3, 3, 1, 1},    // padding 1, rows split into unequal blocks
    {5, 32, 6, 6, 16, 5, 5, 1, 2},    // padding R - 1: most filter rows of grad_in meet only padding
    {2, 3, 30, 30, 16, 3, 3, 1, 0},   // wide rows (28 outputs: two 14-blocks), C not a multiple of 16
    // row-scatter blocks (5-wide filters, 1 or 2 channel vectors): edge blocks skip the zero columns
    {2, 32, 14, 14, 64, 5, 5, 1, 0},  // cnn-fedcap conv2: grad_in 2 vectors, 14 = 7 + 7
    {2, 32, 8, 8, 32, 5, 5, 1, 0},    // one block per row, both edges skipped; forward 2 vectors
    {2, 16, 11, 23, 16, 5, 5, 1, 0},  // 23 = 8 + 8 + 7: a middle block; 1 vector
    {2, 32, 9, 13, 32, 5, 5, 1, 2},   // padding 2: the edge columns are not all zero, none skipped
    {2, 32, 9, 9, 16, 6, 5, 1, 1},    // 6 x 5 filter, padding 1: grad_in pads 4 rows but only 3 columns
    {3, 16, 12, 10, 96, 5, 3, 1, 1},  // 3-wide filters: the gather blocks
};

const ConvDirectVariant kDirectVariants[] = {ConvDirectVariant::RowStrided, ConvDirectVariant::ChannelVector,
                                             ConvDirectVariant::ChannelScatter, ConvDirectVariant::RowStridedAvx2,
                                             ConvDirectVariant::Auto};

constexpr const char* kNoDirectPath = "no direct path: a build without AVX-512 on a CPU without AVX2 and FMA";

// False on a build without AVX-512 (-march of a CPU that lacks it) running on a CPU without AVX2 + FMA: the
// direct path is then never taken.
bool direct_path_built() { return conv2d_direct_supported(conv2d_geometry(1, 1, 5, 5, 1, 3, 3, 1, 0)); }

std::vector<ConvCase> direct_cases() {
  std::vector<ConvCase> cases;
  for (const ConvCase& c : kConvCases)
    if (conv2d_direct_supported(conv2d_geometry(c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.padding)))
      cases.push_back(c);
  cases.insert(cases.end(), std::begin(kDirectConvCases), std::end(kDirectConvCases));
  return cases;
}

TEST(KernelsCpuConvDirect, SupportsStrideOneWithPaddingBelowTheKernel) {
  if (!direct_path_built()) GTEST_SKIP() << kNoDirectPath;
  EXPECT_TRUE(conv2d_direct_supported(conv2d_geometry(1, 1, 5, 5, 1, 3, 3, 1, 2)));
  EXPECT_FALSE(conv2d_direct_supported(conv2d_geometry(1, 1, 5, 5, 1, 3, 3, 2, 0)));  // stride 2
  EXPECT_FALSE(conv2d_direct_supported(conv2d_geometry(1, 1, 5, 5, 1, 3, 3, 1, 3)));  // padding = R
}

// The op's choice: every supported layer with AVX-512; on AVX2 only layers of at most 32 output channels and
// a reduction C R S of at most 150 (the ladder's wins, conv_direct.cpp).
TEST(KernelsCpuConvDirect, TheOpPrefersItWhereItsLadderWon) {
  if (!direct_path_built()) GTEST_SKIP() << kNoDirectPath;
#if defined(__AVX512F__)
  constexpr bool kEverySupportedLayer = true;
#else
  constexpr bool kEverySupportedLayer = false;
#endif
  EXPECT_TRUE(conv2d_direct_preferred(conv2d_geometry(64, 6, 12, 12, 16, 5, 5, 1, 0)));  // LeNet conv2: C R S 150
  EXPECT_TRUE(conv2d_direct_preferred(conv2d_geometry(64, 3, 32, 32, 32, 5, 5, 1, 0)));  // cnn-fedcap conv1
  EXPECT_FALSE(conv2d_direct_preferred(conv2d_geometry(1, 1, 5, 5, 1, 3, 3, 2, 0)));     // stride 2: unsupported
  EXPECT_EQ(conv2d_direct_preferred(conv2d_geometry(64, 3, 32, 32, 64, 5, 5, 1, 0)), kEverySupportedLayer);  // 64 out
  EXPECT_EQ(conv2d_direct_preferred(conv2d_geometry(64, 7, 12, 12, 16, 5, 5, 1, 0)),
            kEverySupportedLayer);  // C R S 175
}

TEST(KernelsCpuConvDirect, ForwardMatchesReference) {
  if (!direct_path_built()) GTEST_SKIP() << kNoDirectPath;
  uint64_t seed = 70;
  for (const ConvCase& c : direct_cases()) {
    SCOPED_TRACE(::testing::Message() << c);
    const ConvData d = make_conv(c, seed++);
    const Conv2dGeometry& g = d.g;
    const int64_t out_numel = g.N * g.K * g.OH * g.OW;
    for (const auto& [with_bias, variant] :
         {std::pair{true, ConvDirectVariant::RowStrided}, std::pair{false, ConvDirectVariant::RowStrided},
          std::pair{true, ConvDirectVariant::ChannelVector}, std::pair{false, ConvDirectVariant::ChannelVector},
          std::pair{true, ConvDirectVariant::ChannelScatter}, std::pair{false, ConvDirectVariant::ChannelScatter},
          std::pair{true, ConvDirectVariant::RowStridedAvx2}, std::pair{false, ConvDirectVariant::RowStridedAvx2},
          std::pair{true, ConvDirectVariant::Auto}}) {
      SCOPED_TRACE(::testing::Message() << "variant " << static_cast<int>(variant) << " bias " << with_bias);
      const float* bias = with_bias ? d.bias.data() : nullptr;
      std::vector<float> out(out_numel, kNaN), workspace(conv2d_direct_workspace_floats(g, 1), kNaN);
      conv2d_direct_forward_cpu(out.data(), d.in.data(), d.weight.data(), bias, g, workspace.data(), 1, variant);
      expect_forward_matches_reference(out, d, with_bias, "conv2d_direct_forward_cpu");
    }
  }
}

TEST(KernelsCpuConvDirect, BackwardMatchesReference) {
  if (!direct_path_built()) GTEST_SKIP() << kNoDirectPath;
  uint64_t seed = 90;
  for (const ConvCase& c : direct_cases()) {
    SCOPED_TRACE(::testing::Message() << c);
    const ConvData d = make_conv(c, seed++);
    const Conv2dGeometry& g = d.g;
    Generator gen(seed * 5);
    const std::vector<float> grad_out = randn(g.N * g.K * g.OH * g.OW, gen);
    const ConvGrads want = conv_backward_reference(d, grad_out);
    for (const ConvDirectVariant variant : kDirectVariants) {
      SCOPED_TRACE(::testing::Message() << "variant " << static_cast<int>(variant));
      std::vector<float> grad_in(d.in.size(), kNaN), grad_w(d.weight.size(), kNaN), grad_b(g.K, kNaN);
      std::vector<float> workspace(conv2d_direct_workspace_floats(g, 1), kNaN);
      conv2d_direct_backward_cpu(grad_in.data(), grad_w.data(), grad_b.data(), grad_out.data(), d.in.data(),
                                 d.weight.data(), g, workspace.data(), 1, variant);
      expect_close(grad_in, want.in, want.in_mag, g.K * g.R * g.S, "grad_in");
      expect_close(grad_w, want.weight, want.weight_mag, g.N * g.out_plane(), "grad_weight");
      expect_close(grad_b, want.bias, want.bias_mag, g.N * g.out_plane(), "grad_bias");

      // Null outputs are skipped and the others come out bitwise the same.
      std::vector<float> grad_w_only(d.weight.size(), kNaN);
      std::fill(workspace.begin(), workspace.end(), kNaN);
      conv2d_direct_backward_cpu(nullptr, grad_w_only.data(), nullptr, grad_out.data(), d.in.data(), d.weight.data(), g,
                                 workspace.data(), 1, variant);
      EXPECT_TRUE(bitwise_equal(grad_w, grad_w_only));
    }
  }
}

// The thread count changes who computes an output, never how: 1, 2 and 3 threads agree bitwise. The
// second case is LeNet-32 conv1 with N = 6: its weight gradient sweeps one sample at a time (a chunk's rows
// exceed L1), keeping partial sums across a chunk boundary and ending inside a chunk.
TEST(KernelsCpuConvDirect, ResultsDoNotDependOnTheThreadCount) {
  for (const ConvCase& c : {ConvCase{8, 16, 12, 12, 32, 5, 5, 1, 1}, ConvCase{6, 3, 32, 32, 6, 5, 5, 1, 0}}) {
    SCOPED_TRACE(::testing::Message() << c);
    const ConvData d = make_conv(c, 123);
    const Conv2dGeometry& g = d.g;
    if (!conv2d_direct_supported(g)) GTEST_SKIP() << kNoDirectPath;
    Generator gen(124);
    const std::vector<float> grad_out = randn(g.N * g.K * g.OH * g.OW, gen);
    for (const ConvDirectVariant variant : kDirectVariants) {
      auto run = [&](int threads) {
        std::vector<float> workspace(conv2d_direct_workspace_floats(g, threads), kNaN);
        std::vector<float> out(g.N * g.K * g.out_plane()), gi(d.in.size()), gw(d.weight.size()), gb(g.K);
        conv2d_direct_forward_cpu(out.data(), d.in.data(), d.weight.data(), d.bias.data(), g, workspace.data(), threads,
                                  variant);
        conv2d_direct_backward_cpu(gi.data(), gw.data(), gb.data(), grad_out.data(), d.in.data(), d.weight.data(), g,
                                   workspace.data(), threads, variant);
        return std::vector<std::vector<float>>{out, gi, gw, gb};
      };
      const auto one = run(1);
      for (const int threads : {2, 3}) {
        const auto many = run(threads);
        for (size_t i = 0; i < one.size(); ++i)
          EXPECT_TRUE(bitwise_equal(one[i], many[i]))
              << i << ", " << threads << " threads, variant " << static_cast<int>(variant);
      }
    }
  }
}

}  // namespace
}  // namespace bastion
