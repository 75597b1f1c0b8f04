// nn/: layers, the flat parameter buffer, the model zoo, optimizers, and a network that learns.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <set>

#include "autograd/flops.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "kernels/cpu/vector.h"
#include "nn/layers.h"
#include "nn/models.h"
#include "nn/optim.h"

using namespace bastion;

namespace {

Tensor random_input(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return Tensor::randn(shape, gen);
}

struct ZooCase {
  const char* name;
  InputShape input;
  int64_t classes;
  int64_t expected_parameters;  // from the PyTorch equivalents (sum of numel over parameters())
};

}  // namespace

TEST(Model, ForwardShapesAndParameterCountsOfTheZoo) {
  // Counts computed by hand from the layer shapes (and equal to PyTorch's for the same modules):
  // lenet 1x28x28: conv1 6*1*25+6, conv2 16*6*25+16, fc1 256*120+120, fc2 120*84+84, fc3 84*10+10.
  const ZooCase cases[] = {
      {"mlp", {1, 28, 28}, 10, 784 * 200 + 200 + 200 * 200 + 200 + 200 * 10 + 10},
      {"lenet", {1, 28, 28}, 10, 156 + 2416 + 30840 + 10164 + 850},
      {"lenet", {3, 32, 32}, 10, 456 + 2416 + 48120 + 10164 + 850},
      {"cnn-fedrep", {3, 32, 32}, 10, 4864 + 102464 + 192120 + 7744 + 650},
      {"cnn-fedfsa", {1, 28, 28}, 10, 104 + 1212 + 197632 + 1049600 + 10250},
      {"cnn-fedcap", {3, 32, 32}, 10, 2432 + 51264 + 102464 + 650},
      {"cnn-spmc", {3, 32, 32}, 10, 456 + 2416 + 48120 + 10164 + 7140 + 21760 + 2570},
      {"cnn-bapfl", {1, 28, 28}, 10, 520 + 25050 + 400500 + 5010},
      {"resnet18", {3, 32, 32}, 10, 11173962},
      {"resnet10", {3, 32, 32}, 10, 4903242},
  };
  for (const ZooCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto model = make_model(c.name, c.input, c.classes, 1);
    EXPECT_EQ(model->num_parameters(), c.expected_parameters);
    model->train(false);
    NoGradGuard no_grad;
    const int64_t batch = c.input.height > 28 && std::string(c.name).rfind("resnet", 0) == 0 ? 2 : 3;
    Tensor y = model->forward(random_input({batch, c.input.channels, c.input.height, c.input.width}, 2));
    EXPECT_EQ(y.shape(), (Shape{batch, c.classes}));
  }
}

TEST(Model, UnknownNameListsTheValidOnes) {
  try {
    make_model("vgg99", {3, 32, 32}, 10, 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lenet"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("vgg99"), std::string::npos) << e.what();
  }
}

TEST(Model, ParameterNamesFollowPyTorch) {
  auto lenet = make_model("lenet", {1, 28, 28}, 10, 1);
  std::vector<std::string> names;
  for (const ParameterView& p : lenet->parameters()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc1.weight",
                                             "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"}));
  EXPECT_EQ(lenet->parameters()[0].value.shape(), (Shape{6, 1, 5, 5}));
  EXPECT_EQ(lenet->parameters()[4].value.shape(), (Shape{120, 256}));

  auto resnet = make_model("resnet18", {3, 32, 32}, 10, 1);
  std::set<std::string> all;
  for (const ParameterView& p : resnet->parameters()) all.insert(p.name);
  for (const ParameterView& b : resnet->buffers()) all.insert(b.name);
  for (const char* expected :
       {"conv1.weight", "bn1.running_var", "layer1.0.conv1.weight", "layer2.0.downsample.0.weight",
        "layer2.0.downsample.1.running_mean", "layer4.1.bn2.bias", "fc.weight"})
    EXPECT_TRUE(all.count(expected)) << expected;
  EXPECT_EQ(resnet->counters().size(), 20u);  // one num_batches_tracked per BatchNorm
  EXPECT_EQ(resnet->counters()[0].first, "bn1.num_batches_tracked");
}

