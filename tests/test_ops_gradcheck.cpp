// Finite-difference gradient checks for every differentiable op in autograd/ops.h, plus one test that
// proves gradcheck can fail. All use the default GradcheckOptions (step 1e-2, rtol 2e-2, atol 2e-3; see
// autograd/gradcheck.h for why they suit float32 forwards); inputs are O(1) and kept away from kinks
// (ReLU at 0, max-pool ties) by more than the step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "kernels/cpu/gemm.h"  // set_num_threads

namespace bastion {
namespace {

using Inputs = std::vector<Tensor>;
using Fn = std::function<Tensor(const Inputs&)>;

Tensor leaf(Tensor t) { return t.set_requires_grad(true); }

// The largest analytic gradient of every checked input must exceed atol by this factor; otherwise a
// zero or wrongly scaled-down gradient would pass on atol alone.
constexpr double kNonVacuousFactor = 10.0;

// Gradcheck runs thousands of tiny forwards, each opening a few OpenMP regions (im2col, bias, pooling
// planes). On a loaded machine every region can wait a scheduler slice for a descheduled worker: the conv
// checks took 32 ms with one thread and 1-10 s with two on the shared 2-vCPU build box. The kernels'
// thread-count independence is tested in test_kernels_cpu.cpp, so these tests run single-threaded.
class SingleThreaded {
 public:
  SingleThreaded() : saved_(num_threads()) { set_num_threads(1); }
  ~SingleThreaded() { set_num_threads(saved_); }
  SingleThreaded(const SingleThreaded&) = delete;
  SingleThreaded& operator=(const SingleThreaded&) = delete;

 private:
  int saved_;
};

// Runs gradcheck and checks that it looked at every element of every input that requires grad.
void expect_gradcheck(const Fn& fn, const Inputs& inputs, const GradcheckOptions& options = {}) {
  const SingleThreaded single_threaded;
  int64_t expected = 0;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) expected += t.numel();
  const GradcheckResult r = gradcheck(fn, inputs, options);
  EXPECT_TRUE(r.ok) << r.first_failure << " (max abs error " << r.max_abs_error << ")";
  EXPECT_EQ(r.checked, expected);
  // Not vacuous: each checked input has gradients well above atol, so "ok" means the relative test held.
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].defined() || !inputs[k].requires_grad()) continue;
    float largest = 0.0f;
    for (float g : inputs[k].grad().to_vector()) largest = std::max(largest, std::abs(g));
    EXPECT_GT(largest, kNonVacuousFactor * options.atol) << "input " << k << " has only tiny gradients";
  }
}

// sign * (margin + |N(0,1)|): never within `margin` of 0, so a step of 1e-2 cannot cross a ReLU kink.
Tensor away_from_zero(const Shape& shape, Generator& gen, float margin = 0.1f) {
  Tensor t = Tensor::randn(shape, gen);
  for (float& v : t.span()) v = (v < 0.0f ? -1.0f : 1.0f) * (margin + std::abs(v));
  return t;
}

// A random permutation of the distinct values (i - numel/2) * spacing: no two elements lie within
// 2 * step of each other, so a +-step perturbation never changes which element is a window's maximum.
Tensor distinct_values(const Shape& shape, Generator& gen, float spacing) {
  Tensor t = Tensor::empty(shape);
  const int64_t n = t.numel();
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[gen.below(i + 1)]);  // Fisher-Yates
  for (int64_t i = 0; i < n; ++i) t.data()[i] = static_cast<float>(order[i] - n / 2) * spacing;
  return t;
}

// Spacing for distinct_values: more than 2 * the default step (1e-2).
constexpr float kNoTieSpacing = 0.03f;

// ---------------------------------------------------------------- gradcheck itself

// A deliberately wrong backward (y = x, but backward returns 2 g) must be caught, and the same node with
// the right backward must pass: so the pass/fail verdict depends on the gradient and nothing else.
Tensor identity_with_backward_factor(const Tensor& x, float factor) {
  Tensor y = x.clone();
  return record(y, "identity_factor", {x}, [factor](const Tensor& g, const Node&) {
    Tensor dx = g.clone();
    for (float& v : dx.span()) v *= factor;
    return std::vector<Tensor>{dx};
  });
}

