// Tests for data/transforms and the BatchLoader's transform and poisoning hooks: the identity pipeline
// equals normalize_into bit for bit; resize, crop (zero and reflect), flip and replication against
// expectations built independently (hand-computed values, an explicitly padded image, the same rng
// draws); presets; SPMC's digit pipeline; trigger space (raw before flip, normalised after
// normalisation). The BatchLoader's hooks: tests/test_loader_transforms.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
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

// One float sample (C×H×W) holding `values` exactly, mean 0, std 1.
Dataset float_sample(int64_t channels, int64_t height, int64_t width, std::vector<float> values) {
  Dataset d;
  d.name = "test-floats";
  d.channels = channels;
  d.height = height;
  d.width = width;
  d.num_classes = 1;
  d.labels = {0};
  d.values = std::move(values);
  d.mean.assign(channels, 0.0f);
  d.std.assign(channels, 1.0f);
  return d;
}

// Reads `image` (C, H, W) at (c, r, col).
float at(const std::vector<float>& image, int64_t height, int64_t width, int64_t c, int64_t r, int64_t col) {
  return image[static_cast<size_t>((c * height + r) * width + col)];
}

}  // namespace

// ---------------------------------------------------------------- pipeline steps

TEST(Transforms, IdentitySpecEqualsNormalizeIntoBitForBit) {
  const Dataset images = image_set(5, 3, 5, 7, kCifarMean, kCifarStd);
  for (int64_t i = 0; i < images.size(); ++i)
    EXPECT_EQ(run(images, i, {}, nullptr, Generator(1)), normalized(images, i));
  Dataset floats = float_sample(2, 2, 3, {0.1f, -2.5f, 3.0f, 7.25f, 0.0f, 1e-3f, 5, 6, 7, 8, 9, 10});
  floats.mean = {0.3f, -1.0f};
  floats.std = {0.7f, 3.0f};
  EXPECT_EQ(run(floats, 0, {}, nullptr, Generator(1)), normalized(floats, 0));
  // resize to the same size is skipped, so it too is the identity
  TransformSpec same;
  same.resize = 5;
  const Dataset square = image_set(2, 1, 5, 5, {0.2f}, {0.3f});
  EXPECT_EQ(run(square, 1, same, nullptr, Generator(1)), normalized(square, 1));
}

TEST(Transforms, ResizeKeepsAConstantImageConstant) {
  Dataset d = image_set(1, 1, 28, 28, {0.0f}, {1.0f});
  std::fill(d.pixels.begin(), d.pixels.end(), 77);
  TransformSpec spec;
  spec.resize = 32;
  const std::vector<float> out = run(d, 0, spec, nullptr, Generator(0));
  ASSERT_EQ(out.size(), 32u * 32u);
  // Two levels of w0·v + w1·v with w0 + w1 = 1, each rounding three times: a few ulps of v ≈ 0.3
  // (ulp 3e-8); 3e-7 allows ten.
  constexpr float kTol = 3e-7f;
  for (float v : out) EXPECT_NEAR(v, 77.0f / 255.0f, kTol);
}

