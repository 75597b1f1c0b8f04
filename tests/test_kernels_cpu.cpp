// Kernel-level tests for kernels/cpu: im2col+GEMM conv against the reference loops (forward) and a double
// backward (the direct AVX-512 conv: test_kernels_cpu_conv_direct.cpp; the GEMMs:
// test_kernels_cpu_gemm.cpp), small hand-computed examples for conv and batch norm, and thread-count
// determinism (pooling and softmax/cross-entropy/KL: test_kernels_cpu_pool_softmax.cpp). Output buffers start as NaN (or a sentinel) so an element a kernel forgot to write shows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/batchnorm.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/optim.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/softmax.h"
#include "tensor/random.h"
#include "tensor/tensor.h"
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
using testing::ThreadCountGuard;

// ================================================================================================ conv

TEST(KernelsCpuConv, MultiChunkCaseReallyHasSeveralChunks) {
  const ConvCase& c = kConvCases[std::size(kConvCases) - 1];
  const Conv2dGeometry g = conv2d_geometry(c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.padding);
  EXPECT_LT(conv2d_chunk_samples(g), g.N);
  EXPECT_NE(g.N % conv2d_chunk_samples(g), 0) << "the last chunk should be a partial one";
}

TEST(KernelsCpuConv, Im2colGemmForwardMatchesDirect) {
  uint64_t seed = 10;
  for (const ConvCase& c : kConvCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const ConvData d = make_conv(c, seed++);
    const Conv2dGeometry& g = d.g;
    const int64_t out_numel = g.N * g.K * g.OH * g.OW;
    for (const bool with_bias : {true, false}) {
      const float* bias = with_bias ? d.bias.data() : nullptr;
      std::vector<float> out(out_numel, kNaN), workspace(conv2d_workspace_floats(g), kNaN);
      conv2d_forward_cpu(out.data(), d.in.data(), d.weight.data(), bias, g, workspace.data());
      expect_forward_matches_reference(out, d, with_bias,
                                       with_bias ? "conv2d_forward_cpu (bias)" : "conv2d_forward_cpu");
    }
  }
}

TEST(KernelsCpuConv, Im2colGemmBackwardMatchesDirect) {
  uint64_t seed = 40;
  for (const ConvCase& c : kConvCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const ConvData d = make_conv(c, seed++);
    const Conv2dGeometry& g = d.g;
    Generator gen(seed * 7);
    const std::vector<float> grad_out = randn(g.N * g.K * g.OH * g.OW, gen);
    std::vector<float> grad_in(d.in.size(), kNaN), grad_w(d.weight.size(), kNaN), grad_b(g.K, kNaN);
    std::vector<float> workspace(conv2d_workspace_floats(g), kNaN);
    conv2d_backward_cpu(grad_in.data(), grad_w.data(), grad_b.data(), grad_out.data(), d.in.data(), d.weight.data(), g,
                        workspace.data());
    const ConvGrads want = conv_backward_reference(d, grad_out);
    // grad_in sums over K*R*S products at most; grad_weight and grad_bias over N*OH*OW.
    expect_close(grad_in, want.in, want.in_mag, g.K * g.R * g.S, "grad_in");
    expect_close(grad_w, want.weight, want.weight_mag, g.N * g.out_plane(), "grad_weight");
    expect_close(grad_b, want.bias, want.bias_mag, g.N * g.out_plane(), "grad_bias");

    // The first-layer call (no grad_in, no grad_bias) gives bitwise the same grad_weight.
    std::vector<float> grad_w_only(d.weight.size(), kNaN);
    std::fill(workspace.begin(), workspace.end(), kNaN);
    conv2d_backward_cpu(nullptr, grad_w_only.data(), nullptr, grad_out.data(), d.in.data(), d.weight.data(), g,
                        workspace.data());
    EXPECT_EQ(0, std::memcmp(grad_w.data(), grad_w_only.data(), grad_w.size() * sizeof(float)));
  }
}

