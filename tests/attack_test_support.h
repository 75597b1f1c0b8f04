// Helpers shared by the attack tests (test_fl_attacks.cpp: registry, upload attacks, BapFL;
// test_fl_attacks_data.cpp: the data attacks and the loader's label overrides): pattern images, one
// unshuffled epoch row by row, the rows a trigger changed, and a data attack's context.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "data/loader.h"
#include "data/triggers.h"
#include "fl/attacks/attack.h"
#include "tests/test_support.h"

namespace bastion::attack_testing {

inline Dataset image_set(int64_t n, int64_t channels, int64_t height, int64_t width, int64_t classes = 10) {
  return testing::pattern_images(n, channels, height, width, classes, /*modulus=*/250);
}

inline std::vector<float> clean_image(const Dataset& d, int64_t index) {
  std::vector<float> out(static_cast<size_t>(d.sample_numel()));
  normalize_into(out.data(), d, index);
  return out;
}

inline std::vector<float> with_trigger(std::vector<float> image, const Dataset& d, const Trigger& trigger) {
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

inline std::vector<Row> unshuffled_epoch(BatchLoader& loader, const std::vector<int64_t>& indices) {
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
inline std::set<int64_t> poisoned_rows(const std::vector<Row>& rows, const Dataset& d, const Trigger& trigger,
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

inline std::vector<int64_t> all_indices(int64_t n) {
  std::vector<int64_t> indices(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) indices[i] = i;
  return indices;
}

inline DataAttackContext data_context(const Dataset& d, const std::vector<int64_t>& indices, uint64_t round_seed,
                                      uint64_t client_seed = 77, int64_t attacker_index = 0) {
  return DataAttackContext{
      d, indices, attacker_index, /*client=*/3, /*round=*/1, Generator(round_seed), Generator(client_seed), nullptr};
}

// The context keeps a reference to the indices: a temporary would dangle once the statement ends.
inline DataAttackContext data_context(const Dataset& d, std::vector<int64_t>&& indices, uint64_t round_seed,
                                      uint64_t client_seed = 77, int64_t attacker_index = 0) = delete;

}  // namespace bastion::attack_testing
