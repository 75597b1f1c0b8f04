// The BatchLoader's transform and poisoning hooks (data/loader.h): the identity transform keeps batches
// bit-identical, augmentation depends only on (seed, epoch, position) or, with augment_once, on the
// sample alone; poisoning by position and by sample mask; bad specs are refused; no allocation per batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "data/loader.h"
#include "data/transforms.h"
#include "data/triggers.h"
#include "tests/test_support.h"
#include "tests/transform_test_support.h"

using namespace bastion;
using namespace bastion::testing;

namespace {

// All batches of one epoch, concatenated: x values and labels.
struct Epoch {
  std::vector<float> x;
  std::vector<int32_t> y;
};

Epoch run_epoch(BatchLoader& loader, int64_t epoch) {
  loader.start_epoch(epoch);
  Epoch out;
  Tensor x;
  LabelTensor y;
  while (loader.next(x, y)) {
    out.x.insert(out.x.end(), x.data(), x.data() + x.numel());
    for (int64_t r = 0; r < y.size(); ++r) out.y.push_back(y[r]);
  }
  return out;
}

}  // namespace

TEST(LoaderTransform, IdentityTransformKeepsBatchesBitIdentical) {
  const Dataset d = image_set(13, 3, 4, 4, kCifarMean, kCifarStd);
  BatchLoader plain(d, 5, true, 9), with(d, 5, true, 9);
  with.set_transform(TransformSpec{});
  const Epoch a = run_epoch(plain, 2), b = run_epoch(with, 2);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.y, b.y);
}

TEST(LoaderTransform, AugmentationDependsOnlyOnSeedEpochAndPosition) {
  const Dataset d = image_set(20, 3, 8, 8, kCifarMean, kCifarStd);
  const TransformSpec spec = default_train_transform("cifar10");
  BatchLoader a(d, 6, true, 3), b(d, 6, true, 3), other(d, 6, true, 4);
  a.set_transform(spec);
  b.set_transform(spec);
  other.set_transform(spec);
  const Epoch a0 = run_epoch(a, 0), a1 = run_epoch(a, 1);
  EXPECT_EQ(run_epoch(b, 1).x, a1.x);  // b never ran epoch 0
  EXPECT_EQ(run_epoch(b, 0).x, a0.x);
  EXPECT_NE(a0.x, a1.x);
  EXPECT_NE(run_epoch(other, 0).x, a0.x);
  // The documented derivation: Generator(seed).fork(epoch).fork(kAugmentationStream).fork(position).
  BatchLoader ordered(d, 6, /*shuffle=*/false, 3);
  ordered.set_transform(spec);
  const Epoch e = run_epoch(ordered, 5);
  const int64_t numel = 3 * 8 * 8;
  for (int64_t p = 0; p < d.size(); ++p) {
    const Generator rng = Generator(3).fork(5).fork(BatchLoader::kAugmentationStream).fork(static_cast<uint64_t>(p));
    EXPECT_EQ(std::vector<float>(e.x.begin() + p * numel, e.x.begin() + (p + 1) * numel), run(d, p, spec, nullptr, rng))
        << "position " << p;
  }
  // The shuffle is unchanged by the transform.
  BatchLoader plain(d, 6, true, 3);
  EXPECT_EQ(run_epoch(plain, 1).y, a1.y);
}

TEST(LoaderTransform, AugmentOnceGivesEachSampleOneAugmentationInEveryEpochAndLoader) {
  const Dataset d = image_set(20, 3, 8, 8, kCifarMean, kCifarStd);
  const TransformSpec spec = default_train_transform("cifar10");
  const Generator base = Generator(42).fork(7);
  BatchLoader once(d, 6, /*shuffle=*/false, 3), other_seed(d, 6, /*shuffle=*/true, 11), fresh(d, 6, false, 3);
  for (BatchLoader* loader : {&once, &other_seed, &fresh}) loader->set_transform(spec);
  once.set_augment_once(base);
  other_seed.set_augment_once(base);  // another loader (another round), shuffled: the same per-sample images
  const Epoch e0 = run_epoch(once, 0), e3 = run_epoch(once, 3);
  EXPECT_EQ(e0.x, e3.x);
  EXPECT_NE(run_epoch(fresh, 0).x, run_epoch(fresh, 3).x);  // without it each epoch draws anew
  const int64_t numel = 3 * 8 * 8;
  for (int64_t i = 0; i < d.size(); ++i)  // the documented derivation: base.fork(dataset index)
    EXPECT_EQ(std::vector<float>(e0.x.begin() + i * numel, e0.x.begin() + (i + 1) * numel),
              run(d, i, spec, nullptr, base.fork(static_cast<uint64_t>(i))))
        << "sample " << i;
  const Epoch shuffled = run_epoch(other_seed, 5);
  for (size_t r = 0; r < shuffled.y.size(); ++r) {
    bool found = false;  // each row is some sample's fixed image
    for (int64_t i = 0; i < d.size() && !found; ++i)
      found =
          std::equal(shuffled.x.begin() + r * numel, shuffled.x.begin() + (r + 1) * numel, e0.x.begin() + i * numel);
    EXPECT_TRUE(found) << "row " << r;
  }
}