// col2im adds each (c, r, s) row of the columns back onto its input pixels. Whatever order the library
// walks the rows in, every pixel must receive its terms in ascending (r, s) order, at most one per (r, s):
// the result is bitwise that of the plainest scatter, one (sample, channel) plane at a time, here at 1
// and 3 threads, on every geometry of the conv table (strides 1-3, padding, non-square kernels) and on
// an offset chunk of samples.
TEST(KernelsCpuConv, Col2imAddsEachPixelsTermsInTapOrder) {
  ThreadCountGuard restore_threads;
  uint64_t seed = 90;
  for (const ConvCase& c : kConvCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const Conv2dGeometry g = conv2d_geometry(c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.padding);
    const int64_t n_begin = g.N / 2, n_count = g.N - n_begin, P = g.out_plane(), row_len = n_count * P;
    Generator gen(seed++);
    const std::vector<float> cols = randn(g.crs() * row_len, gen), start = randn(g.N * g.C * g.H * g.W, gen);
    std::vector<float> want = start;
    for (int64_t n = 0; n < n_count; ++n)
      for (int64_t ch = 0; ch < g.C; ++ch)
        for (int64_t r = 0; r < g.R; ++r)
          for (int64_t s = 0; s < g.S; ++s)
            for (int64_t oh = 0; oh < g.OH; ++oh)
              for (int64_t ow = 0; ow < g.OW; ++ow) {
                const int64_t ih = oh * g.stride - g.padding + r, iw = ow * g.stride - g.padding + s;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                want[(((n_begin + n) * g.C + ch) * g.H + ih) * g.W + iw] +=
                    cols[((ch * g.R + r) * g.S + s) * row_len + n * P + oh * g.OW + ow];
              }
    for (const int threads : {1, 3}) {
      set_num_threads(threads);
      std::vector<float> got = start;
      col2im_add_cpu(got.data(), cols.data(), g, n_begin, n_count);
      EXPECT_TRUE(bitwise_equal(got, want)) << threads << " threads";
    }
  }
}

// The weight gradient alone over chunks the caller picks (conv_blocked's stride-2 path): a short last
// chunk and one sample a chunk stay within the reference's bound, 1, 2 and 3 threads (over 3 panels of 16
// input channels, the last one short) agree bitwise, and an empty batch assigns zeros.
TEST(KernelsCpuConv, WeightGradientInChunksMatchesReference) {
  const ConvData d = make_conv(ConvCase{5, 40, 9, 8, 24, 3, 3, 2, 1}, 77);
  const Conv2dGeometry& g = d.g;
  Generator gen(78);
  const std::vector<float> grad_out = randn(g.N * g.K * g.out_plane(), gen);
  const ConvGrads want = conv_backward_reference(d, grad_out);
  auto weight_gradient = [&](const Conv2dGeometry& geometry, int64_t chunk, int threads) {
    std::vector<float> grad_w(d.weight.size(), kNaN);
    std::vector<float> workspace(conv2d_backward_weight_workspace_floats(geometry, chunk, threads), kNaN);
    conv2d_backward_weight_cpu(grad_w.data(), grad_out.data(), d.in.data(), geometry, chunk, workspace.data(), threads);
    return grad_w;
  };
  for (const int64_t chunk : {int64_t{1}, int64_t{2}, g.N}) {
    SCOPED_TRACE(::testing::Message() << "chunk " << chunk);
    const std::vector<float> grad_w = weight_gradient(g, chunk, 1);
    expect_close(grad_w, want.weight, want.weight_mag, g.N * g.out_plane(), "grad_weight");
    for (const int threads : {2, 3}) EXPECT_TRUE(bitwise_equal(grad_w, weight_gradient(g, chunk, threads)));
  }
  Conv2dGeometry empty = g;
  empty.N = 0;
  EXPECT_EQ(weight_gradient(empty, 1, 2), std::vector<float>(d.weight.size(), 0.0f));
  EXPECT_THROW(weight_gradient(g, 0, 1), Error);
  EXPECT_THROW(weight_gradient(g, 1, 0), Error);
}

// An empty batch still ASSIGNS the weight and bias gradients (zeros), as the contract says.
TEST(KernelsCpuConv, EmptyBatchAssignsZeroGradients) {
  const Conv2dGeometry g = conv2d_geometry(0, 2, 5, 5, 3, 3, 3, 1, 1);
  std::vector<float> grad_w(3 * 2 * 3 * 3, kNaN), grad_b(3, kNaN);
  std::vector<float> workspace(conv2d_workspace_floats(g), kNaN);
  const float unused = 0.0f;
  conv2d_backward_cpu(nullptr, grad_w.data(), grad_b.data(), &unused, &unused, grad_w.data(), g, workspace.data());
  EXPECT_EQ(grad_w, std::vector<float>(grad_w.size(), 0.0f));
  EXPECT_EQ(grad_b, std::vector<float>(3, 0.0f));
}

