// Dataset: a whole image-classification set in contiguous memory, loaded once and then shared read-only
// by every client (clients hold index lists into it, never copies).
// - pixels: N*C*H*W uint8, raw 0..255, sample-major NCHW (the layout the model's input tensor uses).
// - labels: N int32 in [0, num_classes).
// - mean/std: per channel, applied after scaling pixels to [0, 1]:  x = (pixel/255 - mean[c]) / std[c]
//   (torchvision's ToTensor + Normalize; see data/loader.h normalize_into).
// Registered sets and their files are in the table in dataset.cpp; data/README.md has the recipe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/error.h"  // bastion::Error, thrown on every problem

namespace bastion {

struct Dataset {
  std::string name;  // "mnist", "fmnist"
  int64_t channels = 1, height = 0, width = 0, num_classes = 0;
  std::vector<uint8_t> pixels;   // N*C*H*W, raw 0..255
  std::vector<int32_t> labels;   // N
  std::vector<float> mean, std;  // per channel, applied after scaling pixels to [0,1]

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t sample_numel() const { return channels * height * width; }
};

struct DatasetSplit {
  Dataset train, test;
};

// The registered dataset names, in table order: {"mnist", "fmnist"}.
std::vector<std::string> dataset_names();

// Finds the folder holding the dataset's files. Roots, in order: data_dir (the --data-dir option; skipped
// when empty), $BASTION_DATA, ./data, /usr/share/datasets. In each root it tries root/<subfolder>
// (mnist -> "mnist", fmnist -> "fashion-mnist") and then root itself; a folder qualifies when it holds
// the training-images file, plain or .gz. Throws listing every place looked and the file looked for.
std::string find_dataset_dir(const std::string& name, const std::string& data_dir);

// Loads train and test splits of `name` (throws listing the valid names when unknown). Checks that each
// split's image and label counts agree, that labels are < num_classes and that both splits share C, H, W.
DatasetSplit load_dataset(const std::string& name, const std::string& data_dir);

}  // namespace bastion
