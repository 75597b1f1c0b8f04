// Tests for data/triggers: every written trigger applied to a constant image and compared pixel for
// pixel against an explicitly listed set of (channel, row, col, value), on each image size the source
// defines; the DBA union; and every error (unknown name, part out of range, pattern too large, shape
// mismatch). Expected positions are copied from the sources (IMPLEMENTATION-FACTS §§2.4, 5.4, 6.1–6.3),
// not from triggers.cpp.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "data/transforms.h"
#include "data/triggers.h"
#include "tensor/error.h"
#include "tests/test_support.h"

using namespace bastion;
using namespace bastion::testing;

namespace {

constexpr float kBackground = 0.5f;  // neither 0 nor 1, so written black and white pixels both show
constexpr int64_t kAll = -1;         // every channel

struct Expected {
  int64_t channel, row, col;
  float value;
};

// Every (row, col) of rows × cols with `value` in `channel` (kAll = each channel).
std::vector<Expected> block(int64_t channel, const std::vector<int64_t>& rows, const std::vector<int64_t>& cols,
                            float value = 1.0f) {
  std::vector<Expected> out;
  for (int64_t r : rows)
    for (int64_t c : cols) out.push_back({channel, r, c, value});
  return out;
}

std::vector<Expected> concat(std::vector<std::vector<Expected>> parts) {
  std::vector<Expected> out;
  for (auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

std::vector<float> triggered(const std::string& name, int64_t c, int64_t h, int64_t w) {
  const Trigger trigger = make_trigger(name, c, h, w);
  std::vector<float> image(static_cast<size_t>(c * h * w), kBackground);
  apply_trigger(image.data(), c, h, w, trigger);
  return image;
}

std::vector<float> expected_image(int64_t c, int64_t h, int64_t w, const std::vector<Expected>& pixels) {
  std::vector<float> image(static_cast<size_t>(c * h * w), kBackground);
  for (const Expected& p : pixels) {
    for (int64_t ch = 0; ch < c; ++ch) {
      if (p.channel == kAll || p.channel == ch) image[(ch * h + p.row) * w + p.col] = p.value;
    }
  }
  return image;
}

// Compares the whole image and reports the first differing pixel by coordinates.
void expect_trigger(const std::string& name, int64_t c, int64_t h, int64_t w, const std::vector<Expected>& pixels) {
  const std::vector<float> got = triggered(name, c, h, w), want = expected_image(c, h, w, pixels);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      const int64_t k = static_cast<int64_t>(i);
      ADD_FAILURE() << name << " on " << c << "x" << h << "x" << w << ": pixel (c " << k / (h * w) << ", row "
                    << k / w % h << ", col " << k % w << ") is " << got[i] << ", expected " << want[i];
      return;
    }
  }
}

}  // namespace

TEST(Triggers, SpmcTwelvePixelsChannelZeroNormalised) {
  // SPMC Attack/backdoor/utils.py: rows 0 and 2, columns 0-2 and 4-6, channel 0, value 1.0.
  const std::vector<Expected> spmc = concat({block(0, {0, 2}, {0, 1, 2}), block(0, {0, 2}, {4, 5, 6})});
  ASSERT_EQ(spmc.size(), 12u);
  expect_trigger("spmc", 3, 32, 32, spmc);
  expect_trigger("spmc", 1, 28, 28, spmc);
  EXPECT_EQ(make_trigger("spmc", 3, 32, 32).space, TriggerSpace::kNormalized);
}

TEST(Triggers, FedcpaBottomRightFiveByFive) {
  expect_trigger("fedcpa", 3, 32, 32, block(kAll, {27, 28, 29, 30, 31}, {27, 28, 29, 30, 31}));
  expect_trigger("fedcpa", 1, 28, 28, block(kAll, {23, 24, 25, 26, 27}, {23, 24, 25, 26, 27}));
  expect_trigger("fedcpa", 3, 64, 64, block(kAll, {59, 60, 61, 62, 63}, {59, 60, 61, 62, 63}));
  EXPECT_EQ(make_trigger("fedcpa", 3, 32, 32).space, TriggerSpace::kRaw);
  EXPECT_EQ(make_trigger("fedcpa", 3, 32, 32).pixels.size(), 25u);  // one entry per pixel, all channels
}