TEST(Transforms, ResizeTwoByTwoToFourByFourHandComputed) {
  // align_corners=False, scale 0.5: output i samples input (i + 0.5)·0.5 − 0.5 = −0.25 (clamped to 0),
  // 0.25, 0.75, 1.25 (upper neighbour clamped), i.e. weights (1,0), (.75,.25), (.25,.75), (0,1) per axis.
  const Dataset d = float_sample(1, 2, 2, {0, 1, 2, 3});
  TransformSpec spec;
  spec.resize = 4;
  const std::vector<float> want = {0.0f, 0.25f, 0.75f, 1.0f,  //
                                   0.5f, 0.75f, 1.25f, 1.5f,  //
                                   1.5f, 1.75f, 2.25f, 2.5f,  //
                                   2.0f, 2.25f, 2.75f, 3.0f};
  EXPECT_EQ(run(d, 0, spec, nullptr, Generator(0)), want);  // every weight and sum is exact in binary
  // Per channel: a second channel scaled by 10 resizes to the scaled result.
  const Dataset two = float_sample(2, 2, 2, {0, 1, 2, 3, 0, 10, 20, 30});
  const std::vector<float> out = run(two, 0, spec, nullptr, Generator(0));
  for (size_t i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(out[16 + i], 10.0f * want[i]);
}

TEST(Transforms, ResizeUpscalesDigitsLikeHalfPixelBilinear) {
  // 28 → 32, one interior pixel recomputed from the formula: output row/col 10 samples input
  // (10.5)·0.875 − 0.5 = 8.6875, i.e. rows/cols 8 and 9 with weights 0.3125 and 0.6875.
  const Dataset d = image_set(1, 1, 28, 28, {0.0f}, {1.0f});
  TransformSpec spec;
  spec.resize = 32;
  const std::vector<float> out = run(d, 0, spec, nullptr, Generator(0));
  auto px = [&](int64_t r, int64_t c) {
    return static_cast<float>(d.pixels[static_cast<size_t>(r * 28 + c)]) / 255.0f;
  };
  const float want =
      0.3125f * (0.3125f * px(8, 8) + 0.6875f * px(8, 9)) + 0.6875f * (0.3125f * px(9, 8) + 0.6875f * px(9, 9));
  EXPECT_NEAR(at(out, 32, 32, 0, 10, 10), want, 1e-6f);
  EXPECT_EQ(at(out, 32, 32, 0, 0, 0), px(0, 0));            // source −0.0625 clamps to 0 with weight exactly 1
  EXPECT_FLOAT_EQ(at(out, 32, 32, 0, 31, 31), px(27, 27));  // 27.0625: both taps on pixel 27
}

// The expected crop: pad the image explicitly (zero, or numpy 'reflect': padded[p - k] = x[k],
// padded[p + n - 1 + k] = x[n - 1 - k]), then cut the window at (top, left) drawn as transforms.h says.
std::vector<float> crop_by_hand(const std::vector<float>& x, int64_t channels, int64_t n, int64_t pad, PadMode mode,
                                int64_t top, int64_t left) {
  const int64_t m = n + 2 * pad;
  std::vector<float> padded(static_cast<size_t>(channels * m * m), 0.0f);
  auto source = [&](int64_t i) {  // padded coordinate → source coordinate, or -1 for zero padding
    if (pad <= i && i < pad + n) return i - pad;
    if (mode == PadMode::kZero) return int64_t{-1};
    return i < pad ? pad - i : 2 * (n - 1) - (i - pad);
  };
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t col = 0; col < m; ++col)
        if (source(r) >= 0 && source(col) >= 0)
          padded[static_cast<size_t>((c * m + r) * m + col)] =
              x[static_cast<size_t>((c * n + source(r)) * n + source(col))];
  std::vector<float> out;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t col = 0; col < n; ++col)
        out.push_back(padded[static_cast<size_t>((c * m + r + top) * m + col + left)]);
  return out;
}

void check_crop(PadMode mode) {
  const Dataset d = image_set(1, 2, 6, 6, {0.0f, 0.0f}, {1.0f, 1.0f});
  const std::vector<float> x = normalized(d, 0);
  constexpr int64_t kPad = 2;
  TransformSpec spec;
  spec.crop_padding = kPad;
  spec.pad_mode = mode;
  std::set<std::pair<int64_t, int64_t>> offsets;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    Generator draws(seed);  // the same draws the pipeline makes: top, then left
    const int64_t top = static_cast<int64_t>(draws.below(2 * kPad + 1));
    const int64_t left = static_cast<int64_t>(draws.below(2 * kPad + 1));
    offsets.insert({top, left});
    EXPECT_EQ(run(d, 0, spec, nullptr, Generator(seed)), crop_by_hand(x, 2, 6, kPad, mode, top, left))
        << "seed " << seed << " top " << top << " left " << left;
  }
  EXPECT_GT(offsets.size(), 10u);  // the draws really move the window
}