TEST(Model, FlatBuffersBackEveryParameter) {
  auto model = make_model("lenet", {1, 28, 28}, 10, 3);
  int64_t expected_begin = 0;
  for (const ParameterView& p : model->parameters()) {
    EXPECT_EQ(p.begin, expected_begin);
    EXPECT_EQ(p.value.data(), model->flat_parameters().data() + p.begin);
    EXPECT_EQ(p.grad.data(), model->flat_gradients().data() + p.begin);
    expected_begin = p.end;
  }
  EXPECT_EQ(expected_begin, model->num_parameters());
  // Writing through the flat span changes what forward() uses.
  model->train(false);
  Tensor x = random_input({2, 1, 28, 28}, 4);
  NoGradGuard no_grad;
  const float before = model->forward(x).at({0, 0});
  for (float& w : model->flat_parameters()) w = 0.0f;
  EXPECT_NE(model->forward(x).at({0, 0}), before);
  EXPECT_EQ(model->forward(x).at({0, 0}), 0.0f);
}

TEST(Model, BackwardAccumulatesIntoTheFlatGradientBuffer) {
  auto model = make_model("mlp", {1, 28, 28}, 10, 5);
  Tensor x = random_input({4, 1, 28, 28}, 6);
  LabelTensor y = LabelTensor::from_vector({1, 2, 3, 4});
  model->zero_grad();
  cross_entropy(model->forward(x), y).backward();
  std::vector<float> once(model->flat_gradients().begin(), model->flat_gradients().end());
  cross_entropy(model->forward(x), y).backward();
  double max_norm = 0.0;
  for (size_t i = 0; i < once.size(); ++i) {
    EXPECT_FLOAT_EQ(model->flat_gradients()[i], 2.0f * once[i]);
    max_norm = std::max(max_norm, std::abs(static_cast<double>(once[i])));
  }
  EXPECT_GT(max_norm, 0.0);
}

TEST(Model, FrozenBodyGetsNoGradientAndNoUpdate) {
  auto model = make_model("lenet", {1, 28, 28}, 10, 7);
  model->set_trainable(/*head=*/false, false);
  Sgd sgd(*model, {0.1f, 0.0f, 0.0f, false});
  std::vector<float> before(model->flat_parameters().begin(), model->flat_parameters().end());
  model->zero_grad();
  cross_entropy(model->forward(random_input({2, 1, 28, 28}, 8)), LabelTensor::from_vector({0, 1})).backward();
  sgd.step();
  for (const ParameterView& p : model->parameters()) {
    bool changed = false;
    for (int64_t i = p.begin; i < p.end; ++i) changed = changed || model->flat_parameters()[i] != before[i];
    EXPECT_EQ(changed, p.is_head) << p.name;
  }
}

// clip_gradient_norm on a model with its body frozen: the same floats as the clip over the whole vector
// (the frozen ranges are zero, so they add nothing), and the frozen ranges neither read nor scaled: a value
// written there (which no code does) changes neither the head's clip nor itself.
TEST(Optim, ClippingAPartlyFrozenModelMatchesTheWholeVectorsClipAndLeavesFrozenRangesAlone) {
  auto model = make_model("lenet", {1, 28, 28}, 10, 12);
  model->set_trainable(/*head=*/false, false);
  model->zero_grad();
  cross_entropy(model->forward(random_input({4, 1, 28, 28}, 13)), LabelTensor::from_vector({0, 1, 2, 3})).backward();
  const std::span<float> grad = model->flat_gradients();
  const std::vector<float> before(grad.begin(), grad.end());
  const double norm = vector_norm_cpu(before.data(), static_cast<int64_t>(before.size()));
  ASSERT_GT(norm, 0.0);
  const double max_norm = 0.5 * norm;  // so the clip scales
  std::vector<float> want = before;
  vector_scale_cpu(want.data(), static_cast<float>(max_norm / norm), static_cast<int64_t>(want.size()));
  clip_gradient_norm(*model, max_norm);
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(grad[i]), std::bit_cast<uint32_t>(want[i]));
  std::copy(before.begin(), before.end(), grad.begin());
  for (const ParameterView& p : model->parameters())
    if (!p.is_head) std::fill(grad.begin() + p.begin, grad.begin() + p.end, 7.0f);
  clip_gradient_norm(*model, max_norm);
  for (const ParameterView& p : model->parameters())
    for (int64_t i = p.begin; i < p.end; ++i)
      ASSERT_EQ(grad[i], p.is_head ? want[i] : 7.0f) << p.name << " [" << i - p.begin << "]";
}