// in = 1..9 as a 3x3 image, weight [[1, 2], [3, 4]], bias 0.5.
TEST(KernelsCpuConv, HandComputedTwoByTwoKernel) {
  const std::vector<float> in = {1, 2, 3, 4, 5, 6, 7, 8, 9}, weight = {1, 2, 3, 4};
  const float bias = 0.5f;
  {  // stride 1, no padding: out[i][j] = x[i][j] + 2 x[i][j+1] + 3 x[i+1][j] + 4 x[i+1][j+1]
    const Conv2dGeometry g = conv2d_geometry(1, 1, 3, 3, 1, 2, 2, 1, 0);
    std::vector<float> out(4, kNaN), workspace(conv2d_workspace_floats(g), kNaN);
    conv2d_forward_cpu(out.data(), in.data(), weight.data(), &bias, g, workspace.data());
    EXPECT_EQ(out, (std::vector<float>{37.5f, 47.5f, 67.5f, 77.5f}));
    // Backward with grad_out = 1: grad_weight[r][s] = sum of the 2x2 block of x at offset (r, s);
    // grad_in[i][j] = sum of the weights whose window covers (i, j); grad_bias = number of outputs.
    const std::vector<float> ones(4, 1.0f);
    std::vector<float> grad_in(9, kNaN), grad_w(4, kNaN), grad_b(1, kNaN);
    conv2d_backward_cpu(grad_in.data(), grad_w.data(), grad_b.data(), ones.data(), in.data(), weight.data(), g,
                        workspace.data());
    EXPECT_EQ(grad_w, (std::vector<float>{12, 16, 24, 28}));
    EXPECT_EQ(grad_in, (std::vector<float>{1, 3, 2, 4, 10, 6, 3, 7, 4}));
    EXPECT_EQ(grad_b, (std::vector<float>{4}));
  }
  {  // stride 2, padding 1: windows start at -1 and 1, so out = [[4 x00, 3 x01 + 4 x02],
     //                                                        [2 x10 + 4 x20, x11 + 2 x12 + 3 x21 + 4 x22]]
    const Conv2dGeometry g = conv2d_geometry(1, 1, 3, 3, 1, 2, 2, 2, 1);
    ASSERT_EQ(g.OH, 2);
    ASSERT_EQ(g.OW, 2);
    std::vector<float> out(4, kNaN), workspace(conv2d_workspace_floats(g), kNaN);
    conv2d_forward_cpu(out.data(), in.data(), weight.data(), nullptr, g, workspace.data());
    EXPECT_EQ(out, (std::vector<float>{4, 18, 36, 77}));
  }
}

// ========================================================================================== batch norm

TEST(KernelsCpuBatchNorm, ForwardMatchesDirectComputation) {
  Generator gen(7);
  const BatchNormGeometry g{3, 4, 5};  // N, C, L
  const int64_t numel = g.N * g.C * g.L, M = g.N * g.L;
  const std::vector<float> x = randn(numel, gen, 2.0), gamma = randn(g.C, gen), beta = randn(g.C, gen);
  const std::vector<float> rm0 = randn(g.C, gen, 0.5);
  std::vector<float> rv0(g.C);
  for (float& v : rv0) v = static_cast<float>(0.5 + gen.uniform());
  const float momentum = 0.1f, eps = 1e-5f;
  // y is O(|gamma| * 3) from O(M) float operations at most: 1e-5 relative covers the float path.
  constexpr double kBatchNormTolerance = 1e-5;

  for (const bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "eval");
    std::vector<float> y(numel, kNaN), mean(g.C, kNaN), invstd(g.C, kNaN), rm = rm0, rv = rv0;
    batch_norm_forward_cpu(y.data(), mean.data(), invstd.data(), x.data(), gamma.data(), beta.data(), rm.data(),
                           rv.data(), g, training, momentum, eps);
    for (int64_t c = 0; c < g.C; ++c) {
      double m = 0, v = 0;
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t l = 0; l < g.L; ++l) m += x[(n * g.C + c) * g.L + l];
      m /= M;
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t l = 0; l < g.L; ++l) v += std::pow(x[(n * g.C + c) * g.L + l] - m, 2);
      v /= M;  // biased, used to normalise
      const double use_mean = training ? m : rm0[c], use_var = training ? v : rv0[c];
      const double is = 1.0 / std::sqrt(use_var + eps);
      EXPECT_NEAR(mean[c], use_mean, kBatchNormTolerance * (1 + std::abs(use_mean)));
      EXPECT_NEAR(invstd[c], is, kBatchNormTolerance * is);
      const double want_rm = training ? (1 - momentum) * rm0[c] + momentum * m : rm0[c];
      const double want_rv = training ? (1 - momentum) * rv0[c] + momentum * v * M / (M - 1) : rv0[c];  // unbiased
      EXPECT_NEAR(rm[c], want_rm, kBatchNormTolerance * (1 + std::abs(want_rm)));
      EXPECT_NEAR(rv[c], want_rv, kBatchNormTolerance * (1 + std::abs(want_rv)));
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t l = 0; l < g.L; ++l) {
          const int64_t i = (n * g.C + c) * g.L + l;
          const double want = gamma[c] * (x[i] - use_mean) * is + beta[c];
          EXPECT_NEAR(y[i], want, kBatchNormTolerance * (1 + std::abs(want))) << "n " << n << " c " << c << " l " << l;
        }
    }
  }
}

