// Tests for fl/attacks: the registry sweep, the upload attacks (sign-flip, scale, gaussian), the data
// attacks (badnets, dba, label-flip) through the BatchLoader they configure, the loader's label
// overrides, and BapFL's training step. Collusion attacks and normal_quantile are in
// test_fl_attacks_collusion.cpp. Inputs are constructed so the expected answer is known by hand.
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
#include "tests/fl_test_support.h"
#include "tests/test_support.h"

using namespace bastion;
using namespace bastion::testing;

namespace {

Dataset image_set(int64_t n, int64_t channels, int64_t height, int64_t width, int64_t classes = 10) {
  return pattern_images(n, channels, height, width, classes, /*modulus=*/250);
}

std::vector<float> clean_image(const Dataset& d, int64_t index) {
  std::vector<float> out(static_cast<size_t>(d.sample_numel()));
  normalize_into(out.data(), d, index);
  return out;
}

std::vector<float> with_trigger(std::vector<float> image, const Dataset& d, const Trigger& trigger) {
  apply_trigger(image.data(), d.channels, d.height, d.width, trigger);
  return image;
}

// One unshuffled epoch, row by row: the dataset index of the row (the loader's order is `indices`), its
// image and its label.
struct Row {
  int64_t index;
  std::vector<float> x;
  int32_t y;
};

std::vector<Row> unshuffled_epoch(BatchLoader& loader, const std::vector<int64_t>& indices) {
  loader.start_epoch(0);
  std::vector<Row> rows;
  Tensor x;
  LabelTensor y;
  while (loader.next(x, y)) {
    const int64_t numel = x.numel() / x.size(0);
    for (int64_t r = 0; r < y.size(); ++r) {
      rows.push_back(
          {indices[rows.size()], std::vector<float>(x.data() + r * numel, x.data() + (r + 1) * numel), y[r]});
    }
  }
  return rows;
}

// Dataset indices whose row the loader changed (image or label), after checking that a changed row is
// exactly the clean image with `trigger` and the target label.
std::set<int64_t> poisoned_rows(const std::vector<Row>& rows, const Dataset& d, const Trigger& trigger,
                                int32_t target) {
  std::set<int64_t> poisoned;
  for (const Row& row : rows) {
    const std::vector<float> clean = clean_image(d, row.index);
    if (row.x == clean && row.y == d.labels[row.index]) continue;
    EXPECT_EQ(row.x, with_trigger(clean, d, trigger)) << "sample " << row.index;
    EXPECT_EQ(row.y, target) << "sample " << row.index;
    poisoned.insert(row.index);
  }
  return poisoned;
}

std::vector<int64_t> all_indices(int64_t n) {
  std::vector<int64_t> indices(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) indices[i] = i;
  return indices;
}

DataAttackContext data_context(const Dataset& d, const std::vector<int64_t>& indices, uint64_t round_seed,
                               uint64_t client_seed = 77, int64_t attacker_index = 0) {
  return DataAttackContext{
      d, indices, attacker_index, /*client=*/3, /*round=*/1, Generator(round_seed), Generator(client_seed), nullptr};
}

// The context keeps a reference to the indices: a temporary would dangle once the statement ends.
DataAttackContext data_context(const Dataset& d, std::vector<int64_t>&& indices, uint64_t round_seed,
                               uint64_t client_seed = 77, int64_t attacker_index = 0) = delete;

}  // namespace

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

// ---------------------------------------------------------------- data attacks

TEST(FlAttack, BadnetsPerBatchPoisonsExactlyTheFirstKOfEveryBatch) {
  const Dataset d = image_set(20, 1, 28, 28);
  const std::vector<int64_t> indices = all_indices(20);
  BatchLoader loader(d, 8, /*shuffle=*/false, 0);
  build_attack("badnets", {{"trigger", std::string("bapfl")}, {"per_batch", int64_t{3}}, {"target", int64_t{7}}})
      ->poison_loader(loader, data_context(d, indices, 1));
  const std::set<int64_t> poisoned =
      poisoned_rows(unshuffled_epoch(loader, indices), d, make_trigger("bapfl", 1, 28, 28), 7);
  // Batches 0-7, 8-15, 16-19: rows 0-2 of each.
  EXPECT_EQ(poisoned, (std::set<int64_t>{0, 1, 2, 8, 9, 10, 16, 17, 18}));
}

