// CUDA agreement, balanced-softmax cross-entropy (autograd/ops/balanced_softmax.cpp: add + cross_entropy, so
// its kernels are the softmax family's, with their own agreement table) on the device against the CPU:
// odd N and C, C below and far above a warp's 32 lanes, large logits (rows shifted by +-500), priors with
// absent classes (-inf). Skipped without a device; the emulated build runs it on CPU threads.
// Tolerances: tests/test_cuda_softmax.cpp's (the same row log-sum-exp and expf/exp difference).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "autograd/ops.h"
#include "tests/cuda_test_support.h"
#include "tests/kernel_test_support.h"

namespace bastion {
namespace {

using testing::expect_agree;
using testing::kUnitRoundoff;
using testing::random_floats;

constexpr double kLogProbTolerance = 16 * kUnitRoundoff;  // see test_cuda_softmax.cpp
constexpr double kGradTolerance = 16 * kUnitRoundoff;

struct SoftmaxShape {
  int64_t N, C;
};
const SoftmaxShape kNarrow{37, 10};
const SoftmaxShape kWide{5, 1000};

// The largest finite |v[i]|: the log prior holds -inf for absent classes.
double max_finite_abs(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v)
    if (std::isfinite(x)) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}

std::vector<float> random_logits(SoftmaxShape s, uint64_t seed, float spread, float shift = 0.0f) {
  Generator gen(seed);
  std::vector<float> x = random_floats(s.N * s.C, gen, -spread, spread);
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t c = 0; c < s.C; ++c) x[n * s.C + c] += n % 2 == 0 ? shift : -shift;
  return x;
}

// log of random counts in [1, 50], with every third class absent (-inf).
std::vector<float> random_log_prior(SoftmaxShape s, uint64_t seed) {
  Generator gen(seed);
  std::vector<float> prior(s.C);
  for (int64_t c = 0; c < s.C; ++c)
    prior[c] = c % 3 == 1 ? -INFINITY : static_cast<float>(std::log(1.0 + static_cast<double>(gen.below(50))));
  return prior;
}

// Labels of present classes only (the op refuses the others).
std::vector<int32_t> random_labels(SoftmaxShape s, const std::vector<float>& prior, uint64_t seed) {
  Generator gen(seed);
  std::vector<int32_t> y(s.N);
  for (int32_t& label : y) {
    do label = static_cast<int32_t>(gen.below(static_cast<uint64_t>(s.C)));
    while (!std::isfinite(prior[label]));
  }
  return y;
}

// The op end to end on the device (the prior uploaded by the op, the loss and gradient through autograd:
// add + cross_entropy's CUDA kernels) against the same op on the CPU; an absent class's gradient must be
// exactly 0 on both.
void expect_op_agrees(SoftmaxShape s, const std::vector<float>& x, uint64_t seed) {
  const std::vector<float> prior = random_log_prior(s, seed);
  const LabelTensor y = LabelTensor::from_vector(random_labels(s, prior, seed + 1));
  Tensor cpu = Tensor::from_vector({s.N, s.C}, x).set_requires_grad(true);
  Tensor gpu = Tensor::from_vector({s.N, s.C}, x).to(Device::CUDA).set_requires_grad(true);
  Tensor cpu_loss = balanced_softmax_cross_entropy(cpu, y, prior),
         gpu_loss = balanced_softmax_cross_entropy(gpu, y, prior);
  cpu_loss.backward();
  gpu_loss.backward();
  const double logit_scale = std::max(1.0, max_finite_abs(x) + max_finite_abs(prior));
  EXPECT_NEAR(gpu_loss.to(Device::CPU).item(), cpu_loss.item(),
              kLogProbTolerance * std::max(logit_scale, std::abs(static_cast<double>(cpu_loss.item()))));
  const std::vector<float> want = cpu.grad().to_vector(), got = gpu.grad().to(Device::CPU).to_vector();
  expect_agree(got, want, kGradTolerance, "op dx", max_finite_abs(want));
  for (int64_t i = 0; i < s.N * s.C; ++i)
    if (!std::isfinite(prior[i % s.C])) {
      ASSERT_EQ(got[i], 0.0f) << "absent class gradient, element " << i;
    }
}

TEST(CudaAgreement, BalancedSoftmaxOp) {
  BASTION_REQUIRE_CUDA();
  expect_op_agrees(kNarrow, random_logits(kNarrow, 31, 3.0f), 32);
  expect_op_agrees(kWide, random_logits(kWide, 33, 3.0f), 34);
}

TEST(CudaAgreement, BalancedSoftmaxOpLargeLogits) {
  BASTION_REQUIRE_CUDA();
  expect_op_agrees(kNarrow, random_logits(kNarrow, 35, 40.0f, 500.0f), 36);
  expect_op_agrees(kWide, random_logits(kWide, 37, 40.0f, 500.0f), 38);
}

}  // namespace
}  // namespace bastion