TEST(Gradcheck, CatchesAWrongBackward) {
  Generator gen(1);
  Tensor x = leaf(Tensor::randn({3, 4}, gen));
  const GradcheckResult wrong =
      gradcheck([](const Inputs& in) { return identity_with_backward_factor(in[0], 2.0f); }, {x});
  EXPECT_FALSE(wrong.ok);
  EXPECT_FALSE(wrong.first_failure.empty());
  EXPECT_GT(wrong.max_abs_error, 1e-2);
  const GradcheckResult right =
      gradcheck([](const Inputs& in) { return identity_with_backward_factor(in[0], 1.0f); }, {x});
  EXPECT_TRUE(right.ok) << right.first_failure;
}

// ---------------------------------------------------------------- elementwise.cpp

TEST(GradcheckElementwise, Add) {
  Generator gen(2);
  Tensor a = leaf(Tensor::randn({3, 4}, gen)), b = leaf(Tensor::randn({3, 4}, gen));
  expect_gradcheck([](const Inputs& in) { return add(in[0], in[1]); }, {a, b});
}

TEST(GradcheckElementwise, Sub) {
  Generator gen(3);
  Tensor a = leaf(Tensor::randn({3, 4}, gen)), b = leaf(Tensor::randn({3, 4}, gen));
  expect_gradcheck([](const Inputs& in) { return sub(in[0], in[1]); }, {a, b});
}

TEST(GradcheckElementwise, SubOnlySecondInputRequiresGrad) {
  Generator gen(4);
  Tensor a = Tensor::randn({5}, gen), b = leaf(Tensor::randn({5}, gen));
  expect_gradcheck([](const Inputs& in) { return sub(in[0], in[1]); }, {a, b});
}

TEST(GradcheckElementwise, Mul) {
  Generator gen(5);
  Tensor a = leaf(Tensor::randn({2, 3, 2}, gen)), b = leaf(Tensor::randn({2, 3, 2}, gen));
  expect_gradcheck([](const Inputs& in) { return mul(in[0], in[1]); }, {a, b});
}

TEST(GradcheckElementwise, MulSameTensorTwice) {  // d(x*x)/dx = 2x: both gradients reach one leaf
  Generator gen(6);
  Tensor a = leaf(Tensor::randn({7}, gen));
  expect_gradcheck([](const Inputs& in) { return mul(in[0], in[0]); }, {a});
}

TEST(GradcheckElementwise, Scale) {
  Generator gen(7);
  Tensor a = leaf(Tensor::randn({4, 3}, gen));
  expect_gradcheck([](const Inputs& in) { return scale(in[0], -1.7f); }, {a});
}

TEST(GradcheckElementwise, Sum) {
  Generator gen(8);
  Tensor a = leaf(Tensor::randn({2, 3, 4}, gen));
  expect_gradcheck([](const Inputs& in) { return sum(in[0]); }, {a});
}

TEST(GradcheckElementwise, Mean) {
  Generator gen(9);
  Tensor a = leaf(Tensor::randn({2, 5}, gen));
  expect_gradcheck([](const Inputs& in) { return mean(in[0]); }, {a});
}

TEST(GradcheckElementwise, Reshape) {  // followed by mul so the gradient has to travel back through the view
  Generator gen(10);
  Tensor a = leaf(Tensor::randn({2, 3, 4}, gen)), b = leaf(Tensor::randn({6, 4}, gen));
  expect_gradcheck([](const Inputs& in) { return mul(reshape(in[0], {6, 4}), in[1]); }, {a, b});
}

TEST(GradcheckElementwise, Flatten) {
  Generator gen(11);
  Tensor a = leaf(Tensor::randn({2, 3, 2, 2}, gen));
  expect_gradcheck(
      [](const Inputs& in) {
        Tensor y = flatten(in[0]);
        EXPECT_EQ(y.shape(), Shape({2, 12}));
        return mul(y, y);
      },
      {a});
}

// ---------------------------------------------------------------- activation.cpp

TEST(GradcheckActivation, Relu) {
  Generator gen(12);
  Tensor x = leaf(away_from_zero({3, 5}, gen));
  expect_gradcheck([](const Inputs& in) { return relu(in[0]); }, {x});
}

TEST(GradcheckActivation, DropoutWithTheSameMaskEveryCall) {
  Generator gen(13);
  Tensor x = leaf(Tensor::randn({4, 6}, gen));
  constexpr float kP = 0.4f;
  Generator mask_gen(0);
  const Fn fn = [&mask_gen](const Inputs& in) {
    mask_gen.reseed(77);  // every forward of gradcheck draws the same mask
    return dropout(in[0], kP, /*training=*/true, mask_gen);
  };
  // The mask must really drop some elements and scale the rest, or this test checks only the identity.
  const std::vector<float> y = fn({x}).to_vector(), xv = x.to_vector();
  int dropped = 0, kept = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] == 0.0f) {
      ++dropped;
    } else {
      ++kept;
      EXPECT_NEAR(y[i], xv[i] / (1.0f - kP), 1e-6f * std::abs(xv[i]) + 1e-7f);
    }
  }
  EXPECT_GT(dropped, 0);
  EXPECT_GT(kept, 0);
  expect_gradcheck(fn, {x});
}