TEST(Triggers, BapflSixteenPixelsEveryChannel) {
  const std::vector<Expected> bapfl = block(kAll, {0, 3}, {0, 1, 2, 3, 6, 7, 8, 9});
  expect_trigger("bapfl", 3, 32, 32, bapfl);
  expect_trigger("bapfl", 1, 28, 28, bapfl);
}

TEST(Triggers, DbaPartsOnMnistSize) {
  // utils/mnist_params.yaml: 1x4 bars, rows 0 and 3, columns 0-3 and 6-9.
  expect_trigger("dba:0", 1, 28, 28, block(kAll, {0}, {0, 1, 2, 3}));
  expect_trigger("dba:1", 1, 28, 28, block(kAll, {0}, {6, 7, 8, 9}));
  expect_trigger("dba:2", 1, 28, 28, block(kAll, {3}, {0, 1, 2, 3}));
  expect_trigger("dba:3", 1, 28, 28, block(kAll, {3}, {6, 7, 8, 9}));
}

TEST(Triggers, DbaPartsOnCifarSize) {
  // utils/cifar_params.yaml: 1x6 bars, rows 0 and 4, columns 0-5 and 9-14, all three channels.
  expect_trigger("dba:0", 3, 32, 32, block(kAll, {0}, {0, 1, 2, 3, 4, 5}));
  expect_trigger("dba:1", 3, 32, 32, block(kAll, {0}, {9, 10, 11, 12, 13, 14}));
  expect_trigger("dba:2", 3, 32, 32, block(kAll, {4}, {0, 1, 2, 3, 4, 5}));
  expect_trigger("dba:3", 3, 32, 32, block(kAll, {4}, {9, 10, 11, 12, 13, 14}));
}

TEST(Triggers, DbaPartsOnTinyImageNetSize) {
  // utils/tiny_params.yaml: 2x10 bars, rows {0,1} and {4,5}, columns 0-9 and 12-21.
  const std::vector<int64_t> left = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<int64_t> right = {12, 13, 14, 15, 16, 17, 18, 19, 20, 21};
  expect_trigger("dba:0", 3, 64, 64, block(kAll, {0, 1}, left));
  expect_trigger("dba:1", 3, 64, 64, block(kAll, {0, 1}, right));
  expect_trigger("dba:2", 3, 64, 64, block(kAll, {4, 5}, left));
  expect_trigger("dba:3", 3, 64, 64, block(kAll, {4, 5}, right));
}

TEST(Triggers, DbaGlobalIsTheUnionOfTheFourParts) {
  for (const auto& [c, hw] : std::vector<std::pair<int64_t, int64_t>>{{1, 28}, {3, 32}, {3, 64}}) {
    std::vector<float> parts(static_cast<size_t>(c * hw * hw), kBackground);
    for (int k = 0; k < 4; ++k) {
      apply_trigger(parts.data(), c, hw, hw, make_trigger("dba:" + std::to_string(k), c, hw, hw));
    }
    EXPECT_EQ(triggered("dba", c, hw, hw), parts) << hw;
    EXPECT_EQ(triggered("dba-global", c, hw, hw), parts) << hw;
  }
  // The 28-pixel union is exactly BapFL's pattern.
  EXPECT_EQ(triggered("dba", 1, 28, 28), triggered("bapfl", 1, 28, 28));
  EXPECT_EQ(make_trigger("dba", 3, 32, 32).pixels.size(), 24u);
}

TEST(Triggers, SquareIsTenPercentAtDistanceOne) {
  expect_trigger("square", 3, 32, 32, block(kAll, {28, 29, 30}, {28, 29, 30}));
  expect_trigger("square", 1, 28, 28, block(kAll, {25, 26}, {25, 26}));
  expect_trigger("square", 3, 64, 64, block(kAll, {57, 58, 59, 60, 61, 62}, {57, 58, 59, 60, 61, 62}));
}

