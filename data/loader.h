// BatchLoader: iterates a Dataset (or a subset given as indices into it) in batches of normalised
// float32 images, with seeded shuffling, filling tensors it preallocated once so the training loop does
// not allocate.
// - x: (B, C, H, W) float32, x = (pixel/255 - mean[c]) / std[c] (with a transform: (B, C', H', W') from
//   transformed_shape); y: (B) int32. B = batch_size except for the last partial batch (kept unless
//   drop_last).
// - x and y are views of the loader's own buffers: the next call to next() overwrites them, so use a
//   batch before asking for the following one.
// - Shuffling: epoch k's order is a Fisher-Yates permutation drawn from Generator(seed).fork(k), so it
//   depends only on (seed, k) — not on how many epochs ran before, nor on thread scheduling.
// - The Dataset must outlive the loader (it is held by reference: one copy shared by all clients).
// - Optional transform (set_transform, data/transforms.h): every sample goes through
//   transform_sample_into with a Generator that depends only on (seed, epoch, position in the epoch):
//   Generator(seed).fork(epoch).fork(kAugmentationStream).fork(position). The same client therefore
//   sees the same augmentation whatever the thread count or the epochs run before. Without a transform
//   (and without poisoning) the loader uses normalize_into, as before.
// - Optional augmentation drawn once (set_augment_once): sample i's Generator is base.fork(i) for the
//   Dataset index i, the same in every epoch and every loader given the same base, so each sample keeps
//   one augmentation for the whole run (SPMC's code: its attackers train on a copy of their training set
//   made once, after the random train transform; IMPLEMENTATION-FACTS §2).
// - Optional poisoning (set_poison), for data attacks: triggers with a target label on some samples,
//   and/or per-sample label overrides (label flipping); see PoisonSpec below.
// PyTorch equivalent: DataLoader(Subset(ds, indices), batch_size, shuffle, drop_last) with ToTensor +
// Normalize(mean, std) (the order of a shuffled epoch differs: PyTorch uses its own generator).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "data/dataset.h"
#include "data/transforms.h"
#include "data/triggers.h"
#include "tensor/tensor.h"

namespace bastion {

// Writes sample `index` of `d` normalised into out[0, d.sample_numel()), layout (C, H, W). Used by the
// loader and by evaluation.
void normalize_into(float* out, const Dataset& d, int64_t index);

// Backdoor poisoning inside the loader. A sample is poisoned when
//   its position in the batch is < per_batch   (DBA, BapFL, pFedSAM: the first k of every batch; a last
//                                               batch shorter than k is poisoned whole, as in DBA), or
//   sample_mask[dataset index] != 0            (a fraction of the local data chosen by the caller:
//                                               SPMC, FedCPA; indexed by the sample's index in the Dataset).
// A poisoned sample gets the trigger in the trigger's space (raw: before augmentation; normalised:
// after, data/transforms.h) and its label replaced by `target`. The trigger must be made for the
// dataset's C×H×W (raw) or the transformed shape (normalised). The loader copies the trigger, so the
// pointer need only be valid during set_poison.
// Label overrides (label-flip attacks) need no trigger: a sample that is not trigger-poisoned and whose
// label_override entry is >= 0 gets that label instead of its own; its image is untouched. The trigger
// needs a target and wins over an override. A default PoisonSpec (no trigger, no overrides) turns all
// poisoning off.
struct PoisonSpec {
  const Trigger* trigger = nullptr;
  int32_t target = -1;
  int64_t per_batch = 0;
  std::vector<uint8_t> sample_mask;  // empty, or one entry per sample of the Dataset
  std::vector<int32_t>
      label_override{};  // empty, or one entry per dataset sample: >= 0 replaces that sample's label (label-flip attacks; no trigger)
};

class BatchLoader {
 public:
  // The fork of the epoch stream that seeds augmentation; the epoch stream itself draws the shuffle.
  static constexpr uint64_t kAugmentationStream = 0x61756721;

  // indices: the samples to iterate, in their unshuffled order; empty means all of `data`.
  BatchLoader(const Dataset& data, int64_t batch_size, bool shuffle, uint64_t seed, std::vector<int64_t> indices = {},
              bool drop_last = false);

  // Resets to the start of `epoch` (and reshuffles when shuffling). The constructor starts epoch 0.
  void start_epoch(int64_t epoch);

  // Fills x and y with the next batch; returns false (leaving them untouched) at the end of the epoch.
  // Allocates nothing (with or without transform and poisoning).
  bool next(Tensor& x, LabelTensor& y);

  // Runs `spec` on every sample from the next call to next() on. Reallocates the batch buffers once, to
  // (B, transformed_shape): batches handed out before share no storage with later ones. Throws when the
  // spec does not apply to the dataset, or when a poison trigger set earlier no longer fits.
  void set_transform(const TransformSpec& spec);

  // Turns backdoor poisoning and/or label overrides on (or off, with a default PoisonSpec); replaces
  // whatever an earlier call set. Throws on per_batch > 0 or a sample_mask without a trigger, a target
  // outside [0, num_classes), per_batch < 0, a mask or override list whose size is not the dataset's, an
  // override outside [0, num_classes) (negative entries = keep the label), or a trigger made for
  // another shape. Allocates (copies the mask and overrides); next() still does not.
  void set_poison(const PoisonSpec& poison);

  // From the next call to next() on, sample i (its Dataset index) is augmented with base.fork(i) in every
  // epoch instead of a Generator per (epoch, position): one augmentation per sample, fixed by `base`.
  // Changes nothing without a transform.
  void set_augment_once(const Generator& base) { augment_once_ = base; }

  int64_t batches_per_epoch() const;
  int64_t num_samples() const { return static_cast<int64_t>(indices_.size()); }
  int64_t batch_size() const { return batch_size_; }

 private:
  const Dataset& data_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  std::vector<int64_t> indices_;  // the subset in its given order
  std::vector<int64_t> order_;    // this epoch's order
  int64_t cursor_ = 0;            // position in order_ of the next batch's first sample
  Tensor x_full_, x_partial_;     // (batch_size, C, H, W) buffer and its view for the last partial batch
  LabelTensor y_full_, y_partial_;
  Generator augmentation_;                 // this epoch's augmentation stream; forked per position
  std::optional<Generator> augment_once_;  // set_augment_once: forked per Dataset index instead

  bool transformed_ = false;  // set_transform was called
  TransformSpec transform_;   // identity until set_transform
  bool poisoned_ = false;     // set_poison with a trigger
  Trigger trigger_;           // the loader's copy of the poison trigger
  int32_t target_ = -1;
  int64_t per_batch_ = 0;
  std::vector<uint8_t> sample_mask_;
  std::vector<int32_t> label_override_;  // empty or one per dataset sample (-1 = keep the label)
  std::vector<float> scratch_;           // transform_scratch_numel floats, sized by set_transform/set_poison

  void allocate_batches(const SampleShape& shape);
  void fill_transformed(float* x, int32_t* y, int64_t n);
  void check_label_override(const std::vector<int32_t>& overrides) const;
  int32_t label_of(int64_t index, bool trigger_poisoned) const;
};

}  // namespace bastion
