// Helpers shared by the transform tests (test_transforms.cpp) and the loader tests that use transforms
// (test_loader_transforms.cpp): pattern images with given normalisation, one sample through a transform,
// one sample normalised, CIFAR-10's normalisation constants.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "data/loader.h"
#include "data/transforms.h"
#include "data/triggers.h"
#include "tests/test_support.h"

namespace bastion::testing {

// Pattern images (tests/test_support.h) with the given per-channel mean/std.
inline Dataset image_set(int64_t n, int64_t channels, int64_t height, int64_t width, std::vector<float> mean,
                         std::vector<float> std, int64_t classes = 10) {
  return pattern_images(n, channels, height, width, classes, 256, std::move(mean), std::move(std));
}

inline std::vector<float> run(const Dataset& d, int64_t index, const TransformSpec& spec, const Trigger* trigger,
                              Generator rng) {
  std::vector<float> out(static_cast<size_t>(transformed_shape(d, spec).numel()), -99.0f);
  transform_sample_into(out.data(), d, index, spec, trigger, rng);
  return out;
}

inline std::vector<float> normalized(const Dataset& d, int64_t index) {
  std::vector<float> out(static_cast<size_t>(d.sample_numel()));
  normalize_into(out.data(), d, index);
  return out;
}

inline const std::vector<float> kCifarMean = {0.4914f, 0.4822f, 0.4465f}, kCifarStd = {0.2470f, 0.2435f, 0.2615f};

}  // namespace bastion::testing
