// The SAM step's options (nn/optim.h) on a constant gradient whose answer is known, FedFSA's Top-C choice
// on constructed weights, and the SAM family's server parts (fl/clients/sam_family.cpp) on constructed
// uploads, checked against hand computations.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <limits>

#include "fl/clients/local_training.h"
#include "fl/clients/method_server.h"
#include "fl/clients/sam_family.h"
#include "nn/models.h"
#include "kernels/cpu/sam.h"
#include "nn/optim.h"
#include "cuda_test_support.h"
#include "personalized_test_support.h"
#include "tensor/random.h"

namespace bastion {
namespace {

using namespace pfl_testing;

std::vector<float> random_values(size_t n, uint64_t seed) {
  Generator gen(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(gen.normal());
  return v;
}

double norm(std::span<const float> v, int64_t begin = 0, int64_t end = -1) {
  if (end < 0) end = static_cast<int64_t>(v.size());
  double s = 0.0;
  for (int64_t i = begin; i < end; ++i) s += static_cast<double>(v[i]) * v[i];
  return std::sqrt(s);
}

// A loss whose gradient is `g` wherever w is: every pass of the SAM step sees the same gradient.
std::function<float()> constant_gradient(Model& model, const std::vector<float>& g) {
  return [&model, &g] {
    model.zero_grad();
    std::copy(g.begin(), g.end(), model.flat_gradients().begin());
    return 0.0f;
  };
}

std::unique_ptr<Model> small_model() { return make_model("mlp", {1, 1, 1}, 2, 3); }

TEST(SamStep, GlobalPerturbationHasNormRhoAndTheWeightsComeBackBitForBit) {
  auto model = small_model();
  const std::vector<float> g = random_values(model->num_parameters(), 1);
  const std::vector<float> before(model->flat_parameters().begin(), model->flat_parameters().end());
  Sgd sgd(*model, {0.0f, 0.0f, 0.0f, false});  // lr 0: the step leaves w exactly as SAM restored it
  SamOptions options;
  options.rho = 0.3f;
  options.record_perturbation = true;
  Sam sam(*model, sgd, options);
  sam.step(constant_gradient(*model, g));
  EXPECT_NEAR(norm(sam.last_perturbation()), 0.3, 1e-6);
  const std::span<const float> e = sam.last_perturbation();
  for (size_t i = 0; i < g.size(); i += 997) EXPECT_NEAR(e[i], 0.3 * g[i] / norm(g), 1e-6);
  EXPECT_TRUE(same_columns(before, {model->flat_parameters().begin(), model->flat_parameters().end()}, 0,
                           model->num_parameters()));
}

TEST(SamStep, PerTensorRadiiScaleEachTensorOfTheGlobalDirection) {
  auto model = small_model();
  const std::vector<float> g = random_values(model->num_parameters(), 2);
  Sgd sgd(*model, {0.0f, 0.0f, 0.0f, false});
  SamOptions options;
  options.tensor_rho = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  options.record_perturbation = true;
  ASSERT_EQ(model->parameters().size(), options.tensor_rho.size());
  Sam sam(*model, sgd, options);
  sam.step(constant_gradient(*model, g));
  const double g_norm = norm(g);
  for (size_t k = 0; k < model->parameters().size(); ++k) {
    const ParameterView& p = model->parameters()[k];
    EXPECT_NEAR(norm(sam.last_perturbation(), p.begin, p.end), options.tensor_rho[k] * norm(g, p.begin, p.end) / g_norm,
                1e-6)
        << p.name;
  }
}

// The readings of a stated radius (SamOptions::Perturbation) on a constant gradient g at weights w:
// per-tensor gives every tensor a perturbation of norm rho; none gives rho g; adaptive (ASAM) gives
// rho w^2 g / || |w| g ||, whose |w|-weighted norm is rho.
TEST(SamStep, PerTensorUnnormalisedAndAdaptivePerturbations) {
  auto model = small_model();
  const std::vector<float> g = random_values(model->num_parameters(), 4);
  const std::vector<float> w(model->flat_parameters().begin(), model->flat_parameters().end());
  const std::vector<ParameterView>& parameters = model->parameters();
  auto perturbation = [&](SamOptions::Perturbation mode) {
    Sgd sgd(*model, {0.0f, 0.0f, 0.0f, false});
    SamOptions options;
    options.rho = 0.2f;
    options.perturbation = mode;
    options.record_perturbation = true;
    Sam sam(*model, sgd, options);
    sam.step(constant_gradient(*model, g));
    return std::vector<float>(sam.last_perturbation().begin(), sam.last_perturbation().end());
  };
  const std::vector<float> per_tensor = perturbation(SamOptions::Perturbation::PerTensor);
  for (const ParameterView& p : parameters) EXPECT_NEAR(norm(per_tensor, p.begin, p.end), 0.2, 1e-6) << p.name;
  const std::vector<float> none = perturbation(SamOptions::Perturbation::None);
  for (size_t i = 0; i < g.size(); i += 997) EXPECT_FLOAT_EQ(none[i], 0.2f * g[i]);
  const std::vector<float> adaptive = perturbation(SamOptions::Perturbation::Adaptive);
  double weighted = 0.0;  // || |w| g ||
  for (size_t i = 0; i < g.size(); ++i) weighted += static_cast<double>(w[i]) * w[i] * g[i] * g[i];
  weighted = std::sqrt(weighted);
  for (size_t i = 0; i < g.size(); i += 997) EXPECT_NEAR(adaptive[i], 0.2 * w[i] * w[i] * g[i] / weighted, 1e-6);
  double adaptive_norm = 0.0;  // || e / |w| || = rho
  for (size_t i = 0; i < g.size(); ++i)
    if (w[i] != 0.0f) adaptive_norm += static_cast<double>(adaptive[i] / w[i]) * (adaptive[i] / w[i]);
  EXPECT_NEAR(std::sqrt(adaptive_norm), 0.2, 1e-4);
}

// With the same gradient at w and at w + e, a SAM step is the SGD step from w: the CPU step restores w
// inside the SGD update (Sgd::step_from), which must equal a copy followed by Sgd::step bit for bit, with
// momentum, Nesterov and weight decay, on the first step and later ones, and leave a frozen tensor alone.
TEST(SamStep, RestoreInsideTheSgdStepIsBitForBitTheSgdStepFromTheSavedWeights) {
  auto with_sam = small_model(), plain = small_model();
  with_sam->set_trainable(/*head=*/true, false);
  plain->set_trainable(/*head=*/true, false);
  const ParameterView& frozen = with_sam->parameters().back();
  ASSERT_FALSE(frozen.value.requires_grad());
  const SgdOptions sgd_options{0.05f, 0.9f, 1e-3f, true};
  Sgd sgd_sam(*with_sam, sgd_options), sgd_plain(*plain, sgd_options);
  Sam sam(*with_sam, sgd_sam, 0.2f);
  const std::vector<float> frozen_before(with_sam->flat_parameters().begin() + frozen.begin,
                                         with_sam->flat_parameters().begin() + frozen.end);
  for (uint64_t step = 0; step < 3; ++step) {
    const std::vector<float> g = random_values(with_sam->num_parameters(), 10 + step);
    sam.step(constant_gradient(*with_sam, g));
    constant_gradient(*plain, g)();
    sgd_plain.step();
    const std::span<const float> a = with_sam->flat_parameters(), b = plain->flat_parameters();
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << "step " << step;
  }
  EXPECT_TRUE(
      std::equal(frozen_before.begin(), frozen_before.end(), with_sam->flat_parameters().begin() + frozen.begin));
  EXPECT_THROW(sam.last_perturbation(), Error);  // e was not kept (no record_perturbation, no dual)
}

// With every tensor trainable the ascent pass runs on a spare state buffer (Model::swap_state): in that
// pass flat_parameters() and every parameter view must read w + e, and what the pass writes into the
// buffers (BatchNorm's running statistics) must stay in the model after the step, as when w was perturbed
// in place.
TEST(SamStep, TheAscentPassSeesWPlusEThroughEveryViewAndKeepsItsBufferUpdates) {
  auto model = make_model("resnet10", {3, 8, 8}, 10, 5);
  ASSERT_FALSE(model->buffers().empty());
  const std::vector<float> g = random_values(model->num_parameters(), 6);
  const std::vector<float> w(model->flat_parameters().begin(), model->flat_parameters().end());
  Sgd sgd(*model, {0.0f, 0.0f, 0.0f, false});  // lr 0: the step leaves w as it was
  SamOptions options;
  options.rho = 0.1f;
  options.record_perturbation = true;
  Sam sam(*model, sgd, options);
  int calls = 0;
  std::vector<float> seen_flat, seen_views;
  sam.step([&] {
    constant_gradient(*model, g)();
    if (++calls < 2) return 0.0f;
    seen_flat.assign(model->flat_parameters().begin(), model->flat_parameters().end());
    for (const ParameterView& p : model->parameters())
      seen_views.insert(seen_views.end(), p.value.data(), p.value.data() + p.value.numel());
    for (const ParameterView& b : model->buffers()) std::fill_n(b.value.data(), b.value.numel(), 7.0f);
    return 0.0f;
  });
  const std::span<const float> e = sam.last_perturbation();
  std::vector<float> want(w.size());
  for (size_t i = 0; i < w.size(); ++i) want[i] = w[i] + e[i];
  EXPECT_TRUE(seen_flat == want);
  EXPECT_TRUE(seen_views == want);
  EXPECT_TRUE(std::equal(w.begin(), w.end(), model->flat_parameters().begin()));
  for (const ParameterView& b : model->buffers())
    EXPECT_TRUE(std::all_of(b.value.data(), b.value.data() + b.value.numel(), [](float v) { return v == 7.0f; }))
        << b.name;
}

// With every tensor trainable the perturbation zeroes g as it reads it for the last time, and the ascent
// pass's zero_grad writes nothing (Model::note_gradients_zeroed). A loss that adds its gradient into g
// (+=) shows a g left unzeroed: on a gradient that is the same at w and w + e each step must give bit for
// bit the SGD step on the direction (a model stepped by hand), and the note must not outlive the pass.
TEST(SamStep, ThePerturbationZeroesTheGradientForTheAscentPass) {
  auto with_sam = small_model(), by_hand = small_model();
  const size_t P = static_cast<size_t>(with_sam->num_parameters());
  const std::vector<float> linear = random_values(P, 20);
  const SgdOptions sgd_options{0.05f, 0.0f, 1e-3f, false};
  Sgd sgd_sam(*with_sam, sgd_options), sgd_hand(*by_hand, sgd_options);
  SamOptions options;
  options.rho = 0.2f;
  options.ascent_scale = 0.1f;
  options.linear_term = linear;
  Sam sam(*with_sam, sgd_sam, options);
  std::vector<float> g;
  auto adding_gradient = [&] {
    with_sam->zero_grad();
    const std::span<float> grad = with_sam->flat_gradients();
    for (size_t i = 0; i < P; ++i) grad[i] += g[i];
    return 0.0f;
  };
  for (uint64_t step = 0; step < 3; ++step) {
    g = random_values(P, 30 + step);
    sam.step(adding_gradient);
    by_hand->zero_grad();
    std::copy(g.begin(), g.end(), by_hand->flat_gradients().begin());
    sam_direction_cpu(by_hand->flat_gradients().data(), linear.data(), options.ascent_scale, static_cast<int64_t>(P));
    sgd_hand.step();
    const std::span<const float> a = with_sam->flat_parameters(), b = by_hand->flat_parameters();
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << "step " << step;
  }
  const std::span<float> grad = with_sam->flat_gradients();
  std::fill(grad.begin(), grad.end(), 7.0f);
  with_sam->zero_grad();  // no note left over from the last step: this one writes
  EXPECT_TRUE(std::all_of(grad.begin(), grad.end(), [](float v) { return v == 0.0f; }));
}

TEST(SamStep, AscentScaleAndLinearTermFormTheDirectionWhichIsClippedAfter) {
  auto model = small_model();
  const std::vector<float> g = random_values(model->num_parameters(), 3), linear = random_values(g.size(), 4);
  for (const double clip : {0.0, 2.0}) {
    const std::vector<float> before(model->flat_parameters().begin(), model->flat_parameters().end());
    Sgd sgd(*model, {1.0f, 0.0f, 0.0f, false});
    SamOptions options;
    options.rho = 0.05f;
    options.ascent_scale = 0.25f;
    options.linear_term = linear;
    options.clip_after = clip;
    Sam sam(*model, sgd, options);
    sam.step(constant_gradient(*model, g));
    // lr 1: w moves by -(0.25 g + linear), rescaled to norm 2 when clipped.
    std::vector<float> direction(g.size());
    for (size_t i = 0; i < g.size(); ++i) direction[i] = 0.25f * g[i] + linear[i];
    const double scale = clip > 0 ? std::min(1.0, clip / norm(direction)) : 1.0;
    ASSERT_LT(scale, clip > 0 ? 1.0 : 2.0);  // the clip bites in the second case
    const std::span<const float> w = model->flat_parameters();
    for (size_t i = 0; i < g.size(); i += 101) EXPECT_NEAR(w[i] - before[i], -scale * direction[i], 1e-5) << i;
  }
}

TEST(SamStep, DualCorrectsTheAscentDirectionAndAccumulatesThePerturbation) {
  auto model = small_model();
  const size_t P = static_cast<size_t>(model->num_parameters());
  const std::vector<float> g = random_values(P, 5), s = random_values(P, 6);
  std::vector<float> mu = random_values(P, 7);
  const std::vector<float> mu_before = mu;
  Sgd sgd(*model, {0.0f, 0.0f, 0.0f, false});
  SamOptions options;
  options.rho = 0.1f;
  options.dual = mu;
  options.dual_correction = s;
  Sam sam(*model, sgd, options);
  sam.step(constant_gradient(*model, g));
  std::vector<float> d(P);
  for (size_t i = 0; i < P; ++i) d[i] = g[i] - mu_before[i] - s[i];
  const double d_norm = norm(d);
  const std::span<const float> e = sam.last_perturbation();
  for (size_t i = 0; i < P; i += 503) {
    EXPECT_NEAR(e[i], 0.1 * d[i] / d_norm, 1e-6) << i;
    EXPECT_NEAR(mu[i], mu_before[i] + e[i] - s[i], 1e-5) << i;  // mu += e - s
  }
  SamOptions one_radius;
  one_radius.tensor_rho = {1.0f};
  EXPECT_THROW(Sam(*model, sgd, one_radius), Error);  // one radius for six tensors
}

// FedSMOO's dual on a CUDA model (the emulator in CI): after one step with an SGD update, mu and the weights
// agree with the CPU step. The device computes d, e, e - s in the CPU's order, so they differ only where
// the per-tensor norm's reduction order rounds the scale differently: a few float roundings.
TEST(SamStep, DualStepOnTheDeviceAgreesWithTheCpu) {
  BASTION_REQUIRE_CUDA();
  // Relative: e = rho d / ||d|| with ||d|| reduced in double on both sides but in another order, then
  // rounded to float; mu + (e - s) adds one or two float roundings (6e-8 each) on top.
  constexpr double kDualTolerance = 1e-6;
  auto cpu = small_model(), gpu = small_model();
  gpu->to(Device::CUDA);
  const size_t P = static_cast<size_t>(cpu->num_parameters());
  const std::vector<float> g = random_values(P, 11), s = random_values(P, 12), mu0 = random_values(P, 13);
  std::vector<float> mu_cpu = mu0, mu_gpu = mu0;
  Sgd sgd_cpu(*cpu, {0.1f, 0.0f, 0.0f, false}), sgd_gpu(*gpu, {0.1f, 0.0f, 0.0f, false});
  SamOptions options;
  options.rho = 0.1f;
  options.dual_correction = s;
  SamOptions on_cpu = options, on_gpu = options;
  on_cpu.dual = mu_cpu;
  on_gpu.dual = mu_gpu;
  Sam sam_cpu(*cpu, sgd_cpu, on_cpu), sam_gpu(*gpu, sgd_gpu, on_gpu);
  sam_cpu.step(constant_gradient(*cpu, g));
  sam_gpu.step([&] {
    gpu->zero_grad();
    cuda_copy_to_device(gpu->gradient_tensor().data(), g.data(), P * sizeof(float), cuda_stream());
    return 0.0f;
  });
  sam_gpu.finish_pass();  // the dual comes back to the host once a pass
  gpu->to(Device::CPU);
  const std::span<const float> w_cpu = cpu->flat_parameters(), w_gpu = gpu->flat_parameters();
  for (size_t i = 0; i < P; ++i) {
    EXPECT_NEAR(mu_gpu[i], mu_cpu[i], kDualTolerance * (1.0 + std::abs(mu_cpu[i]))) << i;
    EXPECT_NEAR(w_gpu[i], w_cpu[i], kDualTolerance * (1.0 + std::abs(w_cpu[i]))) << i;
  }
  EXPECT_NE(mu_gpu, mu0);  // the dual moved, and came back to the host
}

TEST(FedFsaTopC, PicksTheMostChangedWeightTensorsAndNeverABias) {
  EXPECT_TRUE(fsa_candidate("fc2.weight"));
  for (const char* name :
       {"fc2.bias", "layer1.0.bn1.weight", "layer2.0.downsample.0.weight", "shortcut.weight", "norm.weight"})
    EXPECT_FALSE(fsa_candidate(name)) << name;
  auto model = small_model();  // fc1.weight, fc1.bias, fc2.weight, fc2.bias, fc3.weight, fc3.bias
  const std::vector<float> before(model->flat_parameters().begin(), model->flat_parameters().end());
  const std::span<float> w = model->flat_parameters();
  const std::vector<ParameterView>& p = model->parameters();
  const double shift[] = {0.5, 9.0, 1.0, 9.0, 0.1, 9.0};  // per-element change; the biases change most
  for (size_t k = 0; k < p.size(); ++k)
    for (int64_t i = p[k].begin; i < p[k].end; ++i) w[i] += static_cast<float>(shift[k]);
  // paper: ||change||^2 = shift^2 x size: fc2.weight 40000, fc1.weight 50, fc3.weight 4 (sizes 40000, 200, 400)
  const std::vector<double> paper = fsa_sensitivity(*model, before, false);
  EXPECT_EQ(fsa_top_c(paper, 2), (std::vector<size_t>{2, 0}));
  EXPECT_EQ(fsa_top_c(paper, 5), (std::vector<size_t>{2, 0, 4}));  // only three candidates
  EXPECT_NEAR(paper[0], 0.25 * 200, 1e-3);
  // code: min-max normalisation makes a uniform shift invisible; a reordering of fc3.weight is seen.
  std::swap(w[p[4].begin], w[p[4].end - 1]);
  const std::vector<double> code = fsa_sensitivity(*model, before, true);
  EXPECT_NEAR(code[0], 0.0, 1e-9);
  EXPECT_NEAR(code[2], 0.0, 1e-9);
  EXPECT_GT(code[4], 1e-4);
  EXPECT_EQ(fsa_top_c(code, 1), (std::vector<size_t>{4}));
}

// The two sensitivities on two constructed clients trained from one model: both shift every weight of the
// large fc2 by 0.2 (the paper's squared change is 40000 x 0.04 = 1600 there; reversing fc1.weight's 200
// values of U(-1, 1) changes it by about 200 x 2/3), client A reverses fc1.weight's order and client B
// fc3.weight's. The paper's form picks fc2
// for both; the code's min-max normalised form cannot see a uniform shift and picks each client's own
// reordered tensor: the per-client choice that is the method.
TEST(FedFsaTopC, CodeSensitivityPicksDifferentTensorsForDifferentClients) {
  auto model = small_model();  // fc1.weight (200), fc1.bias, fc2.weight (40000), fc2.bias, fc3.weight (400), fc3.bias
  const std::vector<float> before(model->flat_parameters().begin(), model->flat_parameters().end());
  const std::vector<ParameterView>& p = model->parameters();
  auto trained = [&](size_t reversed) {
    std::vector<float> after = before;
    for (int64_t i = p[2].begin; i < p[2].end; ++i) after[i] += 0.2f;
    std::reverse(after.begin() + p[reversed].begin, after.begin() + p[reversed].end);
    std::copy(after.begin(), after.end(), model->flat_parameters().begin());
  };
  trained(0);
  EXPECT_EQ(fsa_top_c(fsa_sensitivity(*model, before, false), 1), (std::vector<size_t>{2}));
  EXPECT_EQ(fsa_top_c(fsa_sensitivity(*model, before, true), 1), (std::vector<size_t>{0}));
  trained(4);
  EXPECT_EQ(fsa_top_c(fsa_sensitivity(*model, before, false), 1), (std::vector<size_t>{2}));
  EXPECT_EQ(fsa_top_c(fsa_sensitivity(*model, before, true), 1), (std::vector<size_t>{4}));
}

// Feeds a method server one round: the accepted clients' uploads (rows of P values) and extra uploads.
void server_round(MethodServer& server, const std::vector<int64_t>& clients, const std::vector<float>& uploads,
                  const std::vector<std::vector<float>>& extra, std::vector<float>& update) {
  std::vector<std::span<const float>> extra_spans(extra.begin(), extra.end());
  extra_spans.resize(clients.size());
  const int64_t P = static_cast<int64_t>(update.size());
  const MethodRound round{uploads.data(), static_cast<int64_t>(clients.size()), P, P, &clients, &extra_spans};
  server.after_aggregation(round, update);
}

ClientMessage message_for(const MethodServer& server, int64_t client) {
  ClientMessage out;
  server.message(client, {}, out);
  return out;
}

TEST(SamFamilyServer, MoFedSamSendsTheMeanOfTheAcceptedUpdatesAndLeavesTheUpdateAlone) {
  const auto server = client_rule("mofedsam", {})->make_method_server(5, 3);
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(message_for(*server, 0).empty());  // round 1: m = 0
  std::vector<float> update = {1, 2, 3};
  server_round(*server, {0, 3}, {1, 2, 3, 3, -2, 5}, {}, update);
  EXPECT_EQ(update, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(message_for(*server, 4).at("mean_update"), (std::vector<float>{2, 0, 4}));
  EXPECT_EQ(client_rule("fedsam", {})->make_method_server(5, 3), nullptr);
}

TEST(SamFamilyServer, FedSpeedAndFedSmooStateAfterTwoRoundsMatchesAHandComputation) {
  for (const std::string rule : {"fedspeed", "fedsmoo"}) {
    SCOPED_TRACE(rule);
    const auto server = client_rule(rule, {{"rho", 0.1}})->make_method_server(3, 2);
    // Round 1: clients 0, 1 upload (1, 2), (3, 4); mu (3, 0), (1, 0). h0 = (1, 2), h1 = (3, 4).
    std::vector<float> update = {10, 20};
    server_round(*server, {0, 1}, {1, 2, 3, 4}, {{3, 0}, {1, 0}}, update);
    EXPECT_NEAR(update[0], 10 + 4.0 / 3, 1e-5);  // + mean over all 3 clients of h
    EXPECT_NEAR(update[1], 20 + 6.0 / 3, 1e-5);
    // Round 2: clients 1, 2 upload (1, 1), (2, 0); client 2's mu is not finite and is left out of s.
    update = {0, 0};
    const float nan = std::numeric_limits<float>::quiet_NaN();
    server_round(*server, {1, 2}, {1, 1, 2, 0}, {{0, 3}, {nan, 1}}, update);
    EXPECT_NEAR(update[0], 7.0 / 3, 1e-5);  // h = (1, 2), (4, 5), (2, 0)
    EXPECT_NEAR(update[1], 7.0 / 3, 1e-5);
    EXPECT_EQ(message_for(*server, 1).at("h"), (std::vector<float>{4, 5}));
    EXPECT_EQ(message_for(*server, 2).at("h"), (std::vector<float>{2, 0}));
    const ClientMessage to_0 = message_for(*server, 0);
    if (rule == "fedsmoo") {
      EXPECT_EQ(to_0.at("mu"), (std::vector<float>{3, 0}));
      EXPECT_EQ(message_for(*server, 1).at("mu"), (std::vector<float>{0, 3}));
      EXPECT_EQ(message_for(*server, 2).count("mu"), 0u);
      EXPECT_NEAR(to_0.at("s")[0], 0.0, 1e-7);  // s = 0.1 (0, 3) / 3
      EXPECT_NEAR(to_0.at("s")[1], 0.1, 1e-6);
    } else {
      EXPECT_EQ(to_0.count("mu") + to_0.count("s"), 0u);
    }
    // The state survives a checkpoint; a truncated one is refused.
    const RuleState saved = server->save_state();
    const auto restored = client_rule(rule, {{"rho", 0.1}})->make_method_server(3, 2);
    restored->load_state(saved);
    for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(message_for(*restored, c), message_for(*server, c));
    // A checkpoint written before the codec: [P, size + mean update, size + s, count + (id, h), count + (id, mu)].
    std::vector<float> legacy = {2.0f};
    for (const char* block : {"mean_update", "s"}) {
      legacy.push_back(static_cast<float>(saved.floats(block).size()));
      legacy.insert(legacy.end(), saved.floats(block).begin(), saved.floats(block).end());
    }
    for (const std::string per_client : {"h", "mu"}) {
      const std::vector<int64_t>& ids = saved.ints(per_client + "_ids");
      legacy.push_back(static_cast<float>(ids.size()));
      for (size_t k = 0; k < ids.size(); ++k) {
        legacy.push_back(static_cast<float>(ids[k]));
        legacy.insert(legacy.end(), saved.floats(per_client).begin() + 2 * k,
                      saved.floats(per_client).begin() + 2 * (k + 1));
      }
    }
    const auto from_old = client_rule(rule, {{"rho", 0.1}})->make_method_server(3, 2);
    from_old->load_state(RuleState::from_legacy(legacy));
    EXPECT_EQ(from_old->save_state(), saved);
    legacy.pop_back();
    EXPECT_THROW(restored->load_state(RuleState::from_legacy(legacy)), Error);  // truncated
  }
}

TEST(SamFamilyClient, MoFedSamWithAlphaZeroRepeatsTheServersMeanUpdate) {
  // alpha 0 drops the SAM gradient: one step of lr 0.1 along m = -u / (K lr0) with K = 1 moves w by u.
  const Dataset data = synthetic_train(40);
  const std::vector<int64_t> indices = first_indices(40);
  const TransformSpec identity;
  const auto model = make_model("mlp", kInput, 10, 5);
  const std::vector<float> before(model->flat_parameters().begin(), model->flat_parameters().end());
  ClientMessage message;
  message["mean_update"] = random_values(before.size(), 9);
  for (float& v : message["mean_update"]) v *= 0.01f;
  ClientState state;
  ClientTask task{*model, data, indices, identity, state, 0, 2, 11, 12};
  task.message = &message;
  const auto rule =
      client_rule("mofedsam", {{"alpha", 0.0}, {"grad_clip", 0.0}, {"epochs", int64_t{1}}, {"batch", int64_t{40}}});
  EXPECT_EQ(rule->train(task).steps, 1);
  const std::span<const float> w = model->flat_parameters();
  for (size_t i = 0; i < before.size(); i += 211) EXPECT_NEAR(w[i] - before[i], message["mean_update"][i], 1e-6) << i;
}

TEST(SamFamilyClient, MoFedSamByDefaultTakesNoSgdMomentumSoKStepsRepeatTheMeanUpdateOnce) {
  // FedFSA's code steps plain SGD (momentumForSGD = 0). With alpha 0 the direction is the constant m, so
  // K = 2 steps move w by exactly u; an SGD momentum of 0.9 would move it by 2.9 u / 2.
  const Dataset data = synthetic_train(40);
  const std::vector<int64_t> indices = first_indices(40);
  const TransformSpec identity;
  const auto model = make_model("mlp", kInput, 10, 5);
  const std::vector<float> before(model->flat_parameters().begin(), model->flat_parameters().end());
  ClientMessage message;
  message["mean_update"] = random_values(before.size(), 19);
  for (float& v : message["mean_update"]) v *= 0.01f;
  ClientState state;
  ClientTask task{*model, data, indices, identity, state, 0, 2, 11, 12};
  task.message = &message;
  const auto rule =
      client_rule("mofedsam", {{"alpha", 0.0}, {"grad_clip", 0.0}, {"epochs", int64_t{1}}, {"batch", int64_t{20}}});
  EXPECT_EQ(rule->train(task).steps, 2);
  const std::span<const float> w = model->flat_parameters();
  for (size_t i = 0; i < before.size(); i += 211) EXPECT_NEAR(w[i] - before[i], message["mean_update"][i], 1e-6) << i;
}

TEST(SamFamilyClient, FedSmooUploadsItsDualFedSpeedDecaysItsOwnLrAndFedFsaKeepsItsLayers) {
  const Dataset data = synthetic_train(40);
  const std::vector<int64_t> indices = first_indices(40);
  const TransformSpec identity;
  for (const std::string rule : {"fedsmoo", "fedspeed", "fedfsa"}) {
    SCOPED_TRACE(rule);
    const auto model = make_model("mlp", kInput, 10, 5);
    ClientState state;
    ClientTask task{*model, data, indices, identity, state, 0, 1, 11, 12};
    const ClientResult result = client_rule(rule, {{"epochs", int64_t{2}}, {"batch", int64_t{16}}})->train(task);
    EXPECT_EQ(result.steps, 6);
    EXPECT_EQ(result.extra_upload.size(), rule == "fedsmoo" ? static_cast<size_t>(model->num_parameters()) : 0u);
    if (rule != "fedfsa") {  // lr 0.1 (a float) decayed in double after each of the 2 epochs
      EXPECT_NEAR(state.scalars.at("lr"), static_cast<double>(0.1f) * 0.998 * 0.998, 1e-12);
    }
    if (rule == "fedfsa") {
      const std::vector<float>& layers = state.vectors.at("fsa_layers");
      ASSERT_EQ(layers.size(), 2u);
      for (float k : layers) EXPECT_TRUE(fsa_candidate(model->parameters()[static_cast<size_t>(k)].name));
    }
  }
}

}  // namespace
}  // namespace bastion