TEST(FlAttack, BadnetsFractionPoisonsAFixedOrARedrawnSubset) {
  const Dataset d = image_set(40, 1, 28, 28);
  std::vector<int64_t> indices;  // a client holding 30 of the 40 samples
  for (int64_t i = 0; i < 40; ++i)
    if (i % 4 != 0) indices.push_back(i);
  const Trigger trigger = make_trigger("fedcpa", 1, 28, 28);
  const auto poisoned_in_round = [&](bool redraw, uint64_t round_seed) {
    BatchLoader loader(d, 16, /*shuffle=*/false, 0, indices);
    build_attack("badnets", {{"trigger", std::string("fedcpa")},
                             {"mode", std::string("fraction")},
                             {"fraction", 0.3},
                             {"redraw", redraw},
                             {"target", int64_t{1}}})
        ->poison_loader(loader, data_context(d, indices, round_seed));
    return poisoned_rows(unshuffled_epoch(loader, indices), d, trigger, 1);
  };
  for (bool redraw : {false, true}) {
    const std::set<int64_t> round1 = poisoned_in_round(redraw, 101), round2 = poisoned_in_round(redraw, 202);
    EXPECT_EQ(round1.size(), 9u);  // round(0.3 * 30)
    EXPECT_EQ(round2.size(), 9u);
    for (int64_t index : round1) EXPECT_NE(index % 4, 0) << "poisoned a sample the client does not hold";
    if (redraw) {
      EXPECT_NE(round1, round2);
    } else {
      EXPECT_EQ(round1, round2);
    }
  }
}

TEST(FlAttack, BackdoorTriggersAreMadeForTheShapeTheyMeet) {
  // SPMC's digit pipeline: 1x28x28 stored, 3x32x32 after the transform; spmc is a normalised trigger.
  const Dataset d = image_set(12, 1, 28, 28);
  TransformSpec spec;
  spec.resize = 32;
  spec.replicate_channels = 3;
  const std::unique_ptr<Attack> spmc = build_attack("badnets");  // default trigger spmc, target 2
  const std::optional<BackdoorTest> test = spmc->backdoor_test(d, spec);
  ASSERT_TRUE(test.has_value());
  EXPECT_EQ(test->target, 2);
  EXPECT_EQ(test->trigger.name, "spmc");
  EXPECT_EQ((std::vector<int64_t>{test->trigger.channels, test->trigger.height, test->trigger.width}),
            (std::vector<int64_t>{3, 32, 32}));
  BatchLoader loader(d, 4, false, 0);
  loader.set_transform(spec);
  const std::vector<int64_t> indices = all_indices(12);
  DataAttackContext context = data_context(d, indices, 1);
  context.transform = &spec;
  spmc->poison_loader(loader, context);  // would throw if the trigger were made for 1x28x28
  Tensor x;
  LabelTensor y;
  ASSERT_TRUE(loader.next(x, y));
  EXPECT_EQ(y[0], 2);
  EXPECT_EQ(x.at({0, 0, 0, 0}), 1.0f);  // spmc writes 1.0 after normalisation into channel 0
  // A raw trigger is made for the stored shape even with a resizing transform.
  const std::optional<BackdoorTest> raw =
      build_attack("badnets", {{"trigger", std::string("fedcpa")}})->backdoor_test(d, spec);
  EXPECT_EQ((std::vector<int64_t>{raw->trigger.channels, raw->trigger.height}), (std::vector<int64_t>{1, 28}));
  EXPECT_FALSE(build_attack("label-flip")->backdoor_test(d, spec).has_value());
}

