// Tests for fl/attacks: the registry sweep, the upload attacks (sign-flip, scale, gaussian) and BapFL's
// loader and training step. The data attacks (badnets, dba, label-flip) and the loader's label overrides
// are in test_fl_attacks_data.cpp, collusion attacks and normal_quantile in test_fl_attacks_collusion.cpp;
// shared helpers in attack_test_support.h. Inputs are constructed so the expected answer is known by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "data/loader.h"
#include "data/triggers.h"
#include "fl/attacks/attack.h"
#include "fl/registry.h"
#include "kernels/cpu/vector.h"
#include "nn/models.h"
#include "nn/optim.h"
#include "tests/attack_test_support.h"
#include "tests/fl_test_support.h"
#include "tests/test_support.h"

using namespace bastion;
using namespace bastion::testing;
using namespace bastion::attack_testing;

// ---------------------------------------------------------------- registry

TEST(FlAttack, EveryRegisteredAttackBuildsWithDefaultsAndReportsItsKind) {
  ASSERT_EQ(attack_registry().size(), 11u);
  for (const AttackEntry& entry : attack_registry()) {
    ASSERT_NE(entry.info.params, nullptr) << entry.info.name;
    const std::unique_ptr<Attack> attack = entry.make(Params("attack." + entry.info.name, *entry.info.params));
    ASSERT_NE(attack, nullptr) << entry.info.name;
    EXPECT_EQ(attack->kind(), entry.kind) << entry.info.name;
  }
  EXPECT_STREQ(attack_kind_name(AttackKind::Data), "data");
  EXPECT_STREQ(attack_kind_name(AttackKind::Training), "training");
  EXPECT_STREQ(attack_kind_name(AttackKind::Upload), "upload");
  EXPECT_STREQ(attack_kind_name(AttackKind::Collusion), "collusion");
}

TEST(FlAttack, UnknownTriggerFailsAtConstruction) {
  expect_error(
      [] {
        build_attack("badnets", {{"trigger", std::string("sqaure")}});
      },
      {"attack.badnets.trigger", "unknown trigger 'sqaure'", "square"});
  expect_error([] { build_attack("bapfl", {{"trigger", std::string("nope")}}); }, {"attack.bapfl.trigger"});
}

// ---------------------------------------------------------------- upload attacks

namespace {
UploadAttackContext upload_context(int64_t num_parameters, int64_t participants, std::span<const float> global = {}) {
  return UploadAttackContext{global, num_parameters, participants, Generator(5)};
}
}  // namespace

TEST(FlAttack, SignFlipNegatesTheParametersOnly) {
  std::vector<float> update = {1.0f, -2.0f, 3.0f, 7.0f};  // 3 parameters, then a BatchNorm statistic
  UploadAttackContext context = upload_context(3, 10);
  build_attack("sign-flip")->corrupt_upload(update, context);
  EXPECT_EQ(update, (std::vector<float>{-1.0f, 2.0f, -3.0f, 7.0f}));
  build_attack("sign-flip", {{"factor", 2.5}})->corrupt_upload(update, context);
  EXPECT_EQ(update, (std::vector<float>{2.5f, -5.0f, 7.5f, 7.0f}));
}

TEST(FlAttack, ScaleMultipliesByTheFactorOrTheParticipants) {
  std::vector<float> update = {1.0f, -0.5f, 0.25f};
  UploadAttackContext context = upload_context(2, 5);
  build_attack("scale")->corrupt_upload(update, context);  // factor 0: the 5 participants
  EXPECT_EQ(update, (std::vector<float>{5.0f, -2.5f, 0.25f}));
  build_attack("scale", {{"factor", 100.0}})->corrupt_upload(update, context);  // DBA's single shot
  EXPECT_EQ(update, (std::vector<float>{500.0f, -250.0f, 0.25f}));
  UploadAttackContext nobody = upload_context(2, 0);
  expect_error([&] { build_attack("scale")->corrupt_upload(update, nobody); }, {"participants"});
}

namespace {
// 100k standard-normal draws scaled by s: the sample mean has standard error s / sqrt(N) = 0.0032 s and
// the sample std a relative standard error 1 / sqrt(2N) = 0.0022; five standard errors (a false alarm
// once in ~2 million seeds, and the seed is fixed) bound both.
constexpr int64_t kNoiseCoordinates = 100000;
constexpr double kStandardErrors = 5.0;

void expect_noise_with_std(const std::vector<float>& update, int64_t D, double expected_std) {
  double sum = 0.0, squares = 0.0;
  for (int64_t j = 0; j < D; ++j) sum += update[j];
  const double mean = sum / static_cast<double>(D);
  for (int64_t j = 0; j < D; ++j) squares += (update[j] - mean) * (update[j] - mean);
  const double std = std::sqrt(squares / static_cast<double>(D));
  EXPECT_NEAR(mean, 0.0, kStandardErrors * expected_std / std::sqrt(static_cast<double>(D)));
  EXPECT_NEAR(std / expected_std, 1.0, kStandardErrors / std::sqrt(2.0 * static_cast<double>(D)));
}
}  // namespace