// zero_grad zeroes a frozen parameter's gradient once, when it first sees it frozen, and not again while it
// stays frozen (nothing writes there); every trainable one at every call; and a parameter unfrozen again
// is zeroed at every call from then on. Head tuning then writes 10 k floats a step instead of 1.26 M.
TEST(Model, ZeroGradZeroesAFrozenGradientOnceAndTheTrainableOnesAlways) {
  auto model = make_model("lenet", {1, 28, 28}, 10, 9);
  const std::span<float> grad = model->flat_gradients();
  const auto fill_with = [&](float v) { std::fill(grad.begin(), grad.end(), v); };
  const auto range_is = [&](const ParameterView& p, float v) {
    return std::all_of(grad.begin() + p.begin, grad.begin() + p.end, [v](float g) { return g == v; });
  };
  model->set_trainable(/*head=*/false, false);
  fill_with(7.0f);
  model->zero_grad();  // first call with the body frozen: everything zeroed
  for (const ParameterView& p : model->parameters()) EXPECT_TRUE(range_is(p, 0.0f)) << p.name;
  fill_with(7.0f);  // what no code does to a frozen range; it shows which ranges the next call writes
  model->zero_grad();
  for (const ParameterView& p : model->parameters()) EXPECT_TRUE(range_is(p, p.is_head ? 0.0f : 7.0f)) << p.name;
  model->set_trainable(/*head=*/false, true);
  model->zero_grad();  // trainable again: zeroed
  for (const ParameterView& p : model->parameters()) EXPECT_TRUE(range_is(p, 0.0f)) << p.name;
  model->set_trainable(/*head=*/false, false);
  fill_with(5.0f);
  model->zero_grad();  // frozen anew: zeroed once more
  for (const ParameterView& p : model->parameters()) EXPECT_TRUE(range_is(p, 0.0f)) << p.name;
}

// Model::note_gradients_zeroed (Sam::step zeroes g in its perturbation pass): the next zero_grad writes
// nothing, the one after writes again; forget_gradients_zeroed drops the note; a frozen model zeroes as
// before whatever the note says.
TEST(Model, ANoteThatTheGradientsAreZeroSkipsOneZeroGradOnly) {
  auto model = make_model("mlp", {1, 4, 4}, 3, 9);
  const std::span<float> grad = model->flat_gradients();
  const auto all_are = [&](float v) { return std::all_of(grad.begin(), grad.end(), [v](float g) { return g == v; }); };
  std::fill(grad.begin(), grad.end(), 7.0f);  // not zero: shows whether zero_grad wrote
  model->note_gradients_zeroed();
  model->zero_grad();
  EXPECT_TRUE(all_are(7.0f));
  model->zero_grad();
  EXPECT_TRUE(all_are(0.0f));
  std::fill(grad.begin(), grad.end(), 7.0f);
  model->note_gradients_zeroed();
  model->forget_gradients_zeroed();
  model->zero_grad();
  EXPECT_TRUE(all_are(0.0f));
  model->set_trainable(/*head=*/true, false);
  std::fill(grad.begin(), grad.end(), 7.0f);
  model->note_gradients_zeroed();
  model->zero_grad();
  EXPECT_TRUE(all_are(0.0f));
}