TEST(KernelsCpuBatchNorm, TrainingOutputHasZeroMeanUnitVariance) {
  Generator gen(8);
  const BatchNormGeometry g{4, 2, 9};
  const std::vector<float> x = randn(g.N * g.C * g.L, gen, 3.0);
  const std::vector<float> gamma(g.C, 1.0f), beta(g.C, 0.0f);
  std::vector<float> y(x.size(), kNaN), mean(g.C), invstd(g.C), rm(g.C, 0.0f), rv(g.C, 1.0f);
  batch_norm_forward_cpu(y.data(), mean.data(), invstd.data(), x.data(), gamma.data(), beta.data(), rm.data(),
                         rv.data(), g, true, 0.1f, 0.0f);
  for (int64_t c = 0; c < g.C; ++c) {
    double m = 0, v = 0;
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t l = 0; l < g.L; ++l) m += y[(n * g.C + c) * g.L + l];
    m /= g.N * g.L;
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t l = 0; l < g.L; ++l) v += std::pow(y[(n * g.C + c) * g.L + l] - m, 2);
    v /= g.N * g.L;
    EXPECT_NEAR(m, 0.0, 1e-6);
    EXPECT_NEAR(v, 1.0, 1e-5);
  }
}

// ========================================================================================= determinism

TEST(KernelsCpuDeterminism, ConvAndBatchNormDoNotDependOnThreadCount) {
  ThreadCountGuard guard;
  const ConvData d = make_conv(kConvCases[std::size(kConvCases) - 1], 99);  // multi-chunk, big GEMMs
  const Conv2dGeometry& g = d.g;
  Generator gen(100);
  const std::vector<float> grad_out = randn(g.N * g.K * g.out_plane(), gen);
  const BatchNormGeometry bg{8, 6, 50};
  const std::vector<float> bx = randn(bg.N * bg.C * bg.L, gen), gamma = randn(bg.C, gen), beta = randn(bg.C, gen);
  const std::vector<float> bdy = randn(bx.size(), gen);
  const int64_t gm = 600, gn = 40, gk = 50;  // gemm_cpu's row-panel split (conv exercises the column split)
  const std::vector<float> ga = randn(gm * gk, gen), gb = randn(gk * gn, gen);

  auto run = [&](int threads) {
    set_num_threads(threads);
    EXPECT_EQ(num_threads(), threads);
    std::vector<std::vector<float>> results;
    std::vector<float> workspace(conv2d_workspace_floats(g));
    std::vector<float> out(g.N * g.K * g.out_plane());
    conv2d_forward_cpu(out.data(), d.in.data(), d.weight.data(), d.bias.data(), g, workspace.data());
    std::vector<float> gi(d.in.size()), gw(d.weight.size()), gb_conv(g.K);
    conv2d_backward_cpu(gi.data(), gw.data(), gb_conv.data(), grad_out.data(), d.in.data(), d.weight.data(), g,
                        workspace.data());
    std::vector<float> y(bx.size()), mean(bg.C), invstd(bg.C), rm(bg.C, 0.0f), rv(bg.C, 1.0f);
    batch_norm_forward_cpu(y.data(), mean.data(), invstd.data(), bx.data(), gamma.data(), beta.data(), rm.data(),
                           rv.data(), bg, true, 0.1f, 1e-5f);
    std::vector<float> dx(bx.size()), dgamma(bg.C), dbeta(bg.C);
    batch_norm_backward_cpu(dx.data(), dgamma.data(), dbeta.data(), bdy.data(), bx.data(), gamma.data(), mean.data(),
                            invstd.data(), bg, true);
    std::vector<float> gc(gm * gn);
    gemm_cpu(false, false, gm, gn, gk, 1.0f, ga.data(), gk, gb.data(), gn, 0.0f, gc.data(), gn);
    return std::vector<std::vector<float>>{out, gi, gw, gb_conv, y, mean, invstd, rm, rv, dx, dgamma, dbeta, gc};
  };
  const auto one = run(1), two = run(2);
  const char* names[] = {"conv out",  "conv grad_in", "conv grad_weight", "conv grad_bias", "bn y",
                         "bn mean",   "bn invstd",    "bn running_mean",  "bn running_var", "bn dx",
                         "bn dgamma", "bn dbeta",     "gemm_cpu"};
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(bitwise_equal(one[i], two[i])) << names[i];
}