TEST(FlAttack, GaussianFixedSigma) {
  std::vector<float> update(kNoiseCoordinates + 1, 3.0f);
  UploadAttackContext context = upload_context(kNoiseCoordinates, 10);
  build_attack("gaussian")->corrupt_upload(update, context);
  expect_noise_with_std(update, kNoiseCoordinates, 0.05);
  EXPECT_EQ(update.back(), 3.0f);  // the buffer part is untouched
  // Deterministic: the same rng gives the same noise.
  std::vector<float> again(kNoiseCoordinates + 1, 3.0f);
  UploadAttackContext same = upload_context(kNoiseCoordinates, 10);
  build_attack("gaussian")->corrupt_upload(again, same);
  EXPECT_EQ(again, update);
}

TEST(FlAttack, GaussianUpdateStdUsesTheClientsOwnUpdate) {
  // +-3 around 10: population std exactly 3 (the mean is irrelevant).
  std::vector<float> update(kNoiseCoordinates);
  for (int64_t j = 0; j < kNoiseCoordinates; ++j) update[j] = j % 2 == 0 ? 13.0f : 7.0f;
  UploadAttackContext context = upload_context(kNoiseCoordinates, 10);
  build_attack("gaussian", {{"mode", std::string("update-std")}})->corrupt_upload(update, context);
  expect_noise_with_std(update, kNoiseCoordinates, 3.0);
}

TEST(FlAttack, GaussianGlobalStdScalesTheGlobalModelsStd) {
  std::vector<float> global(kNoiseCoordinates + 3, 1000.0f);  // trailing buffers must not count
  for (int64_t j = 0; j < kNoiseCoordinates; ++j) global[j] = j % 2 == 0 ? 2.5f : -1.5f;  // std 2
  std::vector<float> update(kNoiseCoordinates, 1.0f);
  UploadAttackContext context = upload_context(kNoiseCoordinates, 10, global);
  build_attack("gaussian", {{"mode", std::string("global-std")}, {"sigma", 0.5}})->corrupt_upload(update, context);
  expect_noise_with_std(update, kNoiseCoordinates, 0.5 * 2.0);
}

// ---------------------------------------------------------------- bapfl

namespace {
std::vector<float> head_values(const Model& model, bool head) {
  std::vector<float> values;
  for (const ParameterView& p : model.parameters())
    if (p.is_head == head) values.insert(values.end(), p.value.data(), p.value.data() + p.value.numel());
  return values;
}

// A 10-row batch of 1x8x8 inputs and labels (the loader's poisoned rows come first).
struct Batch {
  Tensor x;
  LabelTensor y;
};
Batch make_batch() {
  Generator gen(3);
  Batch b{Tensor::randn({10, 1, 8, 8}, gen), LabelTensor::from_vector({2, 2, 2, 2, 0, 1, 3, 4, 5, 6})};
  return b;
}

constexpr SgdOptions kBapflSgd{0.1f, 0.9f, 1e-4f, false};
}  // namespace

TEST(FlAttack, BapflPoisonStepMovesOnlyTheBody) {
  const Batch batch = make_batch();
  const std::unique_ptr<Attack> bapfl = build_attack("bapfl", {{"per_batch", int64_t{4}}});
  // Attacked model: the whole BapFL step.
  std::unique_ptr<Model> attacked = make_model("mlp", {1, 8, 8}, 10, 11);
  Sgd attacked_sgd(*attacked, kBapflSgd);
  Generator rng(9);
  TrainingStepContext context{*attacked, attacked_sgd, batch.x, batch.y, rng};
  const float loss = bapfl->training_step(context);
  // Reference: the same model and optimizer after the clean step alone (rows 4..9, clip 10).
  std::unique_ptr<Model> reference = make_model("mlp", {1, 8, 8}, 10, 11);
  const std::vector<float> initial_head = head_values(*reference, true);
  Sgd reference_sgd(*reference, kBapflSgd);
  reference->zero_grad();
  Tensor clean_loss =
      cross_entropy(reference->forward(batch.x.slice_rows(4, 10)), LabelTensor::from_vector({0, 1, 3, 4, 5, 6}));
  clean_loss.backward();
  const std::span<float> grad = reference->flat_gradients();
  const double norm = vector_norm_cpu(grad.data(), static_cast<int64_t>(grad.size()));
  if (norm > 10.0) vector_scale_cpu(grad.data(), static_cast<float>(10.0 / norm), static_cast<int64_t>(grad.size()));
  reference_sgd.step();

  EXPECT_NE(head_values(*reference, true), initial_head) << "the clean step should train the head";
  EXPECT_EQ(head_values(*attacked, true), head_values(*reference, true))
      << "the poison step changed the head (not frozen, or the noise not removed)";
  EXPECT_NE(head_values(*attacked, false), head_values(*reference, false)) << "the poison step left the body alone";
  for (const ParameterView& p : attacked->parameters()) EXPECT_TRUE(p.value.requires_grad()) << p.name;
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_GT(loss, 0.0f);
}