TEST(Transforms, CropWithZeroPaddingIsTheShiftedImage) { check_crop(PadMode::kZero); }
TEST(Transforms, CropWithReflectPaddingMirrorsWithoutRepeatingTheEdge) { check_crop(PadMode::kReflect); }

TEST(Transforms, ReflectPaddingSpotValues) {
  // 1×3×3 image 1..9, pad 2, window at (0, 0): the top-left output is padded(0, 0) = x(2, 2) = 9
  // (numpy.pad(x, 2, 'reflect')[0, 0]), and (2, 2) is x(0, 0) = 1.
  const Dataset d = float_sample(1, 3, 3, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const std::vector<float> padded_window = crop_by_hand(d.values, 1, 3, 2, PadMode::kReflect, 0, 0);
  EXPECT_EQ(padded_window, (std::vector<float>{9, 8, 7, 6, 5, 4, 3, 2, 1}));
  TransformSpec spec;
  spec.crop_padding = 2;
  spec.pad_mode = PadMode::kReflect;
  for (uint64_t seed = 0;; ++seed) {
    Generator draws(seed);
    if (draws.below(5) != 0 || draws.below(5) != 0) continue;
    EXPECT_EQ(run(d, 0, spec, nullptr, Generator(seed)), padded_window);
    break;
  }
  spec.crop_padding = 3;
  expect_error([&] { run(d, 0, spec, nullptr, Generator(0)); }, {"reflect padding 3 must be smaller", "3x3"});
}

TEST(Transforms, FlipIsAMirrorWithProbabilityHalf) {
  const Dataset d = image_set(1, 2, 4, 5, {0.1f, 0.2f}, {0.5f, 0.25f});
  const std::vector<float> x = normalized(d, 0);
  std::vector<float> mirrored(x.size());
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t col = 0; col < 5; ++col)
        mirrored[static_cast<size_t>((c * 4 + r) * 5 + col)] = at(x, 4, 5, c, r, 4 - col);
  TransformSpec spec;
  spec.horizontal_flip = true;
  int flips = 0;
  constexpr int kSeeds = 64;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    const bool flip = Generator(seed).uniform() < 0.5;
    flips += flip;
    EXPECT_EQ(run(d, 0, spec, nullptr, Generator(seed)), flip ? mirrored : x) << seed;
  }
  EXPECT_GT(flips, 16);  // both outcomes occur (binomial(64, 1/2) below 17 has probability < 1e-4)
  EXPECT_LT(flips, 48);
}

TEST(Transforms, ReplicatesOneChannelToThree) {
  const Dataset d = image_set(2, 1, 4, 4, {0.1307f}, {0.3081f});
  TransformSpec spec;
  spec.replicate_channels = 3;
  const SampleShape shape = transformed_shape(d, spec);
  EXPECT_EQ(shape.channels, 3);
  EXPECT_EQ(shape.numel(), 48);
  const std::vector<float> one = normalized(d, 1), out = run(d, 1, spec, nullptr, Generator(0));
  for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(std::vector<float>(out.begin() + c * 16, out.begin() + (c + 1) * 16), one);
  const Dataset rgb = image_set(1, 3, 4, 4, kCifarMean, kCifarStd);
  expect_error([&] { transformed_shape(rgb, spec); }, {"needs a 1-channel set", "has 3"});
  TransformSpec negative;
  negative.resize = -1;
  expect_error([&] { transformed_shape(rgb, negative); }, {"must be >= 0"});
}