TEST(Triggers, GridCopiesFederatedScopeValues) {
  // _gridTriger: (H-1,W-1)=255 (H-1,W-2)=0 (H-1,W-3)=255 / (H-2,*)= 0 255 0 / (H-3,W-1)=255, rest 0.
  const std::vector<Expected> grid = {
      {kAll, 29, 29, 0.0f}, {kAll, 29, 30, 0.0f}, {kAll, 29, 31, 1.0f}, {kAll, 30, 29, 0.0f}, {kAll, 30, 30, 1.0f},
      {kAll, 30, 31, 0.0f}, {kAll, 31, 29, 1.0f}, {kAll, 31, 30, 0.0f}, {kAll, 31, 31, 1.0f},
  };
  expect_trigger("grid", 3, 32, 32, grid);
  std::vector<Expected> grid28 = grid;
  for (Expected& p : grid28) p.row -= 4, p.col -= 4;
  expect_trigger("grid", 1, 28, 28, grid28);
}

TEST(Triggers, EveryNameResolvesOnCifarAndMnistShapes) {
  for (const std::string& name : trigger_names()) {
    for (const auto& [c, hw] : std::vector<std::pair<int64_t, int64_t>>{{1, 28}, {3, 32}}) {
      const Trigger t = make_trigger(name, c, hw, hw);
      EXPECT_EQ(t.name, name);
      EXPECT_FALSE(t.pixels.empty()) << name;
      EXPECT_EQ(t.space, name == "spmc" ? TriggerSpace::kNormalized : TriggerSpace::kRaw) << name;
    }
  }
}

TEST(Triggers, Errors) {
  expect_error([] { make_trigger("badnets", 3, 32, 32); },
               {"unknown trigger 'badnets'", "spmc", "fedcpa", "bapfl", "dba-global", "dba:3", "square", "grid"});
  expect_error([] { make_trigger("dba:4", 3, 32, 32); }, {"DBA part 4 out of range 0..3"});
  expect_error([] { make_trigger("dba:-1", 3, 32, 32); }, {"out of range 0..3"});
  expect_error([] { make_trigger("dba:x", 3, 32, 32); }, {"integer 0..3"});
  expect_error([] { make_trigger("dba:", 3, 32, 32); }, {"integer 0..3"});
  expect_error([] { make_trigger("dba", 3, 30, 30); }, {"no DBA geometry", "height 30"});
  expect_error([] { make_trigger("fedcpa", 3, 4, 4); }, {"does not fit a 3x4x4 image"});
  expect_error([] { make_trigger("spmc", 1, 2, 8); }, {"does not fit a 1x2x8 image", "row 2"});
  expect_error([] { make_trigger("bapfl", 1, 28, 8); }, {"does not fit", "col 8"});
  expect_error([] { make_trigger("dba:3", 3, 32, 12); }, {"does not fit", "col 12"});
  expect_error([] { make_trigger("square", 1, 9, 9); }, {"H, W >= 10"});
  expect_error([] { make_trigger("grid", 1, 2, 2); }, {"does not fit"});
  expect_error([] { make_trigger("spmc", 0, 32, 32); }, {"bad image shape"});
  const Trigger t = make_trigger("fedcpa", 3, 32, 32);
  std::vector<float> image(28 * 28);
  expect_error([&] { apply_trigger(image.data(), 1, 28, 28, t); }, {"made for 3x32x32", "image is 1x28x28"});
}

TEST(Triggers, SpaceAndTheShapeEachSpaceMeets) {
  EXPECT_EQ(trigger_space("spmc"), TriggerSpace::kNormalized);
  for (const char* name : {"fedcpa", "bapfl", "dba", "dba:1", "square", "grid"})
    EXPECT_EQ(trigger_space(name), TriggerSpace::kRaw) << name;
  // SPMC's digit pipeline: raw triggers meet the stored 1x28x28, normalised ones the 3x32x32 output.
  Dataset d;
  d.name = "digits-28";
  d.channels = 1, d.height = 28, d.width = 28, d.num_classes = 10;
  d.mean = {0.1307f}, d.std = {0.3081f};
  TransformSpec spec;
  spec.resize = 32;
  spec.replicate_channels = 3;
  const SampleShape raw = trigger_stage_shape(d, spec, TriggerSpace::kRaw);
  const SampleShape normalised = trigger_stage_shape(d, spec, TriggerSpace::kNormalized);
  EXPECT_EQ((std::vector<int64_t>{raw.channels, raw.height, raw.width}), (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ((std::vector<int64_t>{normalised.channels, normalised.height, normalised.width}),
            (std::vector<int64_t>{3, 32, 32}));
}
