// CUDA agreement table, batch norm: batch_norm_forward_cuda / batch_norm_backward_cuda against their CPU
// twins (kernels/cpu/batchnorm.h) on random inputs, (N, C, H, W) and (N, C) geometries, training and
// eval, outputs starting as NaN sentinels. Skipped without a device; the emulated build runs it on CPU
// threads.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/batchnorm.h"
#include "kernels/cuda/batchnorm.h"
#include "tests/cuda_test_support.h"
#include "tests/kernel_test_support.h"

namespace bastion {
namespace {

using testing::DeviceBuffer;
using testing::expect_agree;
using testing::kSentinel;
using testing::kUnitRoundoff;
using testing::random_floats;
using testing::sentinels;

// ---- tolerances ----
// Statistics (save_mean, save_invstd, running stats) and the parameter gradients (dgamma, dbeta) are
// double sums rounded once to float on both sides; only the order of the double additions differs
// (a block tree against a sequential loop), which moves the double by ~1e-16 relative, so the floats
// are equal or neighbours: 1 ulp is at most 2 unit roundoffs relative; 4 leaves room.
constexpr double kRoundedDoubleTolerance = 4 * kUnitRoundoff;
// y and dx are a few float operations on O(1) values (the inputs are O(1), gamma*invstd ~ 1) from
// statistics that may differ by the 1 ulp above, and the GPU may fuse a multiply-add the CPU rounds
// twice: a handful of roundings of O(1) terms, so 16 unit roundoffs (~1e-6) against max(|cpu|, 1).
constexpr double kElementwiseTolerance = 16 * kUnitRoundoff;

constexpr float kMomentum = 0.1f;
constexpr float kEps = 1e-5f;

struct BatchNormInputs {
  std::vector<float> x, gamma, beta, running_mean, running_var;
};

BatchNormInputs random_inputs(const BatchNormGeometry& g, uint64_t seed) {
  Generator gen(seed);
  BatchNormInputs in;
  in.x = random_floats(g.N * g.C * g.L, gen, -1.0f, 2.0f);  // mean 0.5: the centring matters
  in.gamma = random_floats(g.C, gen, 0.5f, 1.5f);
  in.beta = random_floats(g.C, gen, -0.5f, 0.5f);
  in.running_mean = random_floats(g.C, gen, -0.2f, 0.2f);
  in.running_var = random_floats(g.C, gen, 0.5f, 1.5f);
  return in;
}

struct ForwardOutputs {
  std::vector<float> y, mean, invstd, running_mean, running_var;
};

ForwardOutputs forward_cpu(const BatchNormInputs& in, const BatchNormGeometry& g, bool training) {
  ForwardOutputs out{sentinels(in.x.size()), sentinels(g.C), sentinels(g.C), in.running_mean, in.running_var};
  batch_norm_forward_cpu(out.y.data(), out.mean.data(), out.invstd.data(), in.x.data(), in.gamma.data(), in.beta.data(),
                         out.running_mean.data(), out.running_var.data(), g, training, kMomentum, kEps);
  return out;
}

ForwardOutputs forward_cuda(const BatchNormInputs& in, const BatchNormGeometry& g, bool training) {
  DeviceBuffer<float> x(in.x), gamma(in.gamma), beta(in.beta), running_mean(in.running_mean),
      running_var(in.running_var);
  DeviceBuffer<float> y(sentinels(in.x.size())), mean(sentinels(g.C)), invstd(sentinels(g.C));
  batch_norm_forward_cuda(y.get(), mean.get(), invstd.get(), x.get(), gamma.get(), beta.get(), running_mean.get(),
                          running_var.get(), g, training, kMomentum, kEps, cuda_stream());
  return {y.download(), mean.download(), invstd.download(), running_mean.download(), running_var.download()};
}

void expect_forward_agrees(const BatchNormGeometry& g, bool training, uint64_t seed) {
  const BatchNormInputs in = random_inputs(g, seed);
  const ForwardOutputs want = forward_cpu(in, g, training);
  const ForwardOutputs got = forward_cuda(in, g, training);
  expect_agree(got.y, want.y, kElementwiseTolerance, "y");
  expect_agree(got.mean, want.mean, kRoundedDoubleTolerance, "save_mean");
  expect_agree(got.invstd, want.invstd, kRoundedDoubleTolerance, "save_invstd");
  expect_agree(got.running_mean, want.running_mean, kRoundedDoubleTolerance, "running_mean");
  expect_agree(got.running_var, want.running_var, kRoundedDoubleTolerance, "running_var");
}

// Which backward outputs are requested (the others are passed as null).
struct Wanted {
  bool dx, dgamma, dbeta;
};

void expect_untouched(const DeviceBuffer<float>& buffer, const char* what) {
  for (float v : buffer.download()) ASSERT_TRUE(std::isnan(v)) << what << " written though it was passed as null";
}

// The saved statistics come from the CPU forward, so the backward twins see identical inputs.
void expect_backward_agrees(const BatchNormGeometry& g, bool training, Wanted wanted, uint64_t seed) {
  const BatchNormInputs in = random_inputs(g, seed);
  const ForwardOutputs saved = forward_cpu(in, g, training);
  Generator gen(seed + 1);
  const std::vector<float> dy = random_floats(in.x.size(), gen);
  std::vector<float> dx(in.x.size(), kSentinel), dgamma(g.C, kSentinel), dbeta(g.C, kSentinel);
  batch_norm_backward_cpu(dx.data(), dgamma.data(), dbeta.data(), dy.data(), in.x.data(), in.gamma.data(),
                          saved.mean.data(), saved.invstd.data(), g, training);

  DeviceBuffer<float> d_dy(dy), d_x(in.x), d_gamma(in.gamma), d_mean(saved.mean), d_invstd(saved.invstd);
  DeviceBuffer<float> d_dx(sentinels(dx.size())), d_dgamma(sentinels(g.C)), d_dbeta(sentinels(g.C));
  batch_norm_backward_cuda(wanted.dx ? d_dx.get() : nullptr, wanted.dgamma ? d_dgamma.get() : nullptr,
                           wanted.dbeta ? d_dbeta.get() : nullptr, d_dy.get(), d_x.get(), d_gamma.get(), d_mean.get(),
                           d_invstd.get(), g, training, cuda_stream());
  if (wanted.dx) expect_agree(d_dx.download(), dx, kElementwiseTolerance, "dx");
  if (wanted.dgamma) expect_agree(d_dgamma.download(), dgamma, kRoundedDoubleTolerance, "dgamma");
  if (wanted.dbeta) expect_agree(d_dbeta.download(), dbeta, kRoundedDoubleTolerance, "dbeta");
  // A null output is not written through: its buffer still holds only sentinels.
  if (!wanted.dx) expect_untouched(d_dx, "dx");
  if (!wanted.dgamma) expect_untouched(d_dgamma, "dgamma");
  if (!wanted.dbeta) expect_untouched(d_dbeta, "dbeta");
}

// BatchNorm2d: L = 11*13 = 143, M = 3*143 = 429 values per channel, more than a block's 256 threads, so
// the strided loops wrap and cross sample boundaries.
const BatchNormGeometry kGeometry2d{3, 5, 11 * 13};
// BatchNorm1d on (N, C): L = 1, each channel's values are C apart.
const BatchNormGeometry kGeometry1d{37, 13, 1};
// Sliced: M = 24 * 323 = 7752 values per channel, 7 slices of 1108 (the last 1104), whose boundaries fall
// inside samples; L = 323 > 256, so a thread's step stays inside a sample or crosses one boundary.
const BatchNormGeometry kGeometrySliced{24, 3, 17 * 19};
// Sliced BatchNorm1d: L = 1, M = 2100 values in 2 slices.
const BatchNormGeometry kGeometrySliced1d{2100, 5, 1};

TEST(CudaAgreement, BatchNormSlicesDependOnTheGeometryOnly) {
  BASTION_REQUIRE_CUDA();
  EXPECT_EQ(batch_norm_slices(kGeometry2d), 1);      // 429 values: under one slice's minimum
  EXPECT_EQ(batch_norm_slices(kGeometrySliced), 7);  // 7752 / 1024
  EXPECT_EQ(batch_norm_slices(kGeometrySliced1d), 2);
  EXPECT_EQ(batch_norm_slices({128, 64, 32 * 32}), 9);  // ResNet18's first stage: ceil(528 / 64) blocks
  EXPECT_EQ(batch_norm_slices({128, 512, 4 * 4}), 2);   // its last: 2048 values
  EXPECT_EQ(batch_norm_slices({1, 1, 1 << 30}), 528);
}

TEST(CudaAgreement, BatchNormSlicedForwardAndBackward) {
  BASTION_REQUIRE_CUDA();
  for (const BatchNormGeometry& g : {kGeometrySliced, kGeometrySliced1d}) {
    SCOPED_TRACE(::testing::Message() << "N " << g.N << " C " << g.C << " L " << g.L);
    expect_forward_agrees(g, /*training=*/true, 31);
    expect_forward_agrees(g, /*training=*/false, 32);
    expect_backward_agrees(g, /*training=*/true, {true, true, true}, 33);
    expect_backward_agrees(g, /*training=*/false, {true, true, false}, 34);
  }
}

TEST(CudaAgreement, BatchNormForwardTraining2d) {
  BASTION_REQUIRE_CUDA();
  expect_forward_agrees(kGeometry2d, /*training=*/true, 11);
}

TEST(CudaAgreement, BatchNormForwardTraining1d) {
  BASTION_REQUIRE_CUDA();
  expect_forward_agrees(kGeometry1d, /*training=*/true, 12);
}

TEST(CudaAgreement, BatchNormForwardEval2d) {
  BASTION_REQUIRE_CUDA();
  expect_forward_agrees(kGeometry2d, /*training=*/false, 13);
}

TEST(CudaAgreement, BatchNormForwardEval1d) {
  BASTION_REQUIRE_CUDA();
  expect_forward_agrees(kGeometry1d, /*training=*/false, 14);
}

TEST(CudaAgreement, BatchNormBackwardTraining2d) {
  BASTION_REQUIRE_CUDA();
  expect_backward_agrees(kGeometry2d, /*training=*/true, {true, true, true}, 21);
}

TEST(CudaAgreement, BatchNormBackwardTraining1dWithoutDgamma) {
  BASTION_REQUIRE_CUDA();
  expect_backward_agrees(kGeometry1d, /*training=*/true, {true, false, true}, 22);
}

TEST(CudaAgreement, BatchNormBackwardEval2dDxOnly) {
  BASTION_REQUIRE_CUDA();
  expect_backward_agrees(kGeometry2d, /*training=*/false, {true, false, false}, 23);
}

TEST(CudaAgreement, BatchNormBackwardEval1dParametersOnly) {
  BASTION_REQUIRE_CUDA();
  expect_backward_agrees(kGeometry1d, /*training=*/false, {false, true, true}, 24);
}

}  // namespace
}  // namespace bastion