TEST(Transforms, NormalizationPresets) {
  Dataset gray = image_set(1, 1, 2, 2, {0.9f}, {0.9f});
  apply_normalization_preset(gray, "dataset");
  EXPECT_EQ(gray.mean, (std::vector<float>{0.9f}));
  apply_normalization_preset(gray, "mnist");
  EXPECT_EQ(gray.mean, (std::vector<float>{0.1307f}));
  EXPECT_EQ(gray.std, (std::vector<float>{0.3081f}));
  apply_normalization_preset(gray, "half");
  EXPECT_EQ(gray.mean, (std::vector<float>{0.5f}));
  EXPECT_EQ(gray.std, (std::vector<float>{0.5f}));
  apply_normalization_preset(gray, "none");
  EXPECT_EQ(gray.mean, (std::vector<float>{0.0f}));
  EXPECT_EQ(gray.std, (std::vector<float>{1.0f}));
  expect_error([&] { apply_normalization_preset(gray, "imagenet"); }, {"needs a 3-channel set"});
  expect_error([&] { apply_normalization_preset(gray, "cifar"); },
               {"unknown normalisation preset 'cifar'", "dataset, mnist, imagenet, half, none"});
  Dataset rgb = image_set(1, 3, 2, 2, kCifarMean, kCifarStd);
  apply_normalization_preset(rgb, "imagenet");
  EXPECT_EQ(rgb.mean, (std::vector<float>{0.485f, 0.456f, 0.406f}));
  EXPECT_EQ(rgb.std, (std::vector<float>{0.229f, 0.224f, 0.225f}));
  apply_normalization_preset(rgb, "mnist");  // SPMC normalises FMNIST/USPS with MNIST constants per channel
  EXPECT_EQ(rgb.mean, (std::vector<float>(3, 0.1307f)));
}

TEST(Transforms, DefaultTrainTransforms) {
  for (const std::string name : {"cifar10", "cifar100", "tinyimagenet"}) {
    const TransformSpec s = default_train_transform(name);
    EXPECT_EQ(s.crop_padding, 4) << name;
    EXPECT_EQ(s.pad_mode, PadMode::kZero) << name;
    EXPECT_TRUE(s.horizontal_flip) << name;
    EXPECT_EQ(s.resize, 0);
    EXPECT_EQ(s.replicate_channels, 0);
  }
  EXPECT_EQ(default_train_transform("svhn").crop_padding, 4);
  EXPECT_TRUE(default_train_transform("svhn").horizontal_flip);  // SPEC §2, see docs/decisions.md
  for (const std::string name : {"mnist", "fmnist", "emnist", "wisdm", "digits", "synthetic"}) {
    const TransformSpec s = default_train_transform(name);
    EXPECT_EQ(s.crop_padding, 0) << name;
    EXPECT_FALSE(s.horizontal_flip) << name;
  }
}

TEST(Transforms, SpmcDigitPipelineMakesThreeByThirtyTwo) {
  // SPMC mnist.py: Resize 32 → RandomCrop(32, pad 4) → ToTensor → repeat to 3 channels → Normalize(MNIST).
  Dataset d = image_set(3, 1, 28, 28, {0.0f}, {1.0f});
  apply_normalization_preset(d, "mnist");
  TransformSpec spec;
  spec.resize = 32;
  spec.crop_padding = 4;
  spec.replicate_channels = 3;
  const SampleShape shape = transformed_shape(d, spec);
  EXPECT_EQ(shape.channels, 3);
  EXPECT_EQ(shape.height, 32);
  EXPECT_EQ(shape.width, 32);
  EXPECT_EQ(transform_scratch_numel(d, spec), 2 * 32 * 32);
  const std::vector<float> out = run(d, 2, spec, nullptr, Generator(5));
  ASSERT_EQ(out.size(), 3u * 32u * 32u);
  for (float v : out) EXPECT_NE(v, -99.0f);  // every element written
  EXPECT_EQ(std::vector<float>(out.begin(), out.begin() + 1024),
            std::vector<float>(out.begin() + 1024, out.begin() + 2048));
  EXPECT_EQ(std::vector<float>(out.begin(), out.begin() + 1024), std::vector<float>(out.begin() + 2048, out.end()));
}