TEST(FlAttack, BapflWithAnAllPoisonedBatchNeverTouchesTheHead) {
  const Batch batch = make_batch();
  for (const std::string noise : {"gaussian", "uniform"}) {
    std::unique_ptr<Model> model = make_model("mlp", {1, 8, 8}, 10, 11);
    const std::vector<float> head = head_values(*model, true), body = head_values(*model, false);
    Sgd sgd(*model, kBapflSgd);
    Generator rng(9);
    TrainingStepContext context{*model, sgd, batch.x, batch.y, rng};
    build_attack("bapfl", {{"per_batch", int64_t{64}}, {"noise", noise}})->training_step(context);  // k = B = 10
    EXPECT_EQ(head_values(*model, true), head) << noise;
    EXPECT_NE(head_values(*model, false), body) << noise;
  }
}

TEST(FlAttack, BapflPoisonGradientIsHalfNoisyHeadPlusHalfCleanHead) {
  // With noise_std 0 both halves see the same head: the two backward passes of 0.5 CE must add up to
  // exactly one CE gradient (scaling by 0.5 is exact in float), so the body equals a plain step on the
  // poisoned rows with the head frozen. A missing accumulation (or a single half-weighted pass) differs.
  const Batch batch = make_batch();
  std::unique_ptr<Model> model = make_model("mlp", {1, 8, 8}, 10, 11);
  Sgd sgd(*model, kBapflSgd);
  Generator rng(9);
  TrainingStepContext context{*model, sgd, batch.x, batch.y, rng};
  build_attack("bapfl", {{"per_batch", int64_t{64}}, {"noise_std", 0.0}})->training_step(context);
  std::unique_ptr<Model> reference = make_model("mlp", {1, 8, 8}, 10, 11);
  Sgd reference_sgd(*reference, kBapflSgd);
  reference->set_trainable(/*head=*/true, false);
  reference->zero_grad();
  cross_entropy(reference->forward(batch.x), batch.y).backward();
  const std::span<float> grad = reference->flat_gradients();
  const double norm = vector_norm_cpu(grad.data(), static_cast<int64_t>(grad.size()));
  if (norm > 10.0) vector_scale_cpu(grad.data(), static_cast<float>(10.0 / norm), static_cast<int64_t>(grad.size()));
  reference_sgd.step();
  EXPECT_EQ(head_values(*model, false), head_values(*reference, false));
  // With noise the result depends on the step's rng.
  std::unique_ptr<Model> noisy_a = make_model("mlp", {1, 8, 8}, 10, 11), noisy_b = make_model("mlp", {1, 8, 8}, 10, 11);
  Sgd sgd_a(*noisy_a, kBapflSgd), sgd_b(*noisy_b, kBapflSgd);
  Generator rng_a(1), rng_b(2);
  TrainingStepContext context_a{*noisy_a, sgd_a, batch.x, batch.y, rng_a},
      context_b{*noisy_b, sgd_b, batch.x, batch.y, rng_b};
  const std::unique_ptr<Attack> bapfl = build_attack("bapfl", {{"per_batch", int64_t{64}}});
  bapfl->training_step(context_a);
  bapfl->training_step(context_b);
  EXPECT_NE(head_values(*noisy_a, false), head_values(*noisy_b, false));
}

TEST(FlAttack, BapflPoisonsTheFirstRowsOfEveryBatch) {
  const Dataset d = image_set(12, 1, 28, 28);
  const std::vector<int64_t> indices = all_indices(12);
  BatchLoader loader(d, 5, false, 0);
  build_attack("bapfl", {{"per_batch", int64_t{2}}})->poison_loader(loader, data_context(d, indices, 1));
  EXPECT_EQ(poisoned_rows(unshuffled_epoch(loader, indices), d, make_trigger("bapfl", 1, 28, 28), 2),
            (std::set<int64_t>{0, 1, 5, 6, 10, 11}));
}