// parallel_elements hands every index to exactly one thread, in ranges that start on 16-element lines,
// at thread counts that do and do not divide n; below kParallelMinElements it makes one call.
TEST(KernelsCpuDeterminism, ParallelElementsCoversEachIndexOnceInLineAlignedRanges) {
  ThreadCountGuard guard;
  const int64_t n = kParallelMinElements + 37;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    std::vector<int> hits(n, 0);
    std::vector<int64_t> begins(4, -1);
    parallel_elements(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) ++hits[i];  // disjoint ranges: no two threads write one element
      begins[omp_get_thread_num()] = begin;
    });
    EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), n) << threads << " threads";
    for (int t = 0; t < threads; ++t) {
      EXPECT_GE(begins[t], 0) << "thread " << t << " of " << threads << " got no range";
      EXPECT_EQ(begins[t] % 16, 0) << "thread " << t << " of " << threads;
    }
  }
  int calls = 0;
  parallel_elements(kParallelMinElements - 1, [&](int64_t begin, int64_t end) {
    ++calls;
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, kParallelMinElements - 1);
  });
  EXPECT_EQ(calls, 1);
}

// The elementwise passes that split across threads (ReLU, add, sub, mul, scale, add in place, SGD,
// Tensor::fill), on an odd size above the split threshold: every output element is the element's own expression (outputs start as NaN,
// so an unwritten one shows) and the bits are the same at 1, 2 and 3 threads.
TEST(KernelsCpuDeterminism, ElementwisePassesWriteEveryElementAndDoNotDependOnThreadCount) {
  ThreadCountGuard guard;
  const int64_t n = kParallelMinElements + 37;
  Generator gen(102);
  const std::vector<float> a = randn(n, gen), b = randn(n, gen), w0 = randn(n, gen), v0 = randn(n, gen);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto run = [&](int threads) {
    set_num_threads(threads);
    std::vector<std::vector<float>> out(11, std::vector<float>(n, nan));
    relu_forward_cpu(out[0].data(), a.data(), n);
    relu_backward_cpu(out[1].data(), b.data(), a.data(), n);
    add_cpu(out[2].data(), a.data(), b.data(), n);
    mul_cpu(out[3].data(), a.data(), b.data(), n);
    out[4] = a;
    add_inplace_cpu(out[4].data(), b.data(), n);
    out[5] = w0;
    out[6] = v0;
    sgd_step_cpu(out[5].data(), out[6].data(), a.data(), n, {0.1f, 0.9f, 1e-3f, true, false});
    out[7] = w0;
    sgd_step_from_cpu(out[7].data(), b.data(), nullptr, a.data(), n, {0.1f, 0.0f, 1e-3f, false, false});
    const Tensor filled = Tensor::empty({n});
    filled.fill(2.5f);
    out[8].assign(filled.data(), filled.data() + n);
    sub_cpu(out[9].data(), a.data(), b.data(), n);
    scale_cpu(out[10].data(), a.data(), -1.5f, n);
    return out;
  };
  const auto one = run(1);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(one[0][i], a[i] > 0.0f ? a[i] : 0.0f) << i;
    ASSERT_EQ(one[1][i], a[i] > 0.0f ? b[i] : 0.0f) << i;
    ASSERT_EQ(one[2][i], a[i] + b[i]) << i;
    ASSERT_EQ(one[3][i], a[i] * b[i]) << i;
    ASSERT_EQ(one[4][i], a[i] + b[i]) << i;
    ASSERT_FALSE(std::isnan(one[5][i]) || std::isnan(one[6][i]) || std::isnan(one[7][i])) << i;
    ASSERT_EQ(one[8][i], 2.5f) << i;
    ASSERT_EQ(one[9][i], a[i] - b[i]) << i;
    ASSERT_EQ(one[10][i], -1.5f * a[i]) << i;
  }
  const char* names[] = {"relu",         "relu backward",  "add",  "mul", "add in place", "sgd w",
                         "sgd velocity", "sgd from start", "fill", "sub", "scale"};
  for (int threads : {2, 3}) {
    const auto many = run(threads);
    for (size_t k = 0; k < one.size(); ++k) EXPECT_TRUE(bitwise_equal(one[k], many[k])) << names[k] << ", " << threads;
  }
}

}  // namespace
}  // namespace bastion