TEST(LoaderTransform, ChangesTheBatchShapeAndDoesNotAllocate) {
  Dataset d = image_set(21, 1, 28, 28, {0.0f}, {1.0f});
  apply_normalization_preset(d, "mnist");
  TransformSpec spec;
  spec.resize = 32;
  spec.crop_padding = 4;
  spec.replicate_channels = 3;
  BatchLoader loader(d, 8, true, 1);
  loader.set_transform(spec);
  const Trigger spmc = make_trigger("spmc", 3, 32, 32);
  loader.set_poison({&spmc, 2, 3, {}});
  Tensor x;
  LabelTensor y;
  ASSERT_TRUE(loader.next(x, y));
  EXPECT_EQ(x.shape(), (Shape{8, 3, 32, 32}));
  const StoragePoolStats before = storage_pool_stats();
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    loader.start_epoch(epoch);
    std::vector<int64_t> sizes;
    while (loader.next(x, y)) sizes.push_back(y.size());
    EXPECT_EQ(sizes, (std::vector<int64_t>{8, 8, 5}));
    EXPECT_EQ(x.shape(), (Shape{5, 3, 32, 32}));
  }
  const StoragePoolStats after = storage_pool_stats();
  EXPECT_EQ(after.fresh_allocations, before.fresh_allocations);
  EXPECT_EQ(after.reuses, before.reuses);
}

// ---------------------------------------------------------------- BatchLoader poisoning

TEST(LoaderPoison, FirstKOfEveryBatchGetTriggerAndTarget) {
  const Dataset d = image_set(20, 1, 28, 28, {0.1307f}, {0.3081f});
  const Trigger dba = make_trigger("dba", 1, 28, 28);
  BatchLoader loader(d, 8, /*shuffle=*/false, 0);
  loader.set_poison({&dba, 7, 3, {}});
  const Epoch e = run_epoch(loader, 0);
  const float one = (1.0f - 0.1307f) / 0.3081f;  // raw 1.0 through Normalize
  for (int64_t p = 0; p < d.size(); ++p) {
    const int64_t in_batch = p % 8;
    const std::vector<float> got(e.x.begin() + p * 784, e.x.begin() + (p + 1) * 784);
    std::vector<float> want = normalized(d, p);
    if (in_batch < 3) {
      for (int64_t r : {0, 3})
        for (int64_t c : {0, 1, 2, 3, 6, 7, 8, 9}) want[static_cast<size_t>(r * 28 + c)] = one;
    }
    EXPECT_EQ(got, want) << "position " << p;
    EXPECT_EQ(e.y[static_cast<size_t>(p)], in_batch < 3 ? 7 : d.labels[static_cast<size_t>(p)]) << p;
  }
  loader.set_poison({});  // off again: the epoch is clean
  const Epoch clean = run_epoch(loader, 0);
  BatchLoader plain(d, 8, false, 0);
  EXPECT_EQ(clean.x, run_epoch(plain, 0).x);
  EXPECT_EQ(clean.y, run_epoch(plain, 0).y);
}

TEST(LoaderPoison, SampleMaskPicksDatasetIndices) {
  const Dataset d = image_set(12, 3, 32, 32, kCifarMean, kCifarStd);
  std::vector<uint8_t> mask(12, 0);
  mask[2] = mask[9] = 1;
  const Trigger fedcpa = make_trigger("fedcpa", 3, 32, 32);
  BatchLoader loader(d, 5, /*shuffle=*/true, 11, {9, 4, 2, 7});  // a client's subset
  loader.set_poison({&fedcpa, 1, 0, mask});
  Tensor x;
  LabelTensor y;
  int poisoned = 0;
  while (loader.next(x, y)) {
    for (int64_t r = 0; r < y.size(); ++r) {
      const float corner = x.at({r, 1, 31, 31});  // inside the patch, channel 1
      if (y[r] == 1 && corner == (1.0f - kCifarMean[1]) / kCifarStd[1]) ++poisoned;
    }
  }
  EXPECT_EQ(poisoned, 2);  // samples 2 and 9; labels of 4 and 7 are 4 and 7
}

TEST(LoaderPoison, RejectsBadSpecs) {
  const Dataset d = image_set(6, 3, 32, 32, kCifarMean, kCifarStd);
  BatchLoader loader(d, 4, false, 0);
  const Trigger fedcpa = make_trigger("fedcpa", 3, 32, 32);
  const Trigger small = make_trigger("fedcpa", 1, 28, 28);
  expect_error([&] { loader.set_poison({&fedcpa, 10, 1, {}}); }, {"target 10 out of range", "10 classes"});
  expect_error([&] { loader.set_poison({&fedcpa, 1, -1, {}}); }, {"per_batch must be >= 0"});
  expect_error(
      [&] {
        loader.set_poison({&fedcpa, 1, 0, std::vector<uint8_t>(5, 1)});
      },
      {"sample_mask has 5 entries", "6 samples"});
  expect_error([&] { loader.set_poison({&small, 1, 1, {}}); }, {"made for 1x28x28", "raw step sees 3x32x32"});
  expect_error([&] { loader.set_poison({nullptr, 1, 2, {}}); }, {"without a trigger"});
  // A normalised trigger that fits now but not after a resize: set_transform refuses and keeps the old spec.
  const Trigger spmc = make_trigger("spmc", 3, 32, 32);
  loader.set_poison({&spmc, 2, 1, {}});
  TransformSpec bigger;
  bigger.resize = 40;
  expect_error([&] { loader.set_transform(bigger); }, {"made for 3x32x32", "normalised step sees 3x40x40"});
  Tensor x;
  LabelTensor y;
  ASSERT_TRUE(loader.next(x, y));
  EXPECT_EQ(x.shape(), (Shape{4, 3, 32, 32}));
  EXPECT_EQ(y[0], 2);
}