TEST(FlAttack, AugmentOnceKeepsTheAttackersAugmentationAcrossRoundsAndEpochs) {
  const Dataset d = image_set(12, 1, 28, 28);
  TransformSpec spec;  // SPMC's digit pipeline: resize 32, random crop with padding 4, 3 channels
  spec.resize = 32;
  spec.crop_padding = 4;
  spec.replicate_channels = 3;
  // The context holds a reference to the client's indices: they must outlive it.
  const std::vector<int64_t> indices = all_indices(12);
  // One epoch of one round's loader for the same client (client rng 77), without shuffling.
  auto epoch_images = [&](bool augment_once, uint64_t round_seed, int64_t epoch) {
    const std::unique_ptr<Attack> attack =
        build_attack("badnets", {{"mode", std::string("fraction")}, {"redraw", false}, {"augment_once", augment_once}});
    BatchLoader loader(d, 4, false, round_seed);
    loader.set_transform(spec);
    DataAttackContext context = data_context(d, indices, round_seed);
    context.transform = &spec;
    attack->poison_loader(loader, context);
    loader.start_epoch(epoch);
    std::vector<float> images;
    Tensor x;
    LabelTensor y;
    while (loader.next(x, y)) images.insert(images.end(), x.data(), x.data() + x.numel());
    return images;
  };
  EXPECT_EQ(epoch_images(true, 1, 0), epoch_images(true, 2, 4));    // another round and epoch: the same crops
  EXPECT_NE(epoch_images(false, 1, 0), epoch_images(false, 1, 4));  // default: a new crop each epoch
}

TEST(FlAttack, DbaAttackerPlantsPartIndexModFourAndIsTestedWithTheUnion) {
  const Dataset d = image_set(16, 1, 28, 28);
  const std::vector<int64_t> indices = all_indices(16);
  const std::unique_ptr<Attack> dba = build_attack("dba", {{"per_batch", int64_t{2}}});
  for (int64_t attacker : {0, 1, 6, 11}) {
    BatchLoader loader(d, 8, false, 0);
    dba->poison_loader(loader, data_context(d, indices, 1, 77, attacker));
    const Trigger part = make_trigger("dba:" + std::to_string(attacker % 4), 1, 28, 28);
    EXPECT_EQ(poisoned_rows(unshuffled_epoch(loader, indices), d, part, 2), (std::set<int64_t>{0, 1, 8, 9}))
        << "attacker " << attacker;
  }
  const std::optional<BackdoorTest> test = dba->backdoor_test(d, TransformSpec{});
  ASSERT_TRUE(test.has_value());
  EXPECT_EQ(test->trigger.name, "dba");
  EXPECT_EQ(test->trigger.pixels.size(), 16u);  // four 1x4 bars
  EXPECT_EQ(test->target, 2);
}

namespace {
// Relabelled rows of one unshuffled epoch: dataset index -> new label; images must be untouched.
std::map<int64_t, int32_t> relabelled(const Attack& attack, const Dataset& d, uint64_t round_seed) {
  const std::vector<int64_t> indices = all_indices(d.size());
  BatchLoader loader(d, 16, false, 0);
  attack.poison_loader(loader, data_context(d, indices, round_seed));
  std::map<int64_t, int32_t> changed;
  for (const Row& row : unshuffled_epoch(loader, indices)) {
    EXPECT_EQ(row.x, clean_image(d, row.index)) << "label-flip changed the image of sample " << row.index;
    if (row.y != d.labels[row.index]) changed[row.index] = row.y;
  }
  return changed;
}
}  // namespace

TEST(FlAttack, LabelFlipShiftAndReverseRelabelExactlyTheFraction) {
  const Dataset d = image_set(40, 1, 8, 8);  // labels i % 10
  for (const std::string mode : {"shift", "reverse"}) {
    const std::unique_ptr<Attack> flip = build_attack("label-flip", {{"mode", mode}, {"fraction", 0.5}});
    const std::map<int64_t, int32_t> changed = relabelled(*flip, d, 1);
    EXPECT_EQ(changed.size(), 20u) << mode;  // 10 classes: neither map has a fixed point
    for (const auto& [index, label] : changed) {
      const int32_t y = d.labels[index];
      EXPECT_EQ(label, mode == "shift" ? (y + 1) % 10 : 9 - y) << mode << " sample " << index;
    }
    EXPECT_EQ(relabelled(*flip, d, 2), changed) << "redraw false keeps the subset";
  }
  // fraction 1 (the default) relabels everything.
  EXPECT_EQ(relabelled(*build_attack("label-flip"), d, 1).size(), 40u);
}

