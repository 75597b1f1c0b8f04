// Dataset: a whole classification set in contiguous memory, loaded once and then shared read-only by
// every client (clients hold index lists into it, never copies).
// - Image sets store raw uint8 pixels: `pixels` is N*C*H*W, 0..255, sample-major NCHW (the layout the
//   model's input tensor uses), and `values` is empty.
// - Sets whose samples are not 8-bit images (WISDM windows and features, the 8x8 digits) store float32
//   samples in `values` (N*C*H*W, already in the units documented by their reader) and `pixels` is
//   empty. `is_float()` tells which.
// - labels: N int32 in [0, num_classes). groups: per-sample group id (WISDM: the user), or empty.
// - mean/std: per channel, applied after scaling:  x = (raw * scale - mean[c]) / std[c], where
//   scale = 1/255 for pixels (torchvision's ToTensor + Normalize) and 1 for values
//   (see data/loader.h normalize_into).
// Registered sets and their files are in the table in dataset.cpp; data/README.md has the recipe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/error.h"  // bastion::Error, thrown on every problem

namespace bastion {

struct Dataset {
  std::string name;  // registered name: "mnist", "cifar10", ...
  int64_t channels = 1, height = 0, width = 0, num_classes = 0;
  std::vector<uint8_t> pixels;           // image sets: N*C*H*W, raw 0..255
  std::vector<float> values;             // float sets: N*C*H*W (then pixels is empty)
  std::vector<int32_t> labels;           // N
  std::vector<int32_t> groups;           // N group ids (WISDM user) or empty
  std::vector<float> mean, std;          // per channel, applied after scaling (see above)
  std::vector<std::string> class_names;  // num_classes names when the files carry them, else empty

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t sample_numel() const { return channels * height * width; }
  bool is_float() const { return !values.empty(); }
};

// train and test. A set without an official test split (wisdm, digits) leaves `test` empty (size 0,
// same C/H/W/classes); experiments then use per-client test splits (data/partition.h).
struct DatasetSplit {
  Dataset train, test;
};

// The registered dataset names, in table order:
// mnist, fmnist, emnist, emnist-letters, cifar10, cifar100, svhn, tinyimagenet, wisdm, wisdm-features,
// digits, synthetic.
std::vector<std::string> dataset_names();

// One line per registered set for `bastion list datasets`: name, shape, classes, where its files are
// looked for.
std::vector<std::string> dataset_descriptions();

// Finds the folder holding the dataset's files. Roots, in order: data_dir (the --data-dir option; skipped
// when empty), $BASTION_DATA, ./data, /usr/share/datasets. In each root it tries root/<subfolder> for
// each of the set's subfolder names and then (explicit --data-dir only) root itself; a folder qualifies
// when it holds the set's probe file. Throws listing every place looked and the file looked for.
// `synthetic` needs no files and returns "".
std::string find_dataset_dir(const std::string& name, const std::string& data_dir);

// Loads train and test splits of `name` (throws listing the valid names when unknown). Checks that each
// split's sample and label counts agree, that labels are < num_classes and that both splits share C, H, W.
DatasetSplit load_dataset(const std::string& name, const std::string& data_dir);

// Checks the invariants every loader must establish (sizes of pixels/values/labels/groups/mean/std,
// labels in range); throws naming the dataset and the broken one. load_dataset calls it on both splits.
void validate_dataset(const Dataset& d);

// The O(1) part of validate_dataset (shape, array sizes, mean/std), without the pass over every label:
// for consumers built per client and round (BatchLoader) on a set load_dataset already validated.
void check_dataset_layout(const Dataset& d);

// Concatenates train then test into one set (FedFSA pools both before partitioning): sample i < a.size()
// is a's sample i, the rest are b's. Both must share name, C, H, W, classes and storage kind.
Dataset concat_datasets(const Dataset& a, const Dataset& b);

// The subset of `d` at `indices`, copied in that order (the server's held-out split, tests).
Dataset subset_dataset(const Dataset& d, const std::vector<int64_t>& indices);

}  // namespace bastion