TEST(GradcheckActivation, DropoutEvalIsIdentity) {
  Generator gen(14);
  Tensor x = leaf(Tensor::randn({3, 3}, gen));
  Generator mask_gen(5);
  expect_gradcheck([&mask_gen](const Inputs& in) { return scale(dropout(in[0], 0.5f, false, mask_gen), 1.0f); }, {x});
}

// ---------------------------------------------------------------- linear.cpp

TEST(GradcheckLinear, WithBias) {
  Generator gen(15);
  Tensor x = leaf(Tensor::randn({3, 5}, gen)), w = leaf(Tensor::randn({4, 5}, gen));
  Tensor b = leaf(Tensor::randn({4}, gen));
  expect_gradcheck([](const Inputs& in) { return linear(in[0], in[1], in[2]); }, {x, w, b});
}

TEST(GradcheckLinear, WithoutBias) {
  Generator gen(16);
  Tensor x = leaf(Tensor::randn({2, 7}, gen)), w = leaf(Tensor::randn({3, 7}, gen));
  expect_gradcheck([](const Inputs& in) { return linear(in[0], in[1], Tensor()); }, {x, w});
}

// ---------------------------------------------------------------- conv.cpp

struct ConvCase {
  int64_t N, C, H, W, K, R, stride, padding;
  bool bias;
};

void check_conv(const ConvCase& c, bool input_requires_grad, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "N" << c.N << " C" << c.C << " " << c.H << "x" << c.W << " K" << c.K << " R"
                                    << c.R << " stride " << c.stride << " pad " << c.padding
                                    << (c.bias ? " bias" : " no bias")
                                    << (input_requires_grad ? "" : " (input without grad)"));
  Generator gen(seed);
  Tensor x = Tensor::randn({c.N, c.C, c.H, c.W}, gen);
  if (input_requires_grad) x.set_requires_grad(true);
  // Weights scaled like a fan-in init, so outputs stay O(1) and float round-off in L stays small.
  const float w_std = 1.0f / std::sqrt(static_cast<float>(c.C * c.R * c.R));
  Tensor w = leaf(Tensor::randn({c.K, c.C, c.R, c.R}, gen, 0.0f, w_std));
  Tensor b = c.bias ? leaf(Tensor::randn({c.K}, gen)) : Tensor();
  const int64_t stride = c.stride, padding = c.padding;
  expect_gradcheck([stride, padding](const Inputs& in) { return conv2d(in[0], in[1], in[2], stride, padding); },
                   {x, w, b});
}

TEST(GradcheckConv, Geometries) {
  const ConvCase cases[] = {
      {2, 3, 7, 9, 4, 3, 1, 1, true},   // same padding, non-square
      {2, 3, 7, 9, 4, 3, 2, 0, true},   // stride 2, no padding, odd sizes leave a remainder
      {3, 1, 8, 7, 4, 5, 2, 2, true},   // single channel, kernel 5, stride 2, padding 2
      {2, 3, 6, 5, 4, 5, 1, 2, false},  // kernel 5, no bias
      {2, 1, 5, 5, 4, 3, 2, 1, true},   // C = 1, stride 2, padding 1
      {3, 3, 9, 7, 4, 3, 1, 0, false},  // batch 3, valid conv
      // ResNet-style 3x3 layers with channels multiples of 16: the channel-blocked path
      // (kernels/cpu/conv_blocked.h), stride 1 and stride 2 on odd sizes
      {2, 16, 5, 4, 16, 3, 1, 1, true},
      {3, 16, 5, 5, 32, 3, 2, 1, false},
      // the same at stride 1 on even planes: Winograd F(2x2, 3x3) where conv2d_winograd_preferred says so
      // (kernels/cpu/conv_winograd.h), else the channel-blocked path again
      {2, 16, 4, 6, 32, 3, 1, 1, true},
  };
  uint64_t seed = 100;
  for (const ConvCase& c : cases) check_conv(c, /*input_requires_grad=*/true, seed++);
}

TEST(GradcheckConv, FirstLayerOnlyWeightRequiresGrad) {  // the path that skips col2im
  check_conv({2, 3, 7, 9, 4, 3, 1, 1, true}, /*input_requires_grad=*/false, 200);
  check_conv({3, 1, 8, 7, 4, 5, 2, 2, false}, /*input_requires_grad=*/false, 201);
}