TEST(FlAttack, LabelFlipRandomIsAFixedDerangementPerAttacker) {
  const Dataset d = image_set(40, 1, 8, 8);
  const std::unique_ptr<Attack> flip =
      build_attack("label-flip", {{"mode", std::string("random")}, {"fraction", 0.5}, {"redraw", true}});
  const std::map<int64_t, int32_t> round1 = relabelled(*flip, d, 1), round2 = relabelled(*flip, d, 2);
  EXPECT_EQ(round1.size(), 20u);
  EXPECT_EQ(round2.size(), 20u);
  std::map<int32_t, int32_t> map;  // class -> new class, over both rounds (client_rng is the same)
  for (const auto* changed : {&round1, &round2}) {
    for (const auto& [index, label] : *changed) {
      const int32_t y = d.labels[index];
      EXPECT_NE(label, y);
      const auto [it, inserted] = map.emplace(y, label);
      EXPECT_EQ(it->second, label) << "class " << y << " mapped two ways";
    }
  }
  std::set<int32_t> images;
  for (const auto& [y, label] : map) images.insert(label);
  EXPECT_EQ(images.size(), map.size()) << "not a permutation";
  EXPECT_NE(round1, round2) << "redraw true draws a new subset each round";
}

// ---------------------------------------------------------------- loader label overrides

TEST(LoaderLabelOverride, ReplacesLabelsKeepsImagesAndDoesNotAllocate) {
  const Dataset d = image_set(10, 1, 8, 8);
  PoisonSpec spec;
  spec.label_override.assign(10, -1);
  spec.label_override[3] = 0;
  spec.label_override[7] = 9;
  BatchLoader loader(d, 4, false, 0);
  loader.set_poison(spec);
  Tensor x;
  LabelTensor y;
  ASSERT_TRUE(loader.next(x, y));  // buffers exist; now an epoch must not allocate
  const StoragePoolStats before = storage_pool_stats();
  const std::vector<Row> rows = unshuffled_epoch(loader, all_indices(10));
  const StoragePoolStats after = storage_pool_stats();
  EXPECT_EQ(after.fresh_allocations, before.fresh_allocations);
  for (const Row& row : rows) {
    EXPECT_EQ(row.x, clean_image(d, row.index));
    EXPECT_EQ(row.y, row.index == 3 ? 0 : row.index == 7 ? 9 : d.labels[row.index]) << row.index;
  }
  loader.set_poison({});  // off again
  for (const Row& row : unshuffled_epoch(loader, all_indices(10))) EXPECT_EQ(row.y, d.labels[row.index]);
}

TEST(LoaderLabelOverride, TheTriggerWinsOverAnOverride) {
  const Dataset d = image_set(8, 1, 28, 28);
  const Trigger trigger = make_trigger("fedcpa", 1, 28, 28);
  PoisonSpec spec;
  spec.trigger = &trigger;
  spec.target = 5;
  spec.per_batch = 2;
  spec.label_override.assign(8, 1);
  BatchLoader loader(d, 4, false, 0);
  loader.set_poison(spec);
  for (const Row& row : unshuffled_epoch(loader, all_indices(8))) {
    const bool triggered = row.index % 4 < 2;
    EXPECT_EQ(row.y, triggered ? 5 : 1) << row.index;
    EXPECT_EQ(row.x, triggered ? with_trigger(clean_image(d, row.index), d, trigger) : clean_image(d, row.index));
  }
}

TEST(LoaderLabelOverride, RejectsBadOverrides) {
  const Dataset d = image_set(6, 1, 8, 8);
  BatchLoader loader(d, 4, false, 0);
  PoisonSpec short_list;
  short_list.label_override.assign(5, 0);
  expect_error([&] { loader.set_poison(short_list); }, {"label_override has 5 entries", "6 samples"});
  PoisonSpec too_big;
  too_big.label_override.assign(6, -1);
  too_big.label_override[4] = 10;
  expect_error([&] { loader.set_poison(too_big); }, {"label_override[4] = 10", "10 classes"});
  PoisonSpec no_trigger;
  no_trigger.per_batch = 1;
  no_trigger.label_override.assign(6, 0);
  expect_error([&] { loader.set_poison(no_trigger); }, {"without a trigger"});
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
