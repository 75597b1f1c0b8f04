// CUDA agreement table, balanced-softmax cross-entropy (kernels/cuda/balanced_softmax.h) against its CPU
// twin (kernels/cpu/balanced_softmax.h): odd N and C, C below and far above a warp's 32 lanes, large
// logits (rows shifted by +-500), priors with absent classes (-inf), a non-unit upstream gradient read from
// a device scalar, NaN-sentinel outputs. Skipped without a device; the emulated build runs it on CPU threads.
// Tolerances: tests/test_cuda_softmax.cpp's (the same row log-sum-exp and expf/exp difference).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "autograd/ops.h"
#include "kernels/cpu/balanced_softmax.h"
#include "kernels/cuda/balanced_softmax.h"
#include "tests/cuda_test_support.h"
#include "tests/kernel_test_support.h"

namespace bastion {
namespace {

using namespace bastion::testing;

constexpr double kLogProbTolerance = 16 * kUnitRoundoff;  // see test_cuda_softmax.cpp
constexpr double kGradTolerance = 16 * kUnitRoundoff;
constexpr float kUpstreamGrad = 0.7f;

struct Shape {
  int64_t N, C;
};
const Shape kNarrow{37, 10};
const Shape kWide{5, 1000};

double max_abs(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v)
    if (std::isfinite(x)) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}

std::vector<float> random_logits(Shape s, uint64_t seed, float spread, float shift = 0.0f) {
  Generator gen(seed);
  std::vector<float> x = random_floats(s.N * s.C, gen, -spread, spread);
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t c = 0; c < s.C; ++c) x[n * s.C + c] += n % 2 == 0 ? shift : -shift;
  return x;
}

// log of random counts in [1, 50], with every third class absent (-inf).
std::vector<float> random_log_prior(Shape s, uint64_t seed) {
  Generator gen(seed);
  std::vector<float> prior(s.C);
  for (int64_t c = 0; c < s.C; ++c)
    prior[c] = c % 3 == 1 ? -INFINITY : static_cast<float>(std::log(1.0 + static_cast<double>(gen.below(50))));
  return prior;
}

// Labels of present classes only (the op refuses the others).
std::vector<int32_t> random_labels(Shape s, const std::vector<float>& prior, uint64_t seed) {
  Generator gen(seed);
  std::vector<int32_t> y(s.N);
  for (int32_t& label : y) {
    do label = static_cast<int32_t>(gen.below(static_cast<uint64_t>(s.C)));
    while (!std::isfinite(prior[label]));
  }
  return y;
}

void expect_forward_agrees(Shape s, const std::vector<float>& x, uint64_t seed) {
  const std::vector<float> prior = random_log_prior(s, seed);
  const std::vector<int32_t> y = random_labels(s, prior, seed + 1);
  std::vector<float> probs = sentinels(x.size());
  const double loss = balanced_softmax_forward_cpu(probs.data(), x.data(), y.data(), prior.data(), s.N, s.C);
  DeviceBuffer<float> d_x(x), d_prior(prior), d_probs(sentinels(x.size())), d_loss(sentinels(1));
  DeviceBuffer<int32_t> d_y(y);
  balanced_softmax_forward_cuda(d_loss.get(), d_probs.get(), d_x.get(), d_y.get(), d_prior.get(), s.N, s.C,
                                cuda_stream());
  const double logit_scale = std::max(1.0, max_abs(x) + max_abs(prior));
  const std::vector<float> got = d_probs.download();
  expect_agree(got, probs, kLogProbTolerance * logit_scale, "probs", 1e-30);
  for (int64_t i = 0; i < s.N * s.C; ++i)
    if (!std::isfinite(prior[i % s.C])) {
      ASSERT_EQ(got[i], 0.0f) << "absent class probability, element " << i;
    }
  const float got_loss = d_loss.download()[0];
  EXPECT_NEAR(got_loss, loss, kLogProbTolerance * std::max(logit_scale, std::abs(loss)));
}

TEST(CudaAgreement, BalancedSoftmaxForward) {
  BASTION_REQUIRE_CUDA();
  expect_forward_agrees(kNarrow, random_logits(kNarrow, 31, 3.0f), 32);
  expect_forward_agrees(kWide, random_logits(kWide, 33, 3.0f), 34);
}

TEST(CudaAgreement, BalancedSoftmaxForwardLargeLogits) {
  BASTION_REQUIRE_CUDA();
  expect_forward_agrees(kNarrow, random_logits(kNarrow, 35, 40.0f, 500.0f), 36);
  expect_forward_agrees(kWide, random_logits(kWide, 37, 40.0f, 500.0f), 38);
}

TEST(CudaAgreement, BalancedSoftmaxBackward) {
  BASTION_REQUIRE_CUDA();
  for (Shape s : {kNarrow, kWide}) {
    const std::vector<float> x = random_logits(s, 39, 3.0f), prior = random_log_prior(s, 40);
    const std::vector<int32_t> y = random_labels(s, prior, 41);
    std::vector<float> probs = sentinels(x.size()), want = sentinels(x.size());
    balanced_softmax_forward_cpu(probs.data(), x.data(), y.data(), prior.data(), s.N, s.C);
    balanced_softmax_backward_cpu(want.data(), probs.data(), y.data(), kUpstreamGrad, s.N, s.C);
    DeviceBuffer<float> d_probs(probs), d_grad(std::vector<float>{kUpstreamGrad}), d_dx(sentinels(x.size()));
    DeviceBuffer<int32_t> d_y(y);
    balanced_softmax_backward_cuda(d_dx.get(), d_probs.get(), d_y.get(), d_grad.get(), s.N, s.C, cuda_stream());
    expect_agree(d_dx.download(), want, kGradTolerance, "balanced_softmax dx", max_abs(want));
  }
}

// The op end to end on the device (the prior uploaded by the op, the loss and gradient through autograd)
// against the same op on the CPU.
TEST(CudaAgreement, BalancedSoftmaxOpThroughAutograd) {
  BASTION_REQUIRE_CUDA();
  const Shape s = kNarrow;
  const std::vector<float> x = random_logits(s, 42, 3.0f), prior = random_log_prior(s, 43);
  const LabelTensor y = LabelTensor::from_vector(random_labels(s, prior, 44));
  Tensor cpu = Tensor::from_vector({s.N, s.C}, x).set_requires_grad(true);
  Tensor gpu = Tensor::from_vector({s.N, s.C}, x).to(Device::CUDA).set_requires_grad(true);
  Tensor cpu_loss = balanced_softmax_cross_entropy(cpu, y, prior), gpu_loss = balanced_softmax_cross_entropy(gpu, y, prior);
  cpu_loss.backward();
  gpu_loss.backward();
  EXPECT_NEAR(gpu_loss.to(Device::CPU).item(), cpu_loss.item(), kLogProbTolerance * std::max(1.0, max_abs(x) + max_abs(prior)));
  const std::vector<float> want = cpu.grad().to_vector();
  expect_agree(gpu.grad().to(Device::CPU).to_vector(), want, kGradTolerance, "op dx", max_abs(want));
}

}  // namespace
}  // namespace bastion
