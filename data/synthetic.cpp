// synthetic: see synthetic.h for the generative model, the streams and the guarantees.
#include "data/synthetic.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "data/formats.h"
#include "tensor/error.h"
#include "tensor/random.h"

namespace bastion {
namespace {

constexpr int64_t kMaxValues = int64_t{1} << 31;  // a spec asking for more is a typo, not a test set

// Balanced labels (i % classes), shuffled by Fisher-Yates so classes are interleaved.
std::vector<int32_t> balanced_labels(int64_t n, int64_t classes, Generator& rng) {
  std::vector<int32_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<int32_t>(i % classes);
  for (int64_t i = n - 1; i > 0; --i) std::swap(labels[i], labels[rng.below(static_cast<uint64_t>(i + 1))]);
  return labels;
}

Dataset make_split(const SyntheticSpec& spec, const std::vector<float>& prototypes, int64_t n, Generator rng) {
  Dataset d;
  d.name = "synthetic";
  d.channels = spec.channels;
  d.height = spec.height;
  d.width = spec.width;
  d.num_classes = spec.classes;
  d.mean.assign(spec.channels, 0.0f);
  d.std.assign(spec.channels, 1.0f);
  d.labels = balanced_labels(n, spec.classes, rng);
  const int64_t numel = d.sample_numel();
  std::vector<uint8_t> pixels(static_cast<size_t>(n * numel));
  for (int64_t i = 0; i < n; ++i) {
    const float* prototype = prototypes.data() + d.labels[i] * numel;
    for (int64_t j = 0; j < numel; ++j) {
      const double v = std::round(prototype[j] + spec.noise * rng.normal());
      pixels[i * numel + j] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
    }
  }
  if (spec.float_values) {
    d.values.resize(pixels.size());
    for (size_t k = 0; k < pixels.size(); ++k) d.values[k] = pixels[k] / 255.0f;
  } else {
    d.pixels = std::move(pixels);
  }
  return d;
}

}  // namespace

DatasetSplit make_synthetic(const SyntheticSpec& spec) {
  BASTION_CHECK(spec.channels > 0 && spec.height > 0 && spec.width > 0 && spec.classes > 0, "make_synthetic: shape ",
                spec.channels, "x", spec.height, "x", spec.width, " and classes ", spec.classes, " must be positive");
  BASTION_CHECK(spec.train >= 0 && spec.test >= 0, "make_synthetic: split sizes must be >= 0, got train ", spec.train,
                ", test ", spec.test);
  BASTION_CHECK(std::isfinite(spec.noise) && spec.noise >= 0, "make_synthetic: noise must be finite and >= 0, got ",
                spec.noise);
  const __int128 samples = static_cast<__int128>(spec.train) + spec.test + spec.classes;  // prototypes too
  const __int128 values = samples * spec.channels * spec.height * spec.width;
  BASTION_CHECK(values <= kMaxValues, "make_synthetic: ", spec.train, "+", spec.test, " samples of ", spec.channels,
                "x", spec.height, "x", spec.width, " exceed ", kMaxValues, " values");
  const Generator root(spec.seed);
  Generator prototype_rng = root.fork(0);
  std::vector<float> prototypes(static_cast<size_t>(spec.classes * spec.channels * spec.height * spec.width));
  for (float& p : prototypes) p = static_cast<float>(prototype_rng.below(256));
  return {make_split(spec, prototypes, spec.train, root.fork(1)),
          make_split(spec, prototypes, spec.test, root.fork(2))};
}

DatasetSplit load_synthetic_default() { return make_synthetic(SyntheticSpec{}); }

}  // namespace bastion
