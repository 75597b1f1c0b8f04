// BatchLoader: iterates a Dataset (or a subset given as indices into it) in batches of normalised
// float32 images, with seeded shuffling, filling tensors it preallocated once so the training loop does
// not allocate.
// - x: (B, C, H, W) float32, x = (pixel/255 - mean[c]) / std[c]; y: (B) int32. B = batch_size except for
//   the last partial batch (kept unless drop_last).
// - x and y are views of the loader's own buffers: the next call to next() overwrites them, so use a
//   batch before asking for the following one.
// - Shuffling: epoch k's order is a Fisher-Yates permutation drawn from Generator(seed).fork(k), so it
//   depends only on (seed, k) — not on how many epochs ran before, nor on thread scheduling.
// - The Dataset must outlive the loader (it is held by reference: one copy shared by all clients).
// PyTorch equivalent: DataLoader(Subset(ds, indices), batch_size, shuffle, drop_last) with ToTensor +
// Normalize(mean, std) (the order of a shuffled epoch differs: PyTorch uses its own generator).
#pragma once

#include <cstdint>
#include <vector>

#include "data/dataset.h"
#include "tensor/tensor.h"

namespace bastion {

// Writes sample `index` of `d` normalised into out[0, d.sample_numel()), layout (C, H, W). Used by the
// loader and by evaluation.
void normalize_into(float* out, const Dataset& d, int64_t index);

class BatchLoader {
 public:
  // indices: the samples to iterate, in their unshuffled order; empty means all of `data`.
  BatchLoader(const Dataset& data, int64_t batch_size, bool shuffle, uint64_t seed,
              std::vector<int64_t> indices = {}, bool drop_last = false);

  // Resets to the start of `epoch` (and reshuffles when shuffling). The constructor starts epoch 0.
  void start_epoch(int64_t epoch);

  // Fills x and y with the next batch; returns false (leaving them untouched) at the end of the epoch.
  bool next(Tensor& x, LabelTensor& y);

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
};

}  // namespace bastion