// ---------------------------------------------------------------- pool.cpp

TEST(GradcheckPool, MaxPool) {
  struct Case {
    int64_t kernel, stride, padding;
  };
  for (const Case c : {Case{2, 2, 0}, Case{3, 2, 1}, Case{3, 1, 0}, Case{2, 1, 1}}) {
    SCOPED_TRACE(::testing::Message() << "kernel " << c.kernel << " stride " << c.stride << " pad " << c.padding);
    Generator gen(300 + c.kernel * 10 + c.stride + c.padding);
    Tensor x = leaf(distinct_values({2, 3, 6, 7}, gen, kNoTieSpacing));
    expect_gradcheck([c](const Inputs& in) { return max_pool2d(in[0], c.kernel, c.stride, c.padding); }, {x});
  }
}

TEST(GradcheckPool, AvgPool) {
  struct Case {
    int64_t kernel, stride, padding;
  };
  for (const Case c : {Case{2, 2, 0}, Case{3, 2, 1}, Case{3, 1, 1}, Case{3, 3, 0}}) {
    SCOPED_TRACE(::testing::Message() << "kernel " << c.kernel << " stride " << c.stride << " pad " << c.padding);
    Generator gen(400 + c.kernel * 10 + c.stride + c.padding);
    Tensor x = leaf(Tensor::randn({2, 3, 7, 6}, gen));
    expect_gradcheck([c](const Inputs& in) { return avg_pool2d(in[0], c.kernel, c.stride, c.padding); }, {x});
  }
}

TEST(GradcheckPool, GlobalAvgPool) {
  Generator gen(500);
  Tensor x = leaf(Tensor::randn({2, 3, 3, 4}, gen));
  expect_gradcheck([](const Inputs& in) { return global_avg_pool2d(in[0]); }, {x});
}

// ---------------------------------------------------------------- batchnorm.cpp

void check_batch_norm(const Shape& shape, bool training, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << shape << (training ? " training" : " eval"));
  Generator gen(seed);
  const int64_t C = shape[1];
  Tensor x = leaf(Tensor::randn(shape, gen, 0.5f, 2.0f));
  Tensor gamma = leaf(Tensor::randn({C}, gen, 1.0f, 0.5f)), beta = leaf(Tensor::randn({C}, gen));
  // Running statistics away from (0, 1), so eval mode really uses them.
  Tensor running_mean = Tensor::randn({C}, gen, 0.0f, 0.5f);
  Tensor running_var = Tensor::uniform({C}, gen, 0.5f, 2.0f);
  expect_gradcheck(
      [=](const Inputs& in) {
        return batch_norm(in[0], in[1], in[2], running_mean, running_var, training, 0.1f, 1e-5f);
      },
      {x, gamma, beta});
}

TEST(GradcheckBatchNorm, Training2d) { check_batch_norm({6, 3}, true, 600); }
TEST(GradcheckBatchNorm, Training4d) { check_batch_norm({2, 3, 3, 4}, true, 601); }
TEST(GradcheckBatchNorm, Eval2d) { check_batch_norm({4, 3}, false, 602); }
TEST(GradcheckBatchNorm, Eval4d) { check_batch_norm({2, 3, 3, 2}, false, 603); }

// ---------------------------------------------------------------- softmax.cpp

TEST(GradcheckSoftmax, LogSoftmax) {
  Generator gen(700);
  Tensor x = leaf(Tensor::randn({3, 5}, gen, 0.0f, 2.0f));
  expect_gradcheck([](const Inputs& in) { return log_softmax(in[0]); }, {x});
}

TEST(GradcheckSoftmax, CrossEntropy) {
  Generator gen(701);
  Tensor x = leaf(Tensor::randn({4, 5}, gen, 0.0f, 2.0f));
  const LabelTensor y = LabelTensor::from_vector({0, 4, 2, 2});
  expect_gradcheck([y](const Inputs& in) { return cross_entropy(in[0], y); }, {x});
}

TEST(GradcheckSoftmax, KlDivStudentAndTeacher) {
  for (const float T : {1.0f, 4.0f}) {
    SCOPED_TRACE(::testing::Message() << "temperature " << T);
    Generator gen(702 + static_cast<uint64_t>(T));
    // Logits spread with T, so softmax(s / T) is far from uniform and the gradients are not tiny.
    Tensor s = leaf(Tensor::randn({3, 5}, gen, 0.0f, 1.5f * T));
    Tensor t = leaf(Tensor::randn({3, 5}, gen, 0.0f, 1.5f * T));
    expect_gradcheck([T](const Inputs& in) { return kl_div(in[0], in[1], T); }, {s, t});
  }
}

