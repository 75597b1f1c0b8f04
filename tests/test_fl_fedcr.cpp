// FedCR (fl/clients/fedcr.cpp, fl/clients/fedcr.h, nn/fedcr_model.h): the KL regulariser against a hand
// computation, the two-expert and server products of experts on constructed Gaussians, the stochastic
// encoder's forward (shapes, seeded noise, deterministic eval averaging), the rule on a tiny encoder
// (personal head kept, Gaussians uploaded for the client's classes only), and whole runs through the
// registry (fc4 never uploaded, deterministic across thread counts, resumable).
// The ops' finite-difference checks are in test_ops_gradcheck.cpp (GradcheckGaussian).
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/ops.h"
#include "cuda_test_support.h"
#include "data/synthetic.h"
#include "fl/clients/fedcr.h"
#include "fl/clients/local_training.h"
#include "fl/core/checkpoint.h"
#include "fl/core/experiment.h"
#include "data/dataset.h"
#include "fl_test_support.h"
#include "nn/fedcr_model.h"
#include "nn/models.h"
#include "personalized_test_support.h"
#include "test_support.h"

namespace bastion {
namespace {

using namespace pfl_testing;
using testing::expect_error;

// Float32 forward of a handful of terms of O(1): a few ulps of the result.
constexpr double kFloatTolerance = 1e-5;
// Double arithmetic on a few O(1) terms.
constexpr double kDoubleTolerance = 1e-12;

const InputShape kImage{1, 16, 16};  // the smallest input the two k5 conv + pool stages accept with room

double softplus(double x) { return std::log1p(std::exp(x)); }

// KL(N(pm, ps) || N(mu, s)) of one coordinate, written out.
double kl_by_hand(double pm, double ps, double mu, double s) {
  return 0.5 * (ps * ps / (s * s) + (mu - pm) * (mu - pm) / (s * s) - 1.0 + 2.0 * std::log(s) - 2.0 * std::log(ps));
}

std::unique_ptr<Model> tiny_fedcr(uint64_t seed, FedcrBottleneck b = {4, 3, 5, 0.0f}) {
  return make_fedcr_cnn("cnn-fedcr-tiny", kImage, {2, 3, 8, 8}, 10, b, seed);
}

Dataset synthetic_images(int64_t n) {
  SyntheticSpec spec;
  spec.train = n;
  spec.test = 10;
  spec.height = spec.width = 16;
  return make_synthetic(spec).train;
}

TEST(FedcrKl, MatchesTheHandComputationAndIsZeroAtThePrior) {
  // N = 2 rows, d = 2: E = [mu0 mu1 | pre0 pre1], sigma = softplus(pre - alpha).
  const std::vector<float> e = {0.5f, -1.0f, 0.3f, -0.7f, 2.0f, 0.0f, 1.1f, 0.4f};
  const std::vector<float> pm = {0.2f, 0.0f, -1.0f, 0.5f}, ps = {0.8f, 1.0f, 1.5f, 0.6f};
  for (const float alpha : {0.0f, 0.5f}) {
    const Tensor kl = gaussian_kl(Tensor::from_vector({2, 4}, e), Tensor::from_vector({2, 2}, pm),
                                  Tensor::from_vector({2, 2}, ps), alpha);
    double expected = 0.0;
    for (int n = 0; n < 2; ++n)
      for (int j = 0; j < 2; ++j)
        expected += kl_by_hand(pm[n * 2 + j], ps[n * 2 + j], e[n * 4 + j], softplus(e[n * 4 + 2 + j] - alpha));
    EXPECT_NEAR(kl.item(), expected / 2.0, kFloatTolerance * std::abs(expected)) << "alpha " << alpha;
  }
  // Encoder equal to the prior: KL = 0 (sigma = softplus(log(e - 1)) = 1).
  const float pre_one = static_cast<float>(std::log(std::exp(1.0) - 1.0));
  const Tensor at_prior = gaussian_kl(Tensor::from_vector({1, 2}, std::vector<float>{0.0f, pre_one}),
                                      Tensor::zeros({1, 1}), Tensor::full({1, 1}, 1.0f), 0.0f);
  EXPECT_NEAR(at_prior.item(), 0.0, kFloatTolerance);
}

TEST(FedcrKl, TheRegulariserOfATinyEncoderIsTheKlOfItsEncodingToTheLabelsPriors) {
  // The rule's term: beta * gaussian_kl(fc3's output, the rows of the labels' Gaussians).
  auto model = tiny_fedcr(3);
  FedcrCnn* net = fedcr_network(*model);
  ASSERT_NE(net, nullptr);
  Generator gen(4);
  model->train(true);
  model->forward(Tensor::randn({3, 1, 16, 16}, gen));
  const Tensor& encoding = net->last_encoding();
  ASSERT_EQ(encoding.shape(), Shape({3, 8}));
  const Tensor pm = Tensor::randn({3, 4}, gen), ps = Tensor::uniform({3, 4}, gen, 0.5f, 1.5f);
  double expected = 0.0;
  for (int n = 0; n < 3; ++n)
    for (int j = 0; j < 4; ++j)
      expected += kl_by_hand(pm.data()[n * 4 + j], ps.data()[n * 4 + j], encoding.data()[n * 8 + j],
                             softplus(encoding.data()[n * 8 + 4 + j]));
  EXPECT_NEAR(gaussian_kl(encoding, pm, ps, 0.0f).item(), expected / 3.0, kFloatTolerance * std::abs(expected));
}

TEST(FedcrFusion, TwoExpertsMultiplyToThePrecisionWeightedGaussian) {
  double mu = 1.0, sigma = 1.0;
  fuse_two_experts(mu, sigma, 3.0, 1.0);
  EXPECT_NEAR(mu, 2.0, kDoubleTolerance);
  EXPECT_NEAR(sigma, std::sqrt(0.5), kDoubleTolerance);
  mu = 0.0, sigma = 1.0;
  fuse_two_experts(mu, sigma, 4.0, std::sqrt(3.0));  // var 1 * 3 / 4, mean (4 * 1 + 0 * 3) / 4
  EXPECT_NEAR(mu, 1.0, kDoubleTolerance);
  EXPECT_NEAR(sigma, std::sqrt(0.75), kDoubleTolerance);
}

TEST(FedcrFusion, AClientTakesItsFirstSampleAsItIsAndFusesTheRestPerClass) {
  ClassFusion fusion(3, 1);
  const float mu_a = 1.0f, mu_b = 3.0f, mu_c = -2.0f, one = 1.0f, half = 0.5f;
  fusion.add(2, &mu_a, &one);
  fusion.add(0, &mu_c, &half);
  fusion.add(2, &mu_b, &one);
  const ClassGaussians& g = fusion.gaussians();
  EXPECT_EQ(g.present, (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_NEAR(g.mu[2], 2.0, kDoubleTolerance);
  EXPECT_NEAR(g.sigma[2], std::sqrt(0.5), 1e-7);
  EXPECT_EQ(g.mu[0], -2.0);  // a single sample: no fusion with the (0, 1) start
  EXPECT_EQ(g.sigma[0], 0.5);
  EXPECT_EQ(g.mu[1], 0.0);  // absent class: the initial N(0, 1)
  EXPECT_EQ(g.sigma[1], 1.0);
  const ClassGaussians back = unpack_class_gaussians(pack_class_gaussians(g));
  EXPECT_EQ(back.present, g.present);
  EXPECT_NEAR(back.sigma[2], g.sigma[2], 1e-7);
  expect_error([] { unpack_class_gaussians(std::vector<float>{3, 1, 1, 0}); }, {"class Gaussians of 4 values"});
  expect_error([&] { fusion.add(3, &mu_a, &one); }, {"label 3"});
}

TEST(FedcrFusion, TheServerMultipliesThePresentExpertsWithAStandardNormalAndMixesByBeta2) {
  ClassGaussians a(3, 1), b(3, 1);
  a.present = {1, 1, 0}, a.mu = {1.0, 2.0, 9.0}, a.sigma = {1.0, 0.5, 9.0};
  b.present = {1, 0, 0}, b.mu = {3.0, 9.0, 9.0}, b.sigma = {1.0, 9.0, 9.0};
  ClassGaussians replaced(3, 1);
  mix_product_of_experts(replaced, {a, b}, 1.0);
  // class 0: precisions 1 (prior) + 1 + 1 = 3, mean (0 + 1 + 3) / 3
  EXPECT_NEAR(replaced.mu[0], 4.0 / 3.0, kDoubleTolerance);
  EXPECT_NEAR(replaced.sigma[0], std::sqrt(1.0 / 3.0), kDoubleTolerance);
  // class 1: only a, precision 1 + 4 = 5, mean (2 * 4) / 5
  EXPECT_NEAR(replaced.mu[1], 8.0 / 5.0, kDoubleTolerance);
  EXPECT_NEAR(replaced.sigma[1], std::sqrt(1.0 / 5.0), kDoubleTolerance);
  // class 2: nobody has it: the global Gaussian stays
  EXPECT_EQ(replaced.mu[2], 0.0);
  EXPECT_EQ(replaced.sigma[2], 1.0);
  EXPECT_EQ(replaced.present, (std::vector<uint8_t>{1, 1, 0}));
  ClassGaussians mixed(3, 1);
  mixed.mu[0] = 2.0, mixed.sigma[0] = 3.0;
  mix_product_of_experts(mixed, {a, b}, 0.25);
  EXPECT_NEAR(mixed.mu[0], 0.75 * 2.0 + 0.25 * 4.0 / 3.0, kDoubleTolerance);
  EXPECT_NEAR(mixed.sigma[0], 0.75 * 3.0 + 0.25 * std::sqrt(1.0 / 3.0), kDoubleTolerance);
  ClassGaussians kept(3, 1);
  mix_product_of_experts(kept, {a, b}, 0.0);  // options.py's default: the global prior never moves
  EXPECT_EQ(kept.mu, std::vector<double>(3, 0.0));
  EXPECT_EQ(kept.sigma, std::vector<double>(3, 1.0));
}

TEST(FedcrModel, TrainingStacksTheSamplesAndEvalAveragesThemDeterministically) {
  auto model = tiny_fedcr(7);
  EXPECT_EQ(model->head_prefix(), "fc4");
  for (const ParameterView& p : model->parameters()) EXPECT_EQ(p.is_head, p.name.rfind("fc4.", 0) == 0) << p.name;
  Generator gen(8);
  const Tensor x = Tensor::randn({5, 1, 16, 16}, gen);
  model->train(true);
  model->reseed_dropout(11);
  const std::vector<float> first = model->forward(x).to_vector();
  EXPECT_EQ(first.size(), 3u * 5u * 10u);  // S_train = 3 copies of (5, 10)
  const std::vector<float> second = model->forward(x).to_vector();
  EXPECT_NE(first, second);  // fresh noise each forward
  model->reseed_dropout(11);
  EXPECT_EQ(model->forward(x).to_vector(), first);  // the seed fixes the draws
  model->train(false);
  const Tensor eval = model->forward(x);
  EXPECT_EQ(eval.shape(), Shape({5, 10}));
  EXPECT_EQ(model->forward(x).to_vector(), eval.to_vector());
  // Another replica whose training generator is elsewhere gives the same evaluation.
  auto other = tiny_fedcr(7);
  other->reseed_dropout(99);
  other->train(true);
  other->forward(x);
  other->train(false);
  EXPECT_EQ(other->forward(x).to_vector(), eval.to_vector());
}

TEST(FedcrModel, EvalNoiseIsTheSameForEveryCallOfABatchSizeWhateverRanBetween) {
  // The model keeps eval noise per batch size (FedcrCnn::eval_noise); what it returns must be what a fresh
  // Generator(kEvalNoiseSeed) draws for that size, whichever sizes were evaluated before.
  auto model = tiny_fedcr(12);
  auto fresh = tiny_fedcr(12);
  Generator gen(13);
  const Tensor x5 = Tensor::randn({5, 1, 16, 16}, gen);
  const Tensor x2 = Tensor::from_vector({2, 1, 16, 16}, std::vector<float>(x5.data(), x5.data() + 2 * 16 * 16));
  model->train(false);
  fresh->train(false);
  const std::vector<float> five = model->forward(x5).to_vector();
  const std::vector<float> two = model->forward(x2).to_vector();
  EXPECT_EQ(model->forward(x5).to_vector(), five);
  EXPECT_EQ(fresh->forward(x2).to_vector(), two);  // its first evaluation: nothing kept yet
  EXPECT_EQ(fresh->forward(x5).to_vector(), five);
}

TEST(FedcrModel, EvalIsTheMeanOfFc4OverTheNoisyCodes) {
  // With sigma driven to ~0 (fc3's sigma half biased to -40: softplus = 4e-18) every sample is mu, so the
  // averaged eval logits equal fc4(mu) exactly as a single deterministic pass would give.
  auto model = tiny_fedcr(9);
  FedcrCnn* net = fedcr_network(*model);
  float* bias = net->fc3->bias.data();
  for (int j = 4; j < 8; ++j) bias[j] = -40.0f;
  float* weight = net->fc3->weight.data();
  for (int j = 4 * 8; j < 8 * 8; ++j) weight[j] = 0.0f;
  Generator gen(10);
  const Tensor x = Tensor::randn({2, 1, 16, 16}, gen);
  model->train(false);
  const std::vector<float> eval = model->forward(x).to_vector();
  const Tensor mu =
      Tensor::from_vector({2, 4}, std::vector<float>{net->last_encoding().data()[0], net->last_encoding().data()[1],
                                                     net->last_encoding().data()[2], net->last_encoding().data()[3],
                                                     net->last_encoding().data()[8], net->last_encoding().data()[9],
                                                     net->last_encoding().data()[10], net->last_encoding().data()[11]});
  const std::vector<float> direct = net->fc4->forward(mu).to_vector();
  for (size_t i = 0; i < eval.size(); ++i) EXPECT_NEAR(eval[i], direct[i], kFloatTolerance) << i;
}

TEST(FedcrModel, NamesCarryTheBottleneckAndMalformedOnesAreErrors) {
  const auto standard = make_model("cnn-fedcr", {1, 28, 28}, 10, 1);
  // conv1 4*1*25+4, conv2 12*4*25+12, fc1 192*1024+1024, fc2 1024*1024+1024, fc3 1024*1024+1024, fc4 512*10+10
  EXPECT_EQ(standard->num_parameters(), 104 + 1212 + 197632 + 1049600 + 1049600 + 5130);
  EXPECT_EQ(fedcr_network(*standard)->bottleneck().latent, 512);
  EXPECT_EQ(fedcr_network(*standard)->bottleneck().train_samples, 18);
  const auto authors = make_model("cnn-fedcr-256-15-30", {1, 28, 28}, 10, 1);
  EXPECT_EQ(fedcr_network(*authors)->bottleneck().test_samples, 30);
  EXPECT_EQ(fedcr_network(*authors)->fc3->weight.shape(), Shape({512, 1024}));
  EXPECT_EQ(fedcr_network(*make_model("cnn-fedfsa", {1, 28, 28}, 10, 1)), nullptr);
  expect_error([] { make_model("cnn-fedcr-256-15", {1, 28, 28}, 10, 1); }, {"cnn-fedcr-<d_Z>-<S_train>-<S_test>"});
  expect_error([] { make_model("cnn-fedcr-0-1-1", {1, 28, 28}, 10, 1); }, {"positive integers"});
  expect_error([] { make_model("cnn-fedcrx", {1, 28, 28}, 10, 1); }, {"cnn-fedcr-<d_Z>"});
  // Issue 42: a d_Z of 2^61 crashed (exit 139) sizing the model; the name's numbers are bounded now.
  expect_error([] { make_model("cnn-fedcr-2305843009213693952-1-1", {1, 28, 28}, 10, 1); }, {"d_Z <= 65536"});
  expect_error([] { make_model("cnn-fedcr-512-1025-1", {1, 28, 28}, 10, 1); }, {"sample counts <= 1024"});
}

// Tensor sizes are checked products: a shape past 2^40 elements, or one whose product overflows, is an error
// naming it, never a wrapped-around (small or negative) size.
TEST(ShapeNumel, OverflowingProductsAreErrorsNotWrappedSizes) {
  EXPECT_EQ(Shape({1 << 20, 1 << 20}).numel(), int64_t{1} << 40);
  expect_error([] { (void)Shape({(int64_t{1} << 20) + 1, 1 << 20}).numel(); }, {"more than 2^40 elements"});
  expect_error([] { (void)Shape({int64_t{1} << 62, 4}).numel(); }, {"more than 2^40"});
  expect_error([] { (void)Tensor::empty({int64_t{1} << 31, int64_t{1} << 31}); }, {"more than 2^40"});
}

TEST(FedcrRule, KeepsItsHeadUploadsTheGaussiansOfItsClassesAndNeedsTheStochasticModel) {
  const Dataset data = synthetic_images(60);
  std::vector<int64_t> indices;  // classes 0..4 only
  for (int64_t i = 0; i < data.size(); ++i)
    if (data.labels[i] < 5) indices.push_back(i);
  const TransformSpec identity;
  auto model = tiny_fedcr(5);
  const std::vector<float> received = state_of(*model);
  ClientState state;
  ClientTask task{*model, data, indices, identity, state, 0, 1, 11, 12};
  const auto rule = client_rule("fedcr", {{"batch", int64_t{8}}, {"lr", 0.05}});
  EXPECT_EQ(rule->traits().shared, SharedPart::Body);
  const ClientResult result = rule->train(task);
  EXPECT_EQ(result.steps, 2 * static_cast<int64_t>((indices.size() + 7) / 8));
  ASSERT_EQ(state.vectors.count("head"), 1u);
  EXPECT_EQ(state.vectors["head"], gather_head(*model, model->flat_state()));
  EXPECT_NE(state.vectors["head"], gather_head(*model, received));  // the head trained
  const ClassGaussians sent = unpack_class_gaussians(result.extra_upload);
  EXPECT_EQ(sent.classes, 10);
  EXPECT_EQ(sent.dim, 4);
  for (int c = 0; c < 10; ++c) EXPECT_EQ(sent.present[c], c < 5 ? 1 : 0) << c;
  // The personal model: the global state with this client's head.
  std::vector<float> personal(received.size());
  ASSERT_TRUE(rule->personal_model(state, received, *model, personal));
  EXPECT_EQ(gather_head(*model, personal), state.vectors["head"]);
  auto plain = make_model("cnn-fedfsa", kImage, 10, 5);
  ClientTask wrong{*plain, data, indices, identity, state, 0, 1, 11, 12};
  expect_error([&] { rule->train(wrong); }, {"cnn-fedcr"});
  expect_error([] { client_rule("fedcr", {{"rho", 0.05}}); }, {"rho"});
}

TEST(FedcrRule, TheSameTaskTrainsToTheSameStateAndGaussians) {
  const Dataset data = synthetic_images(40);
  const std::vector<int64_t> indices = first_indices(40);
  const TransformSpec identity;
  const auto rule = client_rule("fedcr", {{"batch", int64_t{8}}, {"epochs", int64_t{1}}});
  auto once = [&] {
    auto model = tiny_fedcr(5);
    ClientState state;
    ClientTask task{*model, data, indices, identity, state, 3, 2, 21, 22};
    const ClientResult result = rule->train(task);
    return std::make_pair(state_of(*model), result.extra_upload);
  };
  EXPECT_EQ(once(), once());
}

// The largest difference between two vectors of the same size.
double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return worst;
}

// On a CUDA model (the emulator in CI) the rule trains as on the CPU: the stored head written into the
// device state, the server's prior moved to the device for the KL term, the encodings brought to the host
// for the fusion. The device sums in other orders, so after the 10 SGD steps the states and Gaussians
// differ by float roundings: 3e-8 at most on the emulator (2026-12-01). kDeviceTolerance, absolute on
// values of O(1), is the bound CudaTraining allows a GPU after its steps (fused multiply-adds and other
// reduction trees), 1e-4; a head trained from another start differs by over 100x that.
constexpr double kDeviceTolerance = 1e-4;

TEST(FedcrRule, TrainsOnACudaModelAsOnTheCpu) {
  BASTION_REQUIRE_CUDA();
  const Dataset data = synthetic_images(40);
  const std::vector<int64_t> indices = first_indices(40);
  const TransformSpec identity;
  const auto rule = client_rule("fedcr", {{"batch", int64_t{8}}, {"epochs", int64_t{2}}, {"lr", 0.05}});
  ASSERT_TRUE(rule->traits().on_device);
  // A stored head and a server prior other than the defaults, so that both reach the training.
  const auto donor = tiny_fedcr(9);
  const std::vector<float> head = gather_head(*donor, donor->flat_state());
  ClassGaussians prior(10, 4);
  for (size_t i = 0; i < prior.mu.size(); ++i) {
    prior.mu[i] = 0.1 * static_cast<double>(i % 7) - 0.3;
    prior.sigma[i] = 0.5 + 0.05 * static_cast<double>(i % 5);
  }
  const ClientMessage message{{"fedcr_prior", pack_class_gaussians(prior)}};
  struct Trained {
    std::vector<float> state, head, gaussians;
  };
  auto train_on = [&](Device device) {
    auto model = tiny_fedcr(5);
    model->to(device);
    ClientState state;
    state.vectors["head"] = head;
    ClientTask task{*model, data, indices, identity, state, 3, 2, 21, 22};
    task.message = &message;
    const ClientResult result = rule->train(task);
    return Trained{model->state_values(), state.vectors["head"], result.extra_upload};
  };
  const Trained cpu = train_on(Device::CPU), cuda = train_on(Device::CUDA);
  EXPECT_LE(max_abs_difference(cpu.state, cuda.state), kDeviceTolerance);
  EXPECT_LE(max_abs_difference(cpu.head, cuda.head), kDeviceTolerance);
  EXPECT_LE(max_abs_difference(cpu.gaussians, cuda.gaussians), kDeviceTolerance);
  // The stored head was loaded: training from the model's own initial head ends elsewhere.
  const auto own_head = tiny_fedcr(5);
  ClientState fresh;
  ClientTask task{*own_head, data, indices, identity, fresh, 3, 2, 21, 22};
  task.message = &message;
  rule->train(task);
  EXPECT_GT(max_abs_difference(fresh.vectors["head"], cpu.head), 100 * kDeviceTolerance);
}

// Whole runs on a small FMNIST federation (skipped without the data).
bool have_fmnist() { return testing::dataset_installed("fmnist"); }

const char* kFmnistRun = R"(
name = "fedcr"
seed = 3
rounds = 3
[data]
dataset = "fmnist"
partition = "pathological:2"
clients = 6
max_per_client = 40
pool_train_test = true
local_test = "split"
client_test_fraction = 0.25
normalization = "half"
augment = "none"
[model]
name = "cnn-fedcr-8-2-3"
[clients]
rule = "fedcr"
per_round = 3
[clients.fedcr]
epochs = 1
batch = 10
lr = 0.05
[eval]
every = 3
personalized = true
personal_global = false
[run]
checkpoint_every = 1
)";

using FlFedcrRun = testing::FlRunTest;

// One evaluation (round 3: evaluating FMNIST's test set costs about a second per round here).
TEST_F(FlFedcrRun, RunsThroughTheRegistryKeepsFc4OnTheClientsAndResumesOnOtherThreadCounts) {
  if (!have_fmnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  run(kFmnistRun, "whole", 1);
  run(kFmnistRun, "resumed", 1, {}, false, /*stop_after=*/2);
  const CheckpointState two = load_checkpoint((dir_ / "resumed" / "checkpoint.safetensors").string());
  run(kFmnistRun, "resumed", 2, {}, /*resume=*/true);
  EXPECT_EQ(file("whole", "rounds.csv"), file("resumed", "rounds.csv"));
  const CheckpointState three = load_checkpoint((dir_ / "whole" / "checkpoint.safetensors").string());
  ASSERT_EQ(two.round, 2);
  ASSERT_EQ(three.round, 3);
  const auto model = make_model("cnn-fedcr-8-2-3", {1, 28, 28}, 10, 1);
  const HeadAndBody p = parts(*model);
  EXPECT_TRUE(part_unchanged(p.head, two.global, three.global));   // nobody uploads fc4
  EXPECT_FALSE(part_unchanged(p.body, two.global, three.global));  // the encoders are aggregated
  // The server's Gaussians are checkpointed and moved; every trained client keeps a head of its own.
  EXPECT_EQ(three.method_state.ints("shape"), (std::vector<int64_t>{10, 8}));
  EXPECT_EQ(three.method_state.reals("mu").size(), 80u);
  EXPECT_NE(three.method_state.reals("mu"), two.method_state.reals("mu"));
  int heads = 0;
  for (const ClientState& client : three.clients) {
    if (!client.vectors.count("head")) continue;
    ++heads;
    EXPECT_NE(client.vectors.at("head"), gather_head(*model, three.global));
  }
  EXPECT_GT(heads, 2);
  const std::vector<RoundRecord> rounds = parse_rounds_csv(file("whole", "rounds.csv"));
  ASSERT_EQ(rounds.size(), 1u);
  const int64_t head_floats = static_cast<int64_t>(gather_head(*model, model->flat_state()).size());
  const int64_t body_bytes = (static_cast<int64_t>(model->flat_state().size()) - head_floats) * 4;
  const int64_t gaussian_bytes = (2 + 10 + 2 * 10 * 8) * 4;
  EXPECT_EQ(rounds[0].bytes_up, 3 * 3 * (body_bytes + gaussian_bytes));  // 3 rounds x 3 clients, no fc4 columns
  EXPECT_GT(rounds[0].personal.acc.mean, 0.0);
}

}  // namespace
}  // namespace bastion
