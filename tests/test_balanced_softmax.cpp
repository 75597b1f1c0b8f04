// Balanced-softmax cross-entropy (autograd/ops/balanced_softmax.cpp: cross_entropy of the logits shifted by
// the log prior; the kernels' own double finite-difference checks are cross-entropy's): a hand-computed
// example, central finite differences of the op through autograd, the constant-prior identity with
// cross_entropy, absent classes (-inf prior: probability and gradient exactly 0, never NaN), and the op's
// refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "test_support.h"

namespace bastion {
namespace {

using testing::expect_error;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Float results of a few exp/log on O(1) values: a handful of float roundings (~6e-8 each).
constexpr double kFloatTolerance = 1e-6;

// counts (1, 2, 4): the prior adds (0, ln 2, ln 4) to every row.
//   row 0: x = (0, 0, 0)  -> exps (1, 2, 4),     y = 1: loss -log(2/7)
//   row 1: x = (1, 0, 0)  -> exps (e, 2, 4),     y = 0: loss -log(e/(e+6))
TEST(BalancedSoftmax, HandComputedLossProbabilitiesAndGradient) {
  const std::vector<int64_t> counts = {1, 2, 4};
  const std::vector<float> log_prior = balanced_softmax_log_prior(counts);
  EXPECT_FLOAT_EQ(log_prior[0], 0.0f);
  EXPECT_FLOAT_EQ(log_prior[2], static_cast<float>(std::log(4.0)));
  const double e = std::exp(1.0);
  const double want_loss = 0.5 * (-std::log(2.0 / 7.0) - std::log(e / (e + 6.0)));
  const std::vector<double> want_probs = {1 / 7.0, 2 / 7.0, 4 / 7.0, e / (e + 6), 2 / (e + 6), 4 / (e + 6)};

  Tensor x = Tensor::from_vector({2, 3}, std::vector<float>{0, 0, 0, 1, 0, 0}).set_requires_grad(true);
  const LabelTensor y = LabelTensor::from_vector({1, 0});
  Tensor loss = balanced_softmax_cross_entropy(x, y, log_prior);
  EXPECT_NEAR(loss.item(), want_loss, kFloatTolerance);
  loss.backward();
  const std::vector<float> dx = x.grad().to_vector();
  const std::vector<int32_t> labels = {1, 0};
  for (int64_t i = 0; i < 6; ++i) {
    const double onehot = (i % 3) == labels[static_cast<size_t>(i / 3)] ? 1.0 : 0.0;
    EXPECT_NEAR(dx[static_cast<size_t>(i)], (want_probs[static_cast<size_t>(i)] - onehot) / 2.0, kFloatTolerance) << i;
  }
}

// With every class counted equally the prior is a constant shift of each row: the loss is cross_entropy's.
TEST(BalancedSoftmax, EqualCountsGiveCrossEntropy) {
  Generator gen(11);
  Tensor x = Tensor::randn({5, 7}, gen, 0.0f, 2.0f);
  const LabelTensor y = LabelTensor::from_vector({0, 6, 3, 3, 1});
  const std::vector<int64_t> counts(7, 9);
  EXPECT_NEAR(balanced_softmax_cross_entropy(x, y, balanced_softmax_log_prior(counts)).item(),
              cross_entropy(x, y).item(), kFloatTolerance);
}

TEST(BalancedSoftmax, AutogradGradcheck) {
  Generator gen(13);
  Tensor x = Tensor::randn({4, 5}, gen, 0.0f, 2.0f).set_requires_grad(true);
  const LabelTensor y = LabelTensor::from_vector({0, 4, 2, 2});
  const std::vector<float> log_prior = balanced_softmax_log_prior(std::vector<int64_t>{3, 1, 6, 2, 4});
  const GradcheckResult r = gradcheck(
      [&](const std::vector<Tensor>& in) { return balanced_softmax_cross_entropy(in[0], y, log_prior); }, {x});
  EXPECT_TRUE(r.ok) << r.first_failure;
  EXPECT_EQ(r.checked, 20);
}

// An absent class with a huge logit: probability exactly 0 and gradient exactly 0; the loss is the one of
// the problem without that class (a softmax over the present classes only).
TEST(BalancedSoftmax, AbsentClassesGetProbabilityAndGradientZero) {
  Tensor x = Tensor::from_vector({2, 3}, std::vector<float>{5, 100, 0, -1, 80, 2}).set_requires_grad(true);
  const LabelTensor y = LabelTensor::from_vector({0, 2});
  const std::vector<float> log_prior = balanced_softmax_log_prior(std::vector<int64_t>{3, 0, 1});
  EXPECT_EQ(log_prior[1], kNegInf);
  Tensor loss = balanced_softmax_cross_entropy(x, y, log_prior);
  loss.backward();
  const double row0 = -std::log(3 * std::exp(5.0) / (3 * std::exp(5.0) + 1.0));
  const double row1 = -std::log(std::exp(2.0) / (3 * std::exp(-1.0) + std::exp(2.0)));
  EXPECT_NEAR(loss.item(), 0.5 * (row0 + row1), kFloatTolerance);
  const std::vector<float> dx = x.grad().to_vector();
  for (float v : dx) EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ(dx[1], 0.0f);
  EXPECT_EQ(dx[4], 0.0f);
}

TEST(BalancedSoftmax, RefusesLabelsOfAbsentClassesAndBadPriors) {
  Tensor x = Tensor::zeros({2, 3});
  const std::vector<float> prior = balanced_softmax_log_prior(std::vector<int64_t>{2, 0, 1});
  expect_error(
      [&] {
        balanced_softmax_cross_entropy(x, LabelTensor::from_vector({0, 1}), prior);
      },
      {"sample 1", "label 1", "no count"});
  expect_error(
      [&] {
        balanced_softmax_cross_entropy(x, LabelTensor::from_vector({0, 1}), std::vector<float>{0, 0});
      },
      {"log_prior of 2 classes"});
  expect_error(
      [&] {
        balanced_softmax_cross_entropy(x, LabelTensor::from_vector({0, 2}), std::vector<float>{0, NAN, 0});
      },
      {"log_prior[1]"});
  expect_error([&] { balanced_softmax_log_prior(std::vector<int64_t>{1, -1}); }, {"class 1 has count -1"});
}

}  // namespace
}  // namespace bastion
