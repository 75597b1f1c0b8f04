// Tests for fl/attacks' data attacks (badnets, dba, label-flip) through the BatchLoader they configure, and
// the loader's label overrides. Each poisoned row is checked against the clean image with the trigger and
// the target label (attack_test_support.h), on constructed pattern images whose answer is known by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "data/loader.h"
#include "data/triggers.h"
#include "fl/attacks/attack.h"
#include "fl/registry.h"
#include "tests/attack_test_support.h"
#include "tests/fl_test_support.h"
#include "tests/test_support.h"

using namespace bastion;
using namespace bastion::testing;
using namespace bastion::attack_testing;

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