// The models compute max_pool2d(relu(x)) as relu(max_pool2d(x)); it must be the same function with the
// same gradient, bit for bit, including the cases where the two orders route differently: windows whose
// maximum is 0 or negative (ReLU ties them all at 0) and ties between equal positive values.
TEST(Layers, PoolBeforeReluIsBitwiseTheWrittenOrder) {
  Generator gen(11);
  std::vector<float> values = Tensor::randn({3, 4, 6, 8}, gen).to_vector();
  for (size_t i = 0; i < values.size(); i += 7) values[i] = 0.0f;            // exact zeros
  for (size_t i = 3; i < values.size(); i += 11) values[i] = values[i - 1];  // ties in a window
  for (size_t i = 0; i < 8; ++i) values[i] = -std::abs(values[i]) - 1.0f;    // a row of negative windows
  const Tensor upstream = Tensor::randn({3, 4, 3, 4}, gen);
  auto run = [&](bool pool_first) {
    Tensor x = Tensor::from_vector({3, 4, 6, 8}, values).set_requires_grad(true);
    Tensor y = pool_first ? max_pool2d_of_relu(x, 2) : max_pool2d(relu(x), 2, 2);
    sum(mul(y, upstream)).backward();
    return std::pair{y.to_vector(), x.grad().to_vector()};
  };
  auto bits = [](const std::vector<float>& v) {  // == would let -0 equal +0
    std::vector<uint32_t> out(v.size());
    std::transform(v.begin(), v.end(), out.begin(), [](float f) { return std::bit_cast<uint32_t>(f); });
    return out;
  };
  const auto [written_y, written_dx] = run(false);
  const auto [pooled_y, pooled_dx] = run(true);
  EXPECT_EQ(bits(pooled_y), bits(written_y));
  EXPECT_EQ(bits(pooled_dx), bits(written_dx));
  EXPECT_GT(std::count(written_dx.begin(), written_dx.end(), 0.0f), 0);  // the zero-routing cases occurred
  EXPECT_GT(std::count_if(written_dx.begin(), written_dx.end(), [](float g) { return g != 0.0f; }), 0);
}

TEST(Optim, SgdMatchesTheHandComputedPyTorchUpdate) {
  // Coordinate 0 of the flat buffer: w = 2, its gradient forced to g = 3 by hand.
  auto model = make_model("mlp", {1, 1, 1}, 2, 1);
  Sgd sgd(*model, {0.1f, 0.9f, 0.01f, false});
  float* w = model->flat_parameters().data();
  float* g = model->flat_gradients().data();
  w[0] = 2.0f;
  g[0] = 3.0f;
  sgd.step();  // v = 3 + 0.01*2 = 3.02; w = 2 - 0.1*3.02 = 1.698
  EXPECT_NEAR(w[0], 1.698f, 1e-6);
  g[0] = 3.0f;
  sgd.step();  // v = 0.9*3.02 + 3 + 0.01*1.698 = 5.73498; w = 1.698 - 0.573498 = 1.124502
  EXPECT_NEAR(w[0], 1.124502f, 1e-6);
}

TEST(Optim, NesterovAndStepDecay) {
  auto model = make_model("mlp", {1, 1, 1}, 2, 1);
  Sgd sgd(*model, {0.1f, 0.5f, 0.0f, true});
  float* w = model->flat_parameters().data();
  w[0] = 1.0f;
  model->flat_gradients()[0] = 2.0f;
  sgd.step();  // v = 2; step = 2 + 0.5*2 = 3; w = 1 - 0.3
  EXPECT_NEAR(w[0], 0.7f, 1e-6);
  const StepDecay decay{0.1f, 2, 0.5f};
  EXPECT_FLOAT_EQ(decay.lr_at(0), 0.1f);
  EXPECT_FLOAT_EQ(decay.lr_at(1), 0.1f);
  EXPECT_FLOAT_EQ(decay.lr_at(2), 0.05f);
  EXPECT_FLOAT_EQ(decay.lr_at(5), 0.025f);
  EXPECT_THROW(Sgd(*model, {0.1f, 1.5f, 0.0f, false}), Error);
}

TEST(Optim, SamUsesTheGradientAtThePerturbedPoint) {
  // f(w) = sum w^3 / 3 over the flat parameters, so grad = w^2 (written by hand). With w = (1, 2, 0, ...)
  // and rho = 1: e = g/||g|| = (1, 4, 0, ...)/sqrt(17); SGD(lr 0.1) steps with the gradient at w + e.
  auto model = make_model("mlp", {1, 1, 1}, 2, 1);
  Sgd sgd(*model, {0.1f, 0.0f, 0.0f, false});
  Sam sam(*model, sgd, 1.0f);
  auto w = model->flat_parameters();
  for (float& v : w) v = 0.0f;
  w[0] = 1.0f;
  w[1] = 2.0f;
  auto cube_loss = [&]() {  // reads w through the model: the ascent pass runs on another buffer (nn/optim.h)
    model->zero_grad();
    auto g = model->flat_gradients();
    const auto at = model->flat_parameters();
    for (size_t i = 0; i < at.size(); ++i) g[i] = at[i] * at[i];
    return 0.0f;
  };
  sam.step(cube_loss);
  const double n = std::sqrt(17.0);
  const double p0 = 1.0 + 1.0 / n, p1 = 2.0 + 4.0 / n;
  EXPECT_NEAR(w[0], 1.0 - 0.1 * p0 * p0, 1e-5);
  EXPECT_NEAR(w[1], 2.0 - 0.1 * p1 * p1, 1e-5);
}

