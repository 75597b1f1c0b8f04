// CUDA agreement table, conv2d family (kernels/cuda/conv.h) against the CPU twins (kernels/cpu/conv.h):
// both forward rungs (im2col+GEMM, and the implicit GEMM with every block tile), the backward with all
// outputs and with some null, several chunks (a small workspace cap), an empty batch, im2col and col2im.
//
// Tolerance: a float32 sum of T terms is within sum_tolerance(T) * sum|terms| of the exact sum
// (tests/kernel_test_support.h), whatever the summation order. The CUDA and CPU results are each that
// close to the exact value, so they differ by at most twice the bound. sum|terms| comes from running the
// CPU kernel on the absolute values of its inputs (every term of the result becomes its magnitude); its
// own rounding is a relative 1e-5 at most here, far inside the factor 2.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/conv.h"
#include "kernels/cuda/conv.h"
#include "tests/cuda_test_support.h"
#include "tests/kernel_test_support.h"

namespace bastion {
namespace {

using testing::absolute;
using testing::bitwise_equal;
using testing::DeviceBuffer;
using testing::expect_agree;
using testing::expect_close;
using testing::random_floats;
using testing::sentinels;
using testing::sum_tolerance;

// Both sides within one sum_tolerance bound of the exact sum: see the file comment.
constexpr double kBothSidesRounded = 2.0;

struct CudaConvCase {
  int64_t N, C, H, W, K, R, S, stride, padding;
};

std::ostream& operator<<(std::ostream& os, const CudaConvCase& c) {
  return os << "N" << c.N << " C" << c.C << " " << c.H << "x" << c.W << " K" << c.K << " " << c.R << "x" << c.S
            << " stride " << c.stride << " pad " << c.padding;
}

// Odd sizes (no multiple of any tile), batch > 1.
const CudaConvCase kCases[] = {
    {3, 5, 11, 9, 7, 3, 3, 1, 1},   // 3x3 "same" convolution
    {3, 5, 11, 9, 7, 3, 3, 2, 0},   // stride 2 without padding: a remainder row and column
    {2, 3, 9, 8, 6, 5, 5, 1, 2},    // 5x5, padding 2
    {3, 6, 7, 5, 9, 1, 1, 1, 0},    // 1x1
    {2, 3, 6, 7, 5, 5, 3, 2, 1},    // non-square kernel, stride 2
    {2, 19, 7, 6, 70, 3, 3, 1, 1},  // K over two 64-row tiles, CRS = 171 over many 8-deep steps
};

struct HostConv {
  Conv2dGeometry g;
  std::vector<float> in, weight, bias;
};

HostConv make_host_conv(const CudaConvCase& c, uint64_t seed) {
  Generator gen(seed);
  HostConv h{conv2d_geometry(c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.padding), {}, {}, {}};
  h.in = random_floats(c.N * c.C * c.H * c.W, gen);
  h.weight = random_floats(c.K * h.g.crs(), gen);
  h.bias = random_floats(c.K, gen);
  return h;
}

size_t out_numel(const Conv2dGeometry& g) { return static_cast<size_t>(g.N * g.K * g.out_plane()); }

std::vector<float> cpu_forward(const Conv2dGeometry& g, const std::vector<float>& in, const std::vector<float>& weight,
                               const float* bias) {
  std::vector<float> out(out_numel(g)), workspace(conv2d_workspace_floats(g));
  conv2d_forward_cpu(out.data(), in.data(), weight.data(), bias, g, workspace.data());
  return out;
}

// |got - want| <= kBothSidesRounded * sum_tolerance(terms) * magnitude, element by element (NaN fails).
void expect_within_sum_bound(const std::vector<float>& got, const std::vector<float>& want,
                             const std::vector<float>& magnitude, int64_t terms, const char* what) {
  std::vector<double> want_d(want.begin(), want.end()), bound(magnitude.size());
  for (size_t i = 0; i < magnitude.size(); ++i) bound[i] = kBothSidesRounded * magnitude[i];
  expect_close(got, want_d, bound, terms, what);
}

// Checks `out` (downloaded) against the CPU forward of h (with or without bias).
void expect_forward_agrees(const std::vector<float>& out, const HostConv& h, bool with_bias, const char* what) {
  const float* bias = with_bias ? h.bias.data() : nullptr;
  const std::vector<float> abs_bias = absolute(h.bias);
  const std::vector<float> want = cpu_forward(h.g, h.in, h.weight, bias);
  const std::vector<float> magnitude =
      cpu_forward(h.g, absolute(h.in), absolute(h.weight), with_bias ? abs_bias.data() : nullptr);
  expect_within_sum_bound(out, want, magnitude, h.g.crs() + 1, what);
}

TEST(CudaAgreement, ConvForwardVariantsMatchCpu) {
  BASTION_REQUIRE_CUDA();
  uint64_t seed = 100;
  for (const CudaConvCase& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const HostConv h = make_host_conv(c, seed++);
    const DeviceBuffer<float> in(h.in), weight(h.weight), bias(h.bias);
    for (int variant = 1; variant <= conv2d_forward_cuda_variant_count(); ++variant) {
      SCOPED_TRACE(conv2d_forward_cuda_variant_name(variant));
      for (const bool with_bias : {true, false}) {
        DeviceBuffer<float> out(sentinels(out_numel(h.g)));
        DeviceBuffer<float> workspace(sentinels(conv2d_cuda_workspace_floats(h.g)));
        conv2d_forward_cuda_variant(variant, out.get(), in.get(), weight.get(), with_bias ? bias.get() : nullptr, h.g,
                                    workspace.get(), cuda_stream());
        expect_forward_agrees(out.download(), h, with_bias, "conv2d forward");
      }
    }
  }
}

TEST(CudaAgreement, ConvForwardImplicitGemmEveryTileMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  uint64_t seed = 200;
  for (const CudaConvCase& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const HostConv h = make_host_conv(c, seed++);
    const DeviceBuffer<float> in(h.in), weight(h.weight), bias(h.bias);
    for (const ConvTile tile : {ConvTile::Tile128x128, ConvTile::Tile64x128, ConvTile::Tile64x64}) {
      SCOPED_TRACE(static_cast<int>(tile));
      DeviceBuffer<float> out(sentinels(out_numel(h.g)));
      conv2d_forward_implicit_gemm_cuda(out.get(), in.get(), weight.get(), bias.get(), h.g, cuda_stream(), tile);
      expect_forward_agrees(out.download(), h, true, "implicit gemm forward");
    }
  }
}

// A workspace cap of two samples: chunks of 2, 2 and 1 (the last takes the single-sample path).
constexpr CudaConvCase kChunkedCase = {5, 3, 7, 6, 4, 3, 3, 1, 1};

int64_t two_sample_cap(const Conv2dGeometry& g) { return 2 * g.out_plane() * (g.crs() + g.K) + 1; }

TEST(CudaAgreement, ConvForwardSeveralChunksMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  const HostConv h = make_host_conv(kChunkedCase, 300);
  const int64_t cap = two_sample_cap(h.g);
  ASSERT_EQ(conv2d_cuda_chunk_samples(h.g, cap), 2);
  const DeviceBuffer<float> in(h.in), weight(h.weight), bias(h.bias);
  DeviceBuffer<float> out(sentinels(out_numel(h.g)));
  DeviceBuffer<float> workspace(sentinels(conv2d_cuda_workspace_floats(h.g, cap)));
  conv2d_forward_cuda(out.get(), in.get(), weight.get(), bias.get(), h.g, workspace.get(), cuda_stream(), cap);
  expect_forward_agrees(out.download(), h, true, "chunked forward");
}

// ---- backward ----

struct Grads {
  std::vector<float> in, weight, bias;
};

Grads cpu_backward(const Conv2dGeometry& g, const std::vector<float>& grad_out, const std::vector<float>& in,
                   const std::vector<float>& weight) {
  Grads r{std::vector<float>(in.size()), std::vector<float>(weight.size()), std::vector<float>(g.K)};
  std::vector<float> workspace(conv2d_workspace_floats(g));
  conv2d_backward_cpu(r.in.data(), r.weight.data(), r.bias.data(), grad_out.data(), in.data(), weight.data(), g,
                      workspace.data());
  return r;
}

Grads cuda_backward(const HostConv& h, const std::vector<float>& grad_out, int64_t cap, bool want_in, bool want_weight,
                    bool want_bias) {
  const Conv2dGeometry& g = h.g;
  const DeviceBuffer<float> in(h.in), weight(h.weight), dy(grad_out);
  DeviceBuffer<float> grad_in(sentinels(h.in.size())), grad_weight(sentinels(h.weight.size())),
      grad_bias(sentinels(g.K));
  DeviceBuffer<float> workspace(sentinels(conv2d_cuda_workspace_floats(g, cap)));
  conv2d_backward_cuda(want_in ? grad_in.get() : nullptr, want_weight ? grad_weight.get() : nullptr,
                       want_bias ? grad_bias.get() : nullptr, dy.get(), in.get(), weight.get(), g, workspace.get(),
                       cuda_stream(), cap);
  return {grad_in.download(), grad_weight.download(), grad_bias.download()};
}

// grad_in sums K*R*S products at most; grad_weight N*P products plus one rounding per chunk (beta = 1);
// grad_bias N*P values.
void expect_backward_agrees(const Grads& got, const HostConv& h, const std::vector<float>& grad_out) {
  const Conv2dGeometry& g = h.g;
  const Grads want = cpu_backward(g, grad_out, h.in, h.weight);
  const Grads magnitude = cpu_backward(g, absolute(grad_out), absolute(h.in), absolute(h.weight));
  expect_within_sum_bound(got.in, want.in, magnitude.in, g.K * g.R * g.S, "grad_in");
  expect_within_sum_bound(got.weight, want.weight, magnitude.weight, g.N * g.out_plane() + g.N, "grad_weight");
  expect_within_sum_bound(got.bias, want.bias, magnitude.bias, g.N * g.out_plane(), "grad_bias");
}

TEST(CudaAgreement, ConvBackwardMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  uint64_t seed = 400;
  for (const CudaConvCase& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const HostConv h = make_host_conv(c, seed++);
    Generator gen(seed * 7);
    const std::vector<float> grad_out = random_floats(out_numel(h.g), gen);
    expect_backward_agrees(cuda_backward(h, grad_out, kConvCudaMaxWorkspaceFloats, true, true, true), h, grad_out);
  }
}

TEST(CudaAgreement, ConvBackwardSeveralChunksMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  const HostConv h = make_host_conv(kChunkedCase, 500);
  Generator gen(501);
  const std::vector<float> grad_out = random_floats(out_numel(h.g), gen);
  expect_backward_agrees(cuda_backward(h, grad_out, two_sample_cap(h.g), true, true, true), h, grad_out);
}

// A null output is skipped (its buffer keeps its sentinels) and the others are bitwise what the full call
// gives: the kernels are deterministic and the skipped work does not feed the rest.
TEST(CudaAgreement, ConvBackwardNullOutputsAreSkipped) {
  BASTION_REQUIRE_CUDA();
  const HostConv h = make_host_conv(kChunkedCase, 600);
  Generator gen(601);
  const std::vector<float> grad_out = random_floats(out_numel(h.g), gen);
  const int64_t cap = two_sample_cap(h.g);
  const Grads full = cuda_backward(h, grad_out, cap, true, true, true);
  const Grads first_layer = cuda_backward(h, grad_out, cap, false, true, false);
  const Grads input_only = cuda_backward(h, grad_out, cap, true, false, false);
  const Grads bias_only = cuda_backward(h, grad_out, cap, false, false, true);
  EXPECT_TRUE(bitwise_equal(first_layer.weight, full.weight));
  EXPECT_TRUE(bitwise_equal(input_only.in, full.in));
  EXPECT_TRUE(bitwise_equal(bias_only.bias, full.bias));
  for (const std::vector<float>* untouched :
       {&first_layer.in, &first_layer.bias, &input_only.weight, &input_only.bias, &bias_only.in, &bias_only.weight})
    for (float x : *untouched) ASSERT_TRUE(std::isnan(x)) << "a null output's buffer was written";
}

// An empty batch still ASSIGNS the weight and bias gradients (zeros), as the contract says.
TEST(CudaAgreement, ConvBackwardEmptyBatchAssignsZeroGradients) {
  BASTION_REQUIRE_CUDA();
  const HostConv h = make_host_conv({0, 2, 5, 5, 3, 3, 3, 1, 1}, 700);
  const Grads got = cuda_backward(h, {}, kConvCudaMaxWorkspaceFloats, true, true, true);
  EXPECT_EQ(got.weight, std::vector<float>(h.weight.size(), 0.0f));
  EXPECT_EQ(got.bias, std::vector<float>(h.g.K, 0.0f));
}

// ---- building blocks: a chunk in the middle of the batch (n_begin = 1) ----

TEST(CudaAgreement, ConvIm2colMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  uint64_t seed = 800;
  for (const CudaConvCase& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const HostConv h = make_host_conv(c, seed++);
    const int64_t n_begin = 1, n_count = h.g.N - 1;
    const size_t numel = static_cast<size_t>(h.g.crs() * n_count * h.g.out_plane());
    std::vector<float> want(numel);
    im2col_cpu(want.data(), h.in.data(), h.g, n_begin, n_count);
    const DeviceBuffer<float> in(h.in);
    DeviceBuffer<float> cols(sentinels(numel));
    im2col_cuda(cols.get(), in.get(), h.g, n_begin, n_count, cuda_stream());
    // A copy with zeros in the padding: exact.
    expect_agree(cols.download(), want, 0.0, "im2col");
  }
}

TEST(CudaAgreement, ConvCol2imAddMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  uint64_t seed = 900;
  for (const CudaConvCase& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c);
    const HostConv h = make_host_conv(c, seed++);
    const int64_t n_begin = 1, n_count = h.g.N - 1;
    Generator gen(seed * 3);
    const std::vector<float> cols = random_floats(static_cast<size_t>(h.g.crs() * n_count * h.g.out_plane()), gen);
    std::vector<float> want = random_floats(h.in.size(), gen);  // accumulated into
    const DeviceBuffer<float> cols_device(cols);
    DeviceBuffer<float> in_grad(want);
    col2im_add_cpu(want.data(), cols.data(), h.g, n_begin, n_count);
    col2im_add_cuda(in_grad.get(), cols_device.get(), h.g, n_begin, n_count, cuda_stream());
    // The gather adds each element's terms in the CPU's (r, s) order onto the old value, with plain
    // additions (nothing to contract into an FMA): bitwise equal.
    expect_agree(in_grad.download(), want, 0.0, "col2im_add");
  }
}

}  // namespace
}  // namespace bastion
