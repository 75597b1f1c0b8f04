// BatchLoader and normalize_into: see loader.h for the contract.
#include "data/loader.h"

#include <algorithm>
#include <utility>

#include "tensor/error.h"

namespace bastion {
namespace {

// A poison trigger must match the image at the step where it is applied (transforms.h steps 2 and 8).
void check_trigger_fits(const Dataset& d, const TransformSpec& spec, const Trigger& trigger) {
  const bool raw = trigger.space == TriggerSpace::kRaw;
  const SampleShape shape = trigger_stage_shape(d, spec, trigger.space);
  BASTION_CHECK(trigger.channels == shape.channels && trigger.height == shape.height && trigger.width == shape.width,
                "BatchLoader: poison trigger '", trigger.name, "' was made for ", trigger.channels, "x", trigger.height,
                "x", trigger.width, " but its ", raw ? "raw" : "normalised", " step sees ", shape.channels, "x",
                shape.height, "x", shape.width, " images");
}

}  // namespace

void normalize_into(float* out, const Dataset& d, int64_t index) {
  BASTION_CHECK(0 <= index && index < d.size(), "normalize_into: index ", index, " out of range for dataset '", d.name,
                "' of ", d.size(), " samples");
  BASTION_CHECK(static_cast<int64_t>(d.mean.size()) == d.channels && static_cast<int64_t>(d.std.size()) == d.channels,
                "normalize_into: dataset '", d.name, "' has ", d.channels, " channels but ", d.mean.size(),
                " means and ", d.std.size(), " stds");
  const int64_t plane = d.height * d.width;
  if (d.is_float()) {
    const float* values = d.values.data() + index * d.sample_numel();
    for (int64_t c = 0; c < d.channels; ++c) {
      const float mean = d.mean[c], std = d.std[c];
      for (int64_t i = 0; i < plane; ++i) out[c * plane + i] = (values[c * plane + i] - mean) / std;
    }
    return;
  }
  const uint8_t* pixels = d.pixels.data() + index * d.sample_numel();
  for (int64_t c = 0; c < d.channels; ++c) {
    // Same float operations as torchvision's ToTensor (divide by 255) then Normalize (subtract, divide),
    // rounded the same way, so inputs match PyTorch's float32 values.
    const float mean = d.mean[c], std = d.std[c];
    for (int64_t i = 0; i < plane; ++i)
      out[c * plane + i] = (static_cast<float>(pixels[c * plane + i]) / 255.0f - mean) / std;
  }
}

BatchLoader::BatchLoader(const Dataset& data, int64_t batch_size, bool shuffle, uint64_t seed,
                         std::vector<int64_t> indices, bool drop_last)
    : data_(data), batch_size_(batch_size), shuffle_(shuffle), seed_(seed), drop_last_(drop_last),
      indices_(std::move(indices)) {
  BASTION_CHECK(batch_size > 0, "BatchLoader: batch_size must be positive, got ", batch_size);
  check_dataset_layout(data);  // labels were checked once, at load time
  if (indices_.empty()) {
    indices_.resize(static_cast<size_t>(data.size()));
    for (int64_t i = 0; i < data.size(); ++i) indices_[i] = i;
  }
  for (size_t k = 0; k < indices_.size(); ++k) {
    BASTION_CHECK(0 <= indices_[k] && indices_[k] < data.size(), "BatchLoader: indices[", k, "] = ", indices_[k],
                  " out of range for dataset '", data.name, "' of ", data.size(), " samples");
  }
  allocate_batches({data.channels, data.height, data.width});
  start_epoch(0);
}

// Buffers are sized here (constructor, set_transform); next() only hands out views of them. A subset
// smaller than one batch gets a buffer of its own size rather than batch_size rows.
void BatchLoader::allocate_batches(const SampleShape& shape) {
  const int64_t n = num_samples();
  const int64_t rows = std::min(batch_size_, n);
  if (rows > 0) {
    x_full_ = Tensor::empty({rows, shape.channels, shape.height, shape.width});
    y_full_ = LabelTensor(rows);
  }
  const int64_t partial = n % batch_size_;
  if (partial > 0) {
    x_partial_ = x_full_.slice_rows(0, partial);
    y_partial_ = LabelTensor(partial);
  }
}

void BatchLoader::start_epoch(int64_t epoch) {
  order_ = indices_;
  cursor_ = 0;
  const Generator epoch_stream = Generator(seed_).fork(static_cast<uint64_t>(epoch));
  augmentation_ = epoch_stream.fork(kAugmentationStream);
  if (!shuffle_) return;
  Generator gen = epoch_stream;
  for (size_t i = order_.size(); i > 1; --i) {
    std::swap(order_[i - 1], order_[gen.below(i)]);
  }
}

void BatchLoader::set_transform(const TransformSpec& spec) {
  const SampleShape shape = transformed_shape(data_, spec);  // throws before anything changes
  if (poisoned_) check_trigger_fits(data_, spec, trigger_);
  transform_ = spec;
  transformed_ = true;
  allocate_batches(shape);
  scratch_.assign(static_cast<size_t>(transform_scratch_numel(data_, transform_)), 0.0f);
}

void BatchLoader::set_poison(const PoisonSpec& poison) {
  check_label_override(poison.label_override);  // throws before anything changes
  if (poison.trigger == nullptr) {
    BASTION_CHECK(poison.per_batch == 0 && poison.sample_mask.empty(),
                  "BatchLoader::set_poison: per_batch or sample_mask given without a trigger");
    poisoned_ = false;
    per_batch_ = 0;
    sample_mask_.clear();
    label_override_ = poison.label_override;
    return;
  }
  BASTION_CHECK(0 <= poison.target && poison.target < data_.num_classes, "BatchLoader::set_poison: target ",
                poison.target, " out of range for dataset '", data_.name, "' of ", data_.num_classes, " classes");
  BASTION_CHECK(poison.per_batch >= 0, "BatchLoader::set_poison: per_batch must be >= 0, got ", poison.per_batch);
  BASTION_CHECK(poison.sample_mask.empty() || static_cast<int64_t>(poison.sample_mask.size()) == data_.size(),
                "BatchLoader::set_poison: sample_mask has ", poison.sample_mask.size(), " entries but dataset '",
                data_.name, "' has ", data_.size(), " samples");
  check_trigger_fits(data_, transform_, *poison.trigger);
  trigger_ = *poison.trigger;
  target_ = poison.target;
  per_batch_ = poison.per_batch;
  sample_mask_ = poison.sample_mask;
  label_override_ = poison.label_override;
  poisoned_ = true;
  scratch_.assign(static_cast<size_t>(transform_scratch_numel(data_, transform_)), 0.0f);
}

void BatchLoader::check_label_override(const std::vector<int32_t>& overrides) const {
  if (overrides.empty()) return;
  BASTION_CHECK(static_cast<int64_t>(overrides.size()) == data_.size(), "BatchLoader::set_poison: label_override has ",
                overrides.size(), " entries but dataset '", data_.name, "' has ", data_.size(), " samples");
  for (size_t i = 0; i < overrides.size(); ++i) {
    BASTION_CHECK(overrides[i] < data_.num_classes, "BatchLoader::set_poison: label_override[", i, "] = ", overrides[i],
                  " out of range for dataset '", data_.name, "' of ", data_.num_classes, " classes");
  }
}

// The label a sample is handed out with: the trigger's target, else its override, else its own.
int32_t BatchLoader::label_of(int64_t index, bool trigger_poisoned) const {
  if (trigger_poisoned) return target_;
  if (!label_override_.empty() && label_override_[index] >= 0) return label_override_[index];
  return data_.labels[index];
}

// The transform/poison path of next(): rows [0, n) of the batch starting at cursor_.
void BatchLoader::fill_transformed(float* x, int32_t* y, int64_t n) {
  const int64_t numel = transformed_shape(data_, transform_).numel();
  for (int64_t r = 0; r < n; ++r) {
    const int64_t index = order_[cursor_ + r];
    const bool poison = poisoned_ && (r < per_batch_ || (!sample_mask_.empty() && sample_mask_[index] != 0));
    Generator rng = augment_once_ ? augment_once_->fork(static_cast<uint64_t>(index))
                                  : augmentation_.fork(static_cast<uint64_t>(cursor_ + r));
    transform_sample_into(x + r * numel, data_, index, transform_, poison ? &trigger_ : nullptr, rng, scratch_.data());
    y[r] = label_of(index, poison);
  }
}

bool BatchLoader::next(Tensor& x, LabelTensor& y) {
  const int64_t n = std::min(batch_size_, num_samples() - cursor_);
  if (n <= 0 || (drop_last_ && n < batch_size_)) return false;
  const bool full = n == batch_size_;
  const Tensor& xb = full ? x_full_ : x_partial_;
  const LabelTensor& yb = full ? y_full_ : y_partial_;
  if (transformed_ || poisoned_) {
    fill_transformed(xb.data(), yb.data(), n);
  } else {
    const int64_t numel = data_.sample_numel();
    for (int64_t r = 0; r < n; ++r) {
      const int64_t index = order_[cursor_ + r];
      normalize_into(xb.data() + r * numel, data_, index);
      yb[r] = label_of(index, /*trigger_poisoned=*/false);
    }
  }
  cursor_ += n;
  x = xb;
  y = yb;
  return true;
}

int64_t BatchLoader::batches_per_epoch() const {
  const int64_t n = num_samples();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

}  // namespace bastion