TEST(Layers, ReducedWidthResNetGradcheck) {
  // A width-2 ResNet10 on 3x12x12: every BasicBlock path (identity and downsample shortcut), BatchNorm
  // in training mode, global pooling and the head, checked against finite differences for a parameter
  // of each kind of layer. The input and the other parameters are left out to keep the test fast under
  // the sanitizers (the input alone is 1728 elements); every op's input gradient is checked on its own
  // in test_ops_gradcheck.cpp.
  auto model = make_resnet(1, 2, {3, 12, 12}, 3, 11);
  std::vector<Tensor> inputs{random_input({4, 3, 12, 12}, 12)};
  for (const ParameterView& p : model->parameters())
    if (p.name == "conv1.weight" || p.name == "layer2.0.downsample.0.weight" || p.name == "layer3.0.bn2.weight" ||
        p.name == "fc.weight" || p.name == "fc.bias")
      inputs.push_back(p.value);
  ASSERT_EQ(inputs.size(), 6u);  // the data and five parameters
  GradcheckOptions options;
  // A stem weight moves every activation of the net, so with the default h = 1e-2 some of the ~10^3
  // ReLU inputs cross zero and the difference quotient is off by 30 % (measured: numeric 0.336, 0.245,
  // 0.231, 0.218, 0.168, 0.168 for h = 3e-2 ... 1e-4 against analytic 0.169). h = 3e-4 is past the kinks;
  // float32 round-off over 2h is then ~1e-3 after BatchNorm's amplification, hence atol 5e-3.
  options.step = 3e-4;
  options.atol = 5e-3;
  auto result = gradcheck([&](const std::vector<Tensor>& in) { return model->forward(in[0]); }, inputs, options);
  EXPECT_TRUE(result.ok) << result.first_failure << " (checked " << result.checked << ")";
}

TEST(Layers, ResNet18ForwardBackwardOnCifarShapedBatch) {
  auto model = make_model("resnet18", {3, 32, 32}, 10, 13);
  model->zero_grad();
  Tensor loss = cross_entropy(model->forward(random_input({2, 3, 32, 32}, 14)), LabelTensor::from_vector({3, 7}));
  loss.backward();
  EXPECT_TRUE(std::isfinite(loss.item()));
  double grad_norm = 0.0;
  for (float g : model->flat_gradients()) grad_norm += static_cast<double>(g) * g;
  EXPECT_GT(grad_norm, 0.0);
  EXPECT_TRUE(std::isfinite(grad_norm));
  // Every parameter got a gradient (no disconnected layer).
  for (const ParameterView& p : model->parameters()) {
    double norm = 0.0;
    for (int64_t i = p.begin; i < p.end; ++i) norm += std::abs(model->flat_gradients()[i]);
    EXPECT_GT(norm, 0.0) << p.name;
  }
}

TEST(Layers, BatchNormUpdatesRunningStatisticsLikePyTorch) {
  BatchNorm bn(1, 0.1f, 1e-5f);
  Tensor x = Tensor::from_vector({4, 1}, std::vector<float>{1, 2, 3, 4});
  bn.forward(x);
  // mean 2.5, unbiased var 1.6667: running = 0.9*0 + 0.1*2.5, 0.9*1 + 0.1*1.6667
  EXPECT_NEAR(bn.running_mean.at({0}), 0.25f, 1e-6);
  EXPECT_NEAR(bn.running_var.at({0}), 0.9f + 0.1f * 5.0f / 3.0f, 1e-6);
  EXPECT_EQ(bn.num_batches_tracked, 1);
  bn.train(false);
  bn.forward(x);
  EXPECT_EQ(bn.num_batches_tracked, 1);
}

