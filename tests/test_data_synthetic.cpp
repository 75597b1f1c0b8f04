// Tests for the seeded synthetic set (data/synthetic.h): shape and defaults, determinism, balanced
// shuffled labels, the float-values variant, learnability by a nearest-class-mean rule, bad specs.
#include <gtest/gtest.h>

#include <map>

#include "data/dataset.h"
#include "data/formats.h"
#include "data/synthetic.h"
#include "tests/test_support.h"

using namespace bastion;
using namespace bastion::testing;

TEST(Synthetic, ShapeAndDefaults) {
  const DatasetSplit split = load_synthetic_default();
  for (const Dataset* d : {&split.train, &split.test}) {
    EXPECT_EQ(d->channels, 1);
    EXPECT_EQ(d->height, 8);
    EXPECT_EQ(d->width, 8);
    EXPECT_EQ(d->num_classes, 10);
    EXPECT_FALSE(d->is_float());
    EXPECT_NO_THROW(validate_dataset(*d));
  }
  EXPECT_EQ(split.train.size(), 2000);
  EXPECT_EQ(split.test.size(), 500);
  const DatasetSplit loaded = load_dataset("synthetic", "");
  EXPECT_EQ(loaded.train.pixels, split.train.pixels);
}

TEST(Synthetic, DeterministicForASeed) {
  SyntheticSpec spec;
  spec.train = 100;
  spec.test = 30;
  spec.channels = 3;
  spec.height = 4;
  spec.width = 5;
  spec.seed = 11;
  const DatasetSplit a = make_synthetic(spec), b = make_synthetic(spec);
  EXPECT_EQ(a.train.pixels, b.train.pixels);
  EXPECT_EQ(a.train.labels, b.train.labels);
  EXPECT_EQ(a.test.pixels, b.test.pixels);
  spec.seed = 12;
  EXPECT_NE(make_synthetic(spec).train.pixels, a.train.pixels);
  spec.seed = 11;
  spec.train = 7;  // the test split does not depend on the train split's size
  EXPECT_EQ(make_synthetic(spec).test.pixels, a.test.pixels);
  EXPECT_EQ(a.train.sample_numel(), 60);
  ASSERT_EQ(a.train.pixels.size(), 100u * 60);
}

TEST(Synthetic, ClassesBalancedAndShuffled) {
  SyntheticSpec spec;
  spec.train = 103;
  spec.classes = 10;
  const DatasetSplit split = make_synthetic(spec);
  std::map<int32_t, int> counts;
  for (int32_t y : split.train.labels) ++counts[y];
  ASSERT_EQ(counts.size(), 10u);
  for (const auto& [label, count] : counts) EXPECT_TRUE(count == 10 || count == 11) << label << ": " << count;
  std::vector<int32_t> in_order(103);
  for (int i = 0; i < 103; ++i) in_order[i] = i % 10;
  EXPECT_NE(split.train.labels, in_order);
}

TEST(Synthetic, FloatValuesArePixelsOver255) {
  SyntheticSpec spec;
  spec.train = 20;
  spec.test = 5;
  const DatasetSplit bytes = make_synthetic(spec);
  spec.float_values = true;
  const DatasetSplit floats = make_synthetic(spec);
  ASSERT_TRUE(floats.train.is_float());
  EXPECT_TRUE(floats.train.pixels.empty());
  ASSERT_EQ(floats.train.values.size(), bytes.train.pixels.size());
  for (size_t i = 0; i < floats.train.values.size(); ++i)
    ASSERT_EQ(floats.train.values[i], bytes.train.pixels[i] / 255.0f) << i;
  EXPECT_EQ(floats.train.labels, bytes.train.labels);
}

// Learnable: a nearest-class-mean classifier fitted on train gets nearly every test sample right.
TEST(Synthetic, NearestClassMeanLearnsIt) {
  const DatasetSplit split = load_synthetic_default();
  const Dataset& tr = split.train;
  const int64_t numel = tr.sample_numel();
  std::vector<double> means(static_cast<size_t>(tr.num_classes * numel), 0.0);
  std::vector<int> counts(static_cast<size_t>(tr.num_classes), 0);
  for (int64_t i = 0; i < tr.size(); ++i) {
    ++counts[tr.labels[i]];
    for (int64_t j = 0; j < numel; ++j) means[tr.labels[i] * numel + j] += tr.pixels[i * numel + j];
  }
  for (int64_t c = 0; c < tr.num_classes; ++c)
    for (int64_t j = 0; j < numel; ++j) means[c * numel + j] /= counts[c];
  int correct = 0;
  const Dataset& te = split.test;
  for (int64_t i = 0; i < te.size(); ++i) {
    int64_t best = -1;
    double best_distance = 0;
    for (int64_t c = 0; c < te.num_classes; ++c) {
      double distance = 0;
      for (int64_t j = 0; j < numel; ++j) {
        const double d = te.pixels[i * numel + j] - means[c * numel + j];
        distance += d * d;
      }
      if (best < 0 || distance < best_distance) best = c, best_distance = distance;
    }
    correct += best == te.labels[i];
  }
  // Noise 32 against prototypes ~104 apart per pixel over 64 pixels: errors are many sigmas away, so
  // 0.99 leaves room without letting a broken generator (chance = 0.1) through.
  EXPECT_GE(correct, 0.99 * te.size());
}

TEST(Synthetic, RejectsBadSpecs) {
  SyntheticSpec spec;
  spec.classes = 0;
  expect_error([&] { make_synthetic(spec); }, {"make_synthetic", "classes 0"});
  spec = SyntheticSpec{};
  spec.train = -1;
  expect_error([&] { make_synthetic(spec); }, {"split sizes", "train -1"});
  spec = SyntheticSpec{};
  spec.noise = -2;
  expect_error([&] { make_synthetic(spec); }, {"noise", "-2"});
  spec = SyntheticSpec{};
  spec.height = spec.width = 1 << 20;
  expect_error([&] { make_synthetic(spec); }, {"exceed"});
}