// ---------------------------------------------------------------- triggers in the pipeline

TEST(Transforms, RawTriggerIsAppliedBeforeTheFlip) {
  // FedCPA pastes its patch before augmentation, so a flipped sample carries it bottom-LEFT.
  Dataset d = image_set(1, 3, 32, 32, {0, 0, 0}, {1, 1, 1});
  std::fill(d.pixels.begin(), d.pixels.end(), 0);
  const Trigger fedcpa = make_trigger("fedcpa", 3, 32, 32);
  TransformSpec spec;
  spec.horizontal_flip = true;
  std::set<bool> seen;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    const bool flipped = Generator(seed).uniform() < 0.5;
    seen.insert(flipped);
    const std::vector<float> out = run(d, 0, spec, &fedcpa, Generator(seed));
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t r = 0; r < 32; ++r)
        for (int64_t col = 0; col < 32; ++col) {
          const bool in_patch = r >= 27 && (flipped ? col <= 4 : col >= 27);
          ASSERT_EQ(at(out, 32, 32, c, r, col), in_patch ? 1.0f : 0.0f) << seed << " " << c << " " << r << " " << col;
        }
  }
  EXPECT_EQ(seen.size(), 2u);
}

TEST(Transforms, NormalisedTriggerIsExactlyOneAfterNormalisation) {
  // SPMC writes 1.0 into channel 0 after Normalize, wherever crop and flip moved the image.
  const Dataset d = image_set(2, 3, 32, 32, kCifarMean, kCifarStd);
  const Trigger spmc = make_trigger("spmc", 3, 32, 32);
  TransformSpec spec = default_train_transform("cifar10");
  const std::set<std::pair<int64_t, int64_t>> pixels = {{0, 0}, {0, 1}, {0, 2}, {0, 4}, {0, 5}, {0, 6},
                                                        {2, 0}, {2, 1}, {2, 2}, {2, 4}, {2, 5}, {2, 6}};
  for (uint64_t seed = 0; seed < 4; ++seed) {
    const std::vector<float> clean = run(d, 1, spec, nullptr, Generator(seed));
    const std::vector<float> out = run(d, 1, spec, &spmc, Generator(seed));
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t r = 0; r < 32; ++r)
        for (int64_t col = 0; col < 32; ++col) {
          const bool hit = c == 0 && pixels.count({r, col});
          ASSERT_EQ(at(out, 32, 32, c, r, col), hit ? 1.0f : at(clean, 32, 32, c, r, col));
        }
  }
}

TEST(Transforms, TriggerMadeForTheWrongStepShapeIsRejected) {
  Dataset d = image_set(1, 1, 28, 28, {0.1307f}, {0.3081f});
  TransformSpec spec;
  spec.resize = 32;
  spec.replicate_channels = 3;
  const Trigger spmc28 = make_trigger("spmc", 1, 28, 28);  // SPMC's trigger goes on the 3×32×32 output
  expect_error([&] { run(d, 0, spec, &spmc28, Generator(0)); }, {"made for 1x28x28", "normalised-trigger", "3x32x32"});
  const Trigger fedcpa32 = make_trigger("fedcpa", 3, 32, 32);  // a raw trigger goes on the stored image
  expect_error([&] { run(d, 0, spec, &fedcpa32, Generator(0)); }, {"made for 3x32x32", "raw-trigger", "1x28x28"});
  const Trigger spmc32 = make_trigger("spmc", 3, 32, 32);
  EXPECT_NO_THROW(run(d, 0, spec, &spmc32, Generator(0)));
  expect_error([&] { run(d, 1, spec, nullptr, Generator(0)); }, {"index 1 out of range"});
}

// ---------------------------------------------------------------- BatchLoader with transforms
