// The SAM step (nn/optim.h's Sam) and its options on a constant gradient whose answer is known: the
// perturbation's radius and readings, the restore of w, the ascent pass on the spare buffer, the ascent
// scale and linear term, FedSMOO's dual, and the device step against the CPU's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "cuda_test_support.h"
#include "kernels/cpu/sam.h"
#include "nn/models.h"
#include "nn/optim.h"
#include "personalized_test_support.h"

namespace bastion {
namespace {

using namespace pfl_testing;

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

// One SAM step with `options` on the constant gradient g at lr 0 (the step leaves w exactly as SAM restored
// it): the perturbation e it recorded.
std::vector<float> recorded_perturbation(Model& model, SamOptions options, const std::vector<float>& g) {
  Sgd sgd(model, {0.0f, 0.0f, 0.0f, false});
  options.record_perturbation = true;
  Sam sam(model, sgd, options);
  sam.step(constant_gradient(model, g));
  return {sam.last_perturbation().begin(), sam.last_perturbation().end()};
}

TEST(SamStep, GlobalPerturbationHasNormRhoAndTheWeightsComeBackBitForBit) {
  auto model = small_mlp();
  const std::vector<float> g = normal_values(model->num_parameters(), 1);
  const std::vector<float> before(model->flat_parameters().begin(), model->flat_parameters().end());
  SamOptions options;
  options.rho = 0.3f;
  const std::vector<float> e = recorded_perturbation(*model, options, g);
  EXPECT_NEAR(norm(e), 0.3, 1e-6);
  for (size_t i = 0; i < g.size(); i += 997) EXPECT_NEAR(e[i], 0.3 * g[i] / norm(g), 1e-6);
  EXPECT_TRUE(same_columns(before, {model->flat_parameters().begin(), model->flat_parameters().end()}, 0,
                           model->num_parameters()));
}

TEST(SamStep, PerTensorRadiiScaleEachTensorOfTheGlobalDirection) {
  auto model = small_mlp();
  const std::vector<float> g = normal_values(model->num_parameters(), 2);
  SamOptions options;
  options.tensor_rho = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  ASSERT_EQ(model->parameters().size(), options.tensor_rho.size());
  const std::vector<float> e = recorded_perturbation(*model, options, g);
  const double g_norm = norm(g);
  for (size_t k = 0; k < model->parameters().size(); ++k) {
    const ParameterView& p = model->parameters()[k];
    EXPECT_NEAR(norm(e, p.begin, p.end), options.tensor_rho[k] * norm(g, p.begin, p.end) / g_norm, 1e-6) << p.name;
  }
}

// The readings of a stated radius (SamOptions::Perturbation) on a constant gradient g at weights w:
// per-tensor gives every tensor a perturbation of norm rho; none gives rho g; adaptive (ASAM) gives
// rho w^2 g / || |w| g ||, whose |w|-weighted norm is rho.
TEST(SamStep, PerTensorUnnormalisedAndAdaptivePerturbations) {
  auto model = small_mlp();
  const std::vector<float> g = normal_values(model->num_parameters(), 4);
  const std::vector<float> w(model->flat_parameters().begin(), model->flat_parameters().end());
  const std::vector<ParameterView>& parameters = model->parameters();
  auto perturbation = [&](SamOptions::Perturbation mode) {
    SamOptions options;
    options.rho = 0.2f;
    options.perturbation = mode;
    return recorded_perturbation(*model, options, g);
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
  auto with_sam = small_mlp(), plain = small_mlp();
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
    const std::vector<float> g = normal_values(with_sam->num_parameters(), 10 + step);
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
  const std::vector<float> g = normal_values(model->num_parameters(), 6);
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
  auto with_sam = small_mlp(), by_hand = small_mlp();
  const size_t P = static_cast<size_t>(with_sam->num_parameters());
  const std::vector<float> linear = normal_values(P, 20);
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
    g = normal_values(P, 30 + step);
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
  auto model = small_mlp();
  const std::vector<float> g = normal_values(model->num_parameters(), 3), linear = normal_values(g.size(), 4);
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
  auto model = small_mlp();
  const size_t P = static_cast<size_t>(model->num_parameters());
  const std::vector<float> g = normal_values(P, 5), s = normal_values(P, 6);
  std::vector<float> mu = normal_values(P, 7);
  const std::vector<float> mu_before = mu;
  SamOptions options;
  options.rho = 0.1f;
  options.dual = mu;
  options.dual_correction = s;
  const std::vector<float> e = recorded_perturbation(*model, options, g);  // a dual keeps e anyway
  std::vector<float> d(P);
  for (size_t i = 0; i < P; ++i) d[i] = g[i] - mu_before[i] - s[i];
  const double d_norm = norm(d);
  for (size_t i = 0; i < P; i += 503) {
    EXPECT_NEAR(e[i], 0.1 * d[i] / d_norm, 1e-6) << i;
    EXPECT_NEAR(mu[i], mu_before[i] + e[i] - s[i], 1e-5) << i;  // mu += e - s
  }
  SamOptions one_radius;
  one_radius.tensor_rho = {1.0f};
  Sgd sgd(*model, {0.0f, 0.0f, 0.0f, false});
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
  auto cpu = small_mlp(), gpu = small_mlp();
  gpu->to(Device::CUDA);
  const size_t P = static_cast<size_t>(cpu->num_parameters());
  const std::vector<float> g = normal_values(P, 11), s = normal_values(P, 12), mu0 = normal_values(P, 13);
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

}  // namespace
}  // namespace bastion
