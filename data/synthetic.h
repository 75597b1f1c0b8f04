// synthetic: seeded, learnable image classification data with no files, for tests and smoke runs.
// - Each class k has a prototype image P_k, every pixel uniform in 0..255, drawn once from the seed.
// - A sample of class k is P_k plus independent N(0, noise^2) per pixel, rounded and clipped to 0..255.
//   Two prototypes differ by ~104 per pixel (RMS, 255/sqrt(6)), so with the default noise (32) and 64
//   pixels the classes barely overlap: a linear model separates them within an epoch.
// - Labels are balanced: sample i of a split is class i % classes before the split is shuffled, so class
//   counts differ by at most one.
// - Streams: prototypes from Generator(seed).fork(0), train samples fork(1), test samples fork(2); train
//   and test share the prototypes, and one split does not change when the other's size does.
// - float_values: store `values` = pixel / 255 (float) instead of `pixels`: the same samples as the uint8
//   set after the loader's 1/255 scaling, for code paths that take float sets (WISDM, digits).
// Deterministic: one spec (seed included) gives the same bytes on every machine.
#pragma once

#include <cstdint>

#include "data/dataset.h"

namespace bastion {

struct SyntheticSpec {
  int64_t train = 2000, test = 500;  // samples per split
  int64_t channels = 1, height = 8, width = 8;
  int64_t classes = 10;
  uint64_t seed = 0;
  double noise = 32.0;  // standard deviation of the per-pixel Gaussian noise, in pixel units (0..255)
  bool float_values = false;
};

// Both splits, named "synthetic", mean 0 and std 1 per channel (plain [0, 1] inputs; load_dataset replaces
// them with the training split's statistics). Throws on a non-positive shape or class count, negative
// split sizes, a negative or non-finite noise, or more than 2^31 values in all.
DatasetSplit make_synthetic(const SyntheticSpec& spec);

}  // namespace bastion