TEST(GradcheckSoftmax, KlDivTeacherWithoutGrad) {  // distillation: the teacher is a constant
  Generator gen(710);
  Tensor s = leaf(Tensor::randn({2, 4}, gen, 0.0f, 3.0f));
  Tensor t = Tensor::randn({2, 4}, gen, 0.0f, 3.0f);
  expect_gradcheck([](const Inputs& in) { return kl_div(in[0], in[1], 2.0f); }, {s, t});
}

// ---------------------------------------------------------------- a small composition

// FedCR's Gaussian bottleneck (autograd/ops/gaussian.cpp). softplus is smooth, so random O(1) encodings
// have no kinks; prior sigmas in [0.5, 1.5] and encoder sigmas softplus(N(0,1)) (about 0.2 to 2) keep the
// KL's 1/sigma^3 terms O(10) at most.
TEST(GradcheckGaussian, SampleWithFixedNoise) {
  Generator gen(900);
  const Tensor eps = Tensor::randn({3, 2, 4}, gen);
  for (const float alpha : {0.0f, 0.7f})
    expect_gradcheck([&](const Inputs& in) { return gaussian_sample(in[0], eps, alpha); },
                     {leaf(Tensor::randn({2, 8}, gen))});
}

TEST(GradcheckGaussian, KlToAGivenPrior) {
  Generator gen(901);
  const Tensor pm = Tensor::randn({3, 4}, gen), ps = Tensor::uniform({3, 4}, gen, 0.5f, 1.5f);
  expect_gradcheck([&](const Inputs& in) { return gaussian_kl(in[0], pm, ps, 0.0f); },
                   {leaf(Tensor::randn({3, 8}, gen))});
}

TEST(GradcheckGaussian, SampleMeanAndTheWholeBottleneck) {
  Generator gen(902);
  expect_gradcheck([](const Inputs& in) { return sample_mean(in[0], 3); }, {leaf(Tensor::randn({6, 5}, gen))});
  // encoding -> z -> linear head -> CE over the stacked samples + KL, as the fedcr rule's loss.
  const Tensor eps = Tensor::randn({2, 3, 2}, gen), pm = Tensor::zeros({3, 2}), ps = Tensor::full({3, 2}, 1.0f);
  const LabelTensor y = LabelTensor::from_vector({0, 2, 1, 0, 2, 1});
  expect_gradcheck(
      [&](const Inputs& in) {
        const Tensor logits = linear(gaussian_sample(in[0], eps, 0.0f), in[1], in[2]);
        return add(cross_entropy(logits, y), scale(gaussian_kl(in[0], pm, ps, 0.0f), 0.5f));
      },
      {leaf(Tensor::randn({3, 4}, gen)), leaf(Tensor::randn({3, 2}, gen)), leaf(Tensor::randn({3}, gen))});
}

TEST(GradcheckComposite, ConvBatchNormSquarePoolLinearCrossEntropy) {  // shared inputs, sums of gradients in the engine
  Generator gen(800);
  Tensor x = leaf(Tensor::randn({2, 2, 6, 6}, gen));
  Tensor w = leaf(Tensor::randn({3, 2, 3, 3}, gen, 0.0f, 0.3f));
  Tensor gamma = leaf(Tensor::randn({3}, gen, 1.0f, 0.2f)), beta = leaf(Tensor::randn({3}, gen, 0.0f, 0.2f));
  Tensor fc = leaf(Tensor::randn({4, 3}, gen, 0.0f, 0.5f));
  Tensor rm = Tensor::zeros({3}), rv = Tensor::full({3}, 1.0f);
  const LabelTensor y = LabelTensor::from_vector({1, 3});
  // Eval-mode BN and average pooling keep the function smooth enough for finite differences (a
  // ReLU kink could sit within a step of some intermediate value, so ReLU is left out here).
  expect_gradcheck(
      [=](const Inputs& in) {
        Tensor h = conv2d(in[0], in[1], Tensor(), 1, 1);
        h = batch_norm(h, in[2], in[3], rm, rv, false, 0.1f, 1e-5f);
        h = add(h, mul(h, h));
        h = flatten(global_avg_pool2d(h));
        return cross_entropy(linear(h, in[4], Tensor()), y);
      },
      {x, w, gamma, beta, fc});
}

}  // namespace
}  // namespace bastion
