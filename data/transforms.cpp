// Sample transforms: see transforms.h for the pipeline, the draw order and the PyTorch equivalents.
// The image moves between two halves of a scratch buffer (read → resize → crop), is flipped in place,
// and the final normalisation writes straight into `out`, so one sample costs no allocation.
#include "data/transforms.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "data/triggers.h"
#include "tensor/error.h"

namespace bastion {
namespace {

// Step 1: the stored sample in [0, 1] units. `pixels / 255.0f` is the float division torchvision's
// ToTensor performs, and the one normalize_into performs, so the identity pipeline matches it exactly.
void read_sample(float* dst, const Dataset& d, int64_t index) {
  BASTION_CHECK(0 <= index && index < d.size(), "transform_sample_into: index ", index, " out of range for dataset '",
                d.name, "' of ", d.size(), " samples");
  const int64_t numel = d.sample_numel();
  if (d.is_float()) {
    std::copy_n(d.values.data() + index * numel, numel, dst);
    return;
  }
  const uint8_t* pixels = d.pixels.data() + index * numel;
  for (int64_t i = 0; i < numel; ++i) dst[i] = static_cast<float>(pixels[i]) / 255.0f;
}

// Source index and weight of one output coordinate, computed as PyTorch's CPU upsample_bilinear2d does
// (float arithmetic, negative source positions clamped to 0, the upper neighbour clamped to the edge).
struct LinearTap {
  int64_t i0, i1;
  float w0, w1;
};

LinearTap linear_tap(int64_t dst, int64_t in_size, int64_t out_size) {
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  const float src = std::max(scale * (static_cast<float>(dst) + 0.5f) - 0.5f, 0.0f);
  const int64_t i0 = static_cast<int64_t>(src);
  const float w1 = std::clamp(src - static_cast<float>(i0), 0.0f, 1.0f);
  return {i0, i0 < in_size - 1 ? i0 + 1 : i0, 1.0f - w1, w1};
}

// Step 3: (C, H, W) → (C, OH, OW), bilinear with half-pixel centres (align_corners=False). The column taps
// are the same for every row and channel, so they are computed once (they were once per pixel: the resize
// was most of SPMC's augmentation, itself 11 % of a FedAvg-type round of SPMC Table 2; bench/RESULTS.md).
void resize_bilinear(float* dst, const float* src, int64_t channels, int64_t height, int64_t width, int64_t out_height,
                     int64_t out_width) {
  std::vector<LinearTap> columns(static_cast<size_t>(out_width));
  for (int64_t col = 0; col < out_width; ++col) columns[col] = linear_tap(col, width, out_width);
  for (int64_t c = 0; c < channels; ++c) {
    const float* plane = src + c * height * width;
    float* out = dst + c * out_height * out_width;
    for (int64_t r = 0; r < out_height; ++r) {
      const LinearTap y = linear_tap(r, height, out_height);
      const float* row0 = plane + y.i0 * width;
      const float* row1 = plane + y.i1 * width;
      for (int64_t col = 0; col < out_width; ++col) {
        const LinearTap& x = columns[col];
        out[r * out_width + col] =
            y.w0 * (x.w0 * row0[x.i0] + x.w1 * row0[x.i1]) + y.w1 * (x.w0 * row1[x.i0] + x.w1 * row1[x.i1]);
      }
    }
  }
}

// numpy/torch 'reflect': the edge is the mirror, not repeated. Valid for |overshoot| < size.
int64_t reflect_index(int64_t i, int64_t size) {
  if (i < 0) return -i;
  if (i >= size) return 2 * (size - 1) - i;
  return i;
}

// Step 4: output (r, c) = padded input (r + top, c + left), i.e. input (r + top - pad, c + left - pad),
// zero or reflected outside. The padded image is never materialised.
void crop_padded(float* dst, const float* src, int64_t channels, int64_t height, int64_t width, int64_t pad,
                 PadMode mode, int64_t top, int64_t left) {
  for (int64_t c = 0; c < channels; ++c) {
    const float* plane = src + c * height * width;
    float* out = dst + c * height * width;
    for (int64_t r = 0; r < height; ++r) {
      int64_t sr = r + top - pad;
      float* out_row = out + r * width;
      if (mode == PadMode::kZero) {  // zeros, the row's inside part copied, zeros
        const int64_t shift = left - pad;
        const int64_t first = std::clamp<int64_t>(-shift, 0, width),
                      end = std::clamp<int64_t>(width - shift, first, width);
        if (sr < 0 || sr >= height) {
          std::fill(out_row, out_row + width, 0.0f);
          continue;
        }
        std::fill(out_row, out_row + first, 0.0f);
        std::copy(plane + sr * width + first + shift, plane + sr * width + end + shift, out_row + first);
        std::fill(out_row + end, out_row + width, 0.0f);
        continue;
      }
      sr = reflect_index(sr, height);
      for (int64_t col = 0; col < width; ++col)
        out_row[col] = plane[sr * width + reflect_index(col + left - pad, width)];
    }
  }
}

// Step 5, in place.
void flip_horizontal(float* image, int64_t channels, int64_t height, int64_t width) {
  for (int64_t row = 0; row < channels * height; ++row) std::reverse(image + row * width, image + (row + 1) * width);
}

// Steps 6 and 7 together: output channel c reads input channel c (or 0 when replicating) and that
// channel's mean/std. Normalising a copy equals copying a normalised value, so the order is moot.
void normalize_channels(float* out, const float* src, int64_t out_channels, int64_t in_channels, int64_t plane,
                        const Dataset& d) {
  for (int64_t c = 0; c < out_channels; ++c) {
    const int64_t from = in_channels == out_channels ? c : 0;
    const float mean = d.mean[from], std = d.std[from];
    const float* in = src + from * plane;
    for (int64_t i = 0; i < plane; ++i) out[c * plane + i] = (in[i] - mean) / std;
  }
}

void check_trigger_shape(const Trigger& trigger, int64_t channels, int64_t height, int64_t width, const char* step) {
  BASTION_CHECK(trigger.channels == channels && trigger.height == height && trigger.width == width,
                "transform_sample_into: trigger '", trigger.name, "' was made for ", trigger.channels, "x",
                trigger.height, "x", trigger.width, " but the image at the ", step, " step is ", channels, "x", height,
                "x", width);
}

}  // namespace

TransformSpec default_train_transform(const std::string& dataset_name) {
  TransformSpec spec;
  // SPEC §2 is the contract here: crop + flip for CIFAR, SVHN and TinyImageNet, even though no seed
  // paper's code flips SVHN (docs/decisions.md); an experiment config can turn the flip off.
  if (dataset_name == "cifar10" || dataset_name == "cifar100" || dataset_name == "tinyimagenet" ||
      dataset_name == "svhn") {
    spec.crop_padding = 4;
    spec.horizontal_flip = true;
  }
  return spec;
}

SampleShape transformed_shape(const Dataset& d, const TransformSpec& spec) {
  BASTION_CHECK(d.channels > 0 && d.height > 0 && d.width > 0, "transform: dataset '", d.name,
                "' has an empty sample shape ", d.channels, "x", d.height, "x", d.width);
  BASTION_CHECK(spec.resize >= 0 && spec.crop_padding >= 0 && spec.replicate_channels >= 0, "transform: resize (",
                spec.resize, "), crop_padding (", spec.crop_padding, ") and replicate_channels (",
                spec.replicate_channels, ") must be >= 0");
  BASTION_CHECK(spec.replicate_channels == 0 || d.channels == 1,
                "transform: replicate_channels = ", spec.replicate_channels, " needs a 1-channel set, but '", d.name,
                "' has ", d.channels);
  BASTION_CHECK(static_cast<int64_t>(d.mean.size()) == d.channels && static_cast<int64_t>(d.std.size()) == d.channels,
                "transform: dataset '", d.name, "' has ", d.channels, " channels but ", d.mean.size(), " means and ",
                d.std.size(), " stds");
  SampleShape shape{d.channels, d.height, d.width};
  if (spec.replicate_channels > 0) shape.channels = spec.replicate_channels;
  if (spec.resize > 0) shape.height = shape.width = spec.resize;
  BASTION_CHECK(spec.pad_mode != PadMode::kReflect || spec.crop_padding < std::min(shape.height, shape.width),
                "transform: reflect padding ", spec.crop_padding, " must be smaller than the image (", shape.height,
                "x", shape.width, ")");
  return shape;
}

SampleShape trigger_stage_shape(const Dataset& d, const TransformSpec& spec, TriggerSpace space) {
  return space == TriggerSpace::kRaw ? SampleShape{d.channels, d.height, d.width} : transformed_shape(d, spec);
}

int64_t transform_scratch_numel(const Dataset& d, const TransformSpec& spec) {
  const SampleShape shape = transformed_shape(d, spec);
  // Two halves, each large enough for the image before and after the resize (channels not yet
  // replicated: replication happens on the way out).
  return 2 * d.channels * std::max(d.height * d.width, shape.height * shape.width);
}

void transform_sample_into(float* out, const Dataset& d, int64_t index, const TransformSpec& spec,
                           const Trigger* trigger, Generator& rng, float* scratch) {
  const SampleShape final_shape = transformed_shape(d, spec);
  const int64_t half = transform_scratch_numel(d, spec) / 2;
  float* cur = scratch;
  float* other = scratch + half;
  const int64_t channels = d.channels;
  int64_t height = d.height, width = d.width;

  read_sample(cur, d, index);
  if (trigger != nullptr && trigger->space == TriggerSpace::kRaw) {
    check_trigger_shape(*trigger, channels, height, width, "raw-trigger");
    apply_trigger(cur, channels, height, width, *trigger);
  }
  if (spec.resize > 0 && (spec.resize != height || spec.resize != width)) {
    resize_bilinear(other, cur, channels, height, width, spec.resize, spec.resize);
    std::swap(cur, other);
    height = width = spec.resize;
  }
  if (spec.crop_padding > 0) {
    const uint64_t positions = static_cast<uint64_t>(2 * spec.crop_padding + 1);
    const int64_t top = static_cast<int64_t>(rng.below(positions));
    const int64_t left = static_cast<int64_t>(rng.below(positions));
    crop_padded(other, cur, channels, height, width, spec.crop_padding, spec.pad_mode, top, left);
    std::swap(cur, other);
  }
  if (spec.horizontal_flip && rng.uniform() < 0.5) flip_horizontal(cur, channels, height, width);
  normalize_channels(out, cur, final_shape.channels, channels, height * width, d);
  if (trigger != nullptr && trigger->space == TriggerSpace::kNormalized) {
    check_trigger_shape(*trigger, final_shape.channels, final_shape.height, final_shape.width, "normalised-trigger");
    apply_trigger(out, final_shape.channels, final_shape.height, final_shape.width, *trigger);
  }
}

void transform_sample_into(float* out, const Dataset& d, int64_t index, const TransformSpec& spec,
                           const Trigger* trigger, Generator& rng) {
  std::vector<float> scratch(static_cast<size_t>(transform_scratch_numel(d, spec)));
  transform_sample_into(out, d, index, spec, trigger, rng, scratch.data());
}

void apply_normalization_preset(Dataset& d, const std::string& preset) {
  const size_t channels = static_cast<size_t>(d.channels);
  if (preset == "dataset") return;
  if (preset == "mnist") {
    d.mean.assign(channels, 0.1307f);
    d.std.assign(channels, 0.3081f);
  } else if (preset == "imagenet") {
    BASTION_CHECK(d.channels == 3, "normalisation preset 'imagenet' needs a 3-channel set, but '", d.name, "' has ",
                  d.channels, " channels");
    d.mean = {0.485f, 0.456f, 0.406f};
    d.std = {0.229f, 0.224f, 0.225f};
  } else if (preset == "half") {
    d.mean.assign(channels, 0.5f);
    d.std.assign(channels, 0.5f);
  } else if (preset == "none") {
    d.mean.assign(channels, 0.0f);
    d.std.assign(channels, 1.0f);
  } else {
    BASTION_FAIL("unknown normalisation preset '", preset, "'; valid presets: dataset, mnist, imagenet, half, none");
  }
}

}  // namespace bastion