TEST(Training, TinyNetworkLearnsASyntheticTask) {
  // Two Gaussian blobs per class in 2-D, 3 classes: an MLP must go from chance to > 95% accuracy.
  Generator gen(21);
  const int64_t n = 300;
  std::vector<float> xs(n * 2);
  std::vector<int32_t> ys(n);
  const float centers[3][2] = {{2, 0}, {-1, 1.7f}, {-1, -1.7f}};
  for (int64_t i = 0; i < n; ++i) {
    ys[i] = static_cast<int32_t>(i % 3);
    xs[2 * i] = centers[ys[i]][0] + 0.5f * static_cast<float>(gen.normal());
    xs[2 * i + 1] = centers[ys[i]][1] + 0.5f * static_cast<float>(gen.normal());
  }
  Tensor x = Tensor::from_vector({n, 2, 1, 1}, xs);
  LabelTensor y = LabelTensor::from_vector(ys);
  auto model = make_model("mlp", {2, 1, 1}, 3, 22);
  Sgd sgd(*model, {0.05f, 0.9f, 0.0f, false});
  float first_loss = 0.0f, last_loss = 0.0f;
  for (int step = 0; step < 100; ++step) {
    model->zero_grad();
    Tensor loss = cross_entropy(model->forward(x), y);
    loss.backward();
    sgd.step();
    (step == 0 ? first_loss : last_loss) = loss.item();
  }
  NoGradGuard no_grad;
  Tensor logits = model->forward(x);
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    int best = 0;
    for (int c = 1; c < 3; ++c)
      if (logits.at({i, c}) > logits.at({i, best})) best = c;
    correct += best == ys[i];
  }
  EXPECT_LT(last_loss, 0.5f * first_loss);
  EXPECT_GT(static_cast<double>(correct) / n, 0.95);
}

TEST(Training, StepsAfterTheFirstTakeNoFreshBuffers) {
  // The storage pool hands every activation and gradient buffer of a repeated step back out, so the
  // hot loop does no malloc for tensor data once warm (DESIGN: "no allocation per op in the hot loop").
  auto model = make_model("lenet", {1, 28, 28}, 10, 31);
  Sgd sgd(*model, {0.01f, 0.9f, 0.0f, false});
  Tensor x = random_input({16, 1, 28, 28}, 32);
  std::vector<int32_t> labels(16);
  for (int i = 0; i < 16; ++i) labels[i] = i % 10;
  const LabelTensor y = LabelTensor::from_vector(labels);
  auto step = [&]() {
    model->zero_grad();
    cross_entropy(model->forward(x), y).backward();
    sgd.step();
  };
  step();
  step();
  const int64_t fresh_before = storage_pool_stats().fresh_allocations;
  for (int i = 0; i < 5; ++i) step();
  EXPECT_EQ(storage_pool_stats().fresh_allocations, fresh_before);
}

// The flop counter (autograd/flops.h) against LeNet-5 on 1x28x28 counted by hand: conv1 1->6 k5 (24x24
// out), conv2 6->16 k5 (8x8 out), fc 256-120-84-10. The backward computes both products of every layer
// but conv1, whose input (the batch) needs no gradient: only its weight gradient.
TEST(FlopCount, LenetStepCountsEveryProductOnce) {
  constexpr int64_t N = 2;
  const int64_t conv1 = 2 * N * 6 * 25 * 24 * 24, conv2 = 2 * N * 16 * 150 * 8 * 8;
  const int64_t fcs = 2 * N * (256 * 120 + 120 * 84 + 84 * 10);
  auto model = make_model("lenet", {1, 28, 28}, 10, 3);
  model->zero_grad();
  const int64_t start = thread_flops();
  Tensor loss = cross_entropy(model->forward(random_input({N, 1, 28, 28}, 4)), LabelTensor::from_vector({1, 7}));
  EXPECT_EQ(thread_flops() - start, conv1 + conv2 + fcs);
  loss.backward();
  EXPECT_EQ(thread_flops() - start, (conv1 + conv2 + fcs) + (conv1 + 2 * conv2 + 2 * fcs));
}
