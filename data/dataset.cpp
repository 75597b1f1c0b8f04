// Dataset registry and loading: see dataset.h. One explicit table (kDatasets) lists every set; adding a
// set is one row here plus, for a new file format, a loader declared in data/formats.h (data/README.md).
#include "data/dataset.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "data/formats.h"
#include "data/idx.h"
#include "tensor/error.h"

namespace bastion {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxPresetChannels = 3;

struct DatasetInfo {
  const char* name;           // registered name (--dataset)
  const char* subfolders[3];  // folder names tried under a data root, in order (nullptr-terminated)
  const char* probe;          // a file (or folder) whose presence marks the set's folder
  int64_t num_classes;
  // Normalisation preset, per channel, after scaling to [0, 1]. channels_in_preset == 0 means the set
  // has no published preset: the mean/std of its training split are computed at load time.
  int channels_in_preset;
  float mean[kMaxPresetChannels], std[kMaxPresetChannels];
  DatasetSplit (*load)(const fs::path& dir);
  const char* description;
};

// Normalisation presets are the usual published statistics of each training set (IMPLEMENTATION-FACTS
// §§1–5): MNIST's from the torchvision example; Fashion-MNIST its training-set statistics; CIFAR-10 and
// CIFAR-100 as in SPMC's loaders; SVHN as FedCPA's loader; TinyImageNet the ImageNet constants (SPMC).
// A paper that uses other constants overrides them in its experiment config.
constexpr DatasetInfo kDatasets[] = {
    {"mnist",
     {"mnist"},
     "train-images-idx3-ubyte",
     10,
     1,
     {0.1307f},
     {0.3081f},
     load_idx_mnist_dir,
     "MNIST digits, 1x28x28, 60000/10000 (IDX)"},
    {"fmnist",
     {"fashion-mnist", "fmnist"},
     "train-images-idx3-ubyte",
     10,
     1,
     {0.2860f},
     {0.3530f},
     load_idx_mnist_dir,
     "Fashion-MNIST, 1x28x28, 60000/10000 (IDX)"},
    {"emnist",
     {"emnist", "emnist/gzip"},
     "emnist-byclass-train-images-idx3-ubyte",
     62,
     0,
     {},
     {},
     load_emnist_byclass_dir,
     "EMNIST byclass: digits, upper, lower; 1x28x28, 62 classes (IDX)"},
    {"emnist-letters",
     {"emnist", "emnist/gzip"},
     "emnist-letters-train-images-idx3-ubyte",
     26,
     0,
     {},
     {},
     load_emnist_letters_dir,
     "EMNIST letters, 1x28x28, 26 classes (IDX; labels 1..26 stored as 0..25)"},
    {"cifar10",
     {"cifar10/cifar-10-batches-bin", "cifar-10-batches-bin", "cifar10"},
     "data_batch_1.bin",
     10,
     3,
     {0.4914f, 0.4822f, 0.4465f},
     {0.2470f, 0.2435f, 0.2615f},
     load_cifar10_dir,
     "CIFAR-10, 3x32x32, 50000/10000 (binary version)"},
    {"cifar100",
     {"cifar100/cifar-100-binary", "cifar-100-binary", "cifar100"},
     "train.bin",
     100,
     3,
     {0.50708f, 0.48655f, 0.44092f},
     {0.26733f, 0.25644f, 0.27615f},
     load_cifar100_dir,
     "CIFAR-100 (fine labels), 3x32x32, 50000/10000 (binary version)"},
    {"svhn",
     {"svhn"},
     "train_32x32.mat",
     10,
     3,
     {0.4377f, 0.4438f, 0.4728f},
     {0.1980f, 0.2010f, 0.1970f},
     load_svhn_dir,
     "SVHN cropped digits, 3x32x32, 73257/26032 (train_32x32.mat, test_32x32.mat)"},
    {"tinyimagenet",
     {"tiny-imagenet-200", "tinyimagenet"},
     "wnids.txt",
     200,
     3,
     {0.485f, 0.456f, 0.406f},
     {0.229f, 0.224f, 0.225f},
     load_tinyimagenet_dir,
     "TinyImageNet, 3x64x64, 100000/10000 (train/<wnid>/images, val/ + val_annotations.txt)"},
    {"image-folder",
     {"image-folder"},
     "train",
     0,
     0,
     {},
     {},
     load_image_folder_dir,
     "any image tree: train/<class>/*.png|jpg and test/ (or val/) alike; classes = sorted folder names"},
    {"wisdm",
     {"wisdm"},
     "WISDM_ar_v1.1_raw.txt",
     6,
     0,
     {},
     {},
     load_wisdm_raw_dir,
     "WISDM v1.1 raw accelerometer, 3x1x200 windows, 6 activities, one group per user (no test split)"},
    {"wisdm-features",
     {"wisdm"},
     "WISDM_ar_v1.1_transformed.arff",
     6,
     0,
     {},
     {},
     load_wisdm_features_dir,
     "WISDM v1.1 transformed features (ARFF), 1x1x43, 6 activities, one group per user (no test split)"},
    {"digits",
     {"sklearn-digits", "digits"},
     "digits.csv",
     10,
     0,
     {},
     {},
     load_digits_dir,
     "scikit-learn 8x8 digits, 1x8x8, 1797 samples, values 0..16 scaled to [0,1] (no test split)"},
    {"synthetic",
     {},
     "",
     10,
     0,
     {},
     {},
     nullptr,
     "seeded synthetic images for tests, 1x8x8, 10 classes, 2000/500, no files"},
};

const DatasetInfo& dataset_info(const std::string& name) {
  for (const DatasetInfo& info : kDatasets)
    if (name == info.name) return info;
  std::ostringstream valid;
  for (const std::string& n : dataset_names()) valid << " " << n;
  BASTION_FAIL("unknown dataset '", name, "'; valid names:", valid.str());
}

// An explicit --data-dir is the only place looked: falling back to another copy (the system's
// Fashion-MNIST) when it lacked the set trained on data the user did not point to (issue 42 item 10).
std::vector<std::string> search_roots(const std::string& data_dir) {
  if (!data_dir.empty()) return {data_dir};
  std::vector<std::string> roots;
  if (const char* env = std::getenv("BASTION_DATA"); env != nullptr && *env != '\0') roots.push_back(env);
  roots.push_back("./data");
  roots.push_back("/usr/share/datasets");
  return roots;
}

// A probe is a file (plain or .gz) or, for image trees, a folder.
bool holds_probe(const fs::path& dir, const std::string& probe) {
  std::error_code ignored;
  return fs::exists(dir / probe, ignored) || fs::is_regular_file(dir / (probe + ".gz"), ignored);
}

// Per-channel mean and std of the training split, for sets without a published preset. Accumulated in
// double: 47M pixels summed in float would lose the low digits.
void compute_channel_stats(Dataset& d) {
  const int64_t plane = d.height * d.width;
  const double scale = d.is_float() ? 1.0 : 1.0 / 255.0;
  d.mean.assign(d.channels, 0.0f);
  d.std.assign(d.channels, 1.0f);
  if (d.size() == 0 || plane == 0) return;
  for (int64_t c = 0; c < d.channels; ++c) {
    double sum = 0.0, sum_sq = 0.0;
    for (int64_t n = 0; n < d.size(); ++n) {
      const int64_t base = (n * d.channels + c) * plane;
      for (int64_t i = 0; i < plane; ++i) {
        const double v = (d.is_float() ? d.values[base + i] : d.pixels[base + i]) * scale;
        sum += v;
        sum_sq += v * v;
      }
    }
    const double count = static_cast<double>(d.size() * plane);
    const double mean = sum / count;
    const double var = std::max(sum_sq / count - mean * mean, 0.0);
    d.mean[c] = static_cast<float>(mean);
    // A constant channel would divide by zero; std 1 leaves it merely centred.
    d.std[c] = var > 0.0 ? static_cast<float>(std::sqrt(var)) : 1.0f;
  }
}

void apply_normalisation(const DatasetInfo& info, DatasetSplit& split) {
  if (info.channels_in_preset == 0) {
    compute_channel_stats(split.train);
  } else {
    BASTION_CHECK(info.channels_in_preset == split.train.channels, "dataset '", info.name, "': preset has ",
                  info.channels_in_preset, " channels but the files hold ", split.train.channels);
    split.train.mean.assign(info.mean, info.mean + info.channels_in_preset);
    split.train.std.assign(info.std, info.std + info.channels_in_preset);
  }
  split.test.mean = split.train.mean;
  split.test.std = split.train.std;
}

void check_same_kind(const Dataset& a, const Dataset& b, const char* what) {
  // Storage kind is only comparable when both hold samples (an empty split has neither array).
  const bool same_storage = a.size() == 0 || b.size() == 0 || a.is_float() == b.is_float();
  BASTION_CHECK(a.channels == b.channels && a.height == b.height && a.width == b.width &&
                    a.num_classes == b.num_classes && same_storage,
                what, ": '", a.name, "' is ", a.channels, "x", a.height, "x", a.width, " with ", a.num_classes,
                " classes", a.is_float() ? " (float)" : " (uint8)", " but '", b.name, "' is ", b.channels, "x",
                b.height, "x", b.width, " with ", b.num_classes, " classes", b.is_float() ? " (float)" : " (uint8)");
}

}  // namespace

// ---- mnist / fmnist: four IDX files in one folder ----

namespace {
constexpr const char* kTrainImages = "train-images-idx3-ubyte";
constexpr const char* kTrainLabels = "train-labels-idx1-ubyte";
constexpr const char* kTestImages = "t10k-images-idx3-ubyte";
constexpr const char* kTestLabels = "t10k-labels-idx1-ubyte";

Dataset load_idx_split(const fs::path& dir, const char* images_file, const char* labels_file) {
  IdxImages images = read_idx_images((dir / images_file).string());
  Dataset d;
  d.labels = read_idx_labels((dir / labels_file).string(), 10);
  BASTION_CHECK(images.count == d.size(), dir.string(), ": ", images_file, " holds ", images.count, " images but ",
                labels_file, " holds ", d.size(), " labels");
  // An empty split is a damaged file, not a dataset: it evaluated to acc = 0 and trained nothing, exit 0.
  BASTION_CHECK(images.count > 0, dir.string(), ": ", images_file, " holds no images: the file is truncated or empty");
  d.channels = 1;
  d.height = images.rows;
  d.width = images.cols;
  d.num_classes = 10;
  d.pixels = std::move(images.pixels);
  return d;
}
}  // namespace

DatasetSplit load_idx_mnist_dir(const fs::path& dir) {
  return {load_idx_split(dir, kTrainImages, kTrainLabels), load_idx_split(dir, kTestImages, kTestLabels)};
}

// ---- the registry ----

std::vector<std::string> dataset_names() {
  std::vector<std::string> names;
  for (const DatasetInfo& info : kDatasets) names.push_back(info.name);
  return names;
}

std::vector<std::string> dataset_descriptions() {
  std::vector<std::string> lines;
  for (const DatasetInfo& info : kDatasets) {
    std::ostringstream line;
    line << info.name << ": " << info.description;
    if (info.subfolders[0] != nullptr) {
      line << "; folder";
      for (const char* sub : info.subfolders)
        if (sub != nullptr) line << " " << sub << "/";
      line << " holding " << info.probe;
    }
    lines.push_back(line.str());
  }
  return lines;
}

std::string find_dataset_dir(const std::string& name, const std::string& data_dir) {
  const DatasetInfo& info = dataset_info(name);
  if (info.load == nullptr) return "";  // generated, no files
  BASTION_CHECK(data_dir.empty() || fs::is_directory(data_dir), "--data-dir '", data_dir, "' is not a directory");
  std::ostringstream looked;
  for (const std::string& root : search_roots(data_dir)) {
    std::vector<fs::path> candidates;
    for (const char* sub : info.subfolders)
      if (sub != nullptr) candidates.push_back(fs::path(root) / sub);
    // Only an explicit --data-dir may hold the files directly: MNIST and Fashion-MNIST share file
    // names, so a shared root (e.g. $BASTION_DATA) holding one of them must not answer for the other.
    if (root == data_dir) candidates.push_back(root);
    for (const fs::path& dir : candidates) {
      if (holds_probe(dir, info.probe)) return dir.string();
      looked << "\n  " << dir.string();
    }
  }
  BASTION_FAIL("dataset '", name, "' not found: looked for ", info.probe, " (or ", info.probe, ".gz) in:", looked.str(),
               "\n(pass --data-dir or set BASTION_DATA)");
}

DatasetSplit load_dataset(const std::string& name, const std::string& data_dir) {
  const DatasetInfo& info = dataset_info(name);
  DatasetSplit split;
  std::string where = "(generated)";
  if (info.load == nullptr) {
    split = load_synthetic_default();
  } else {
    where = find_dataset_dir(name, data_dir);
    split = info.load(where);
  }
  split.train.name = split.test.name = info.name;
  if (info.num_classes > 0) {
    BASTION_CHECK(split.train.num_classes == info.num_classes, "dataset '", name, "' in ", where, ": files hold ",
                  split.train.num_classes, " classes, expected ", info.num_classes);
  }
  // A set without a test split still carries the train split's shape, so checks and models agree.
  if (split.test.size() == 0) {
    split.test.channels = split.train.channels;
    split.test.height = split.train.height;
    split.test.width = split.train.width;
    split.test.num_classes = split.train.num_classes;
    split.test.class_names = split.train.class_names;
  }
  BASTION_CHECK(split.train.size() > 0, "dataset '", name, "' in ", where, ": the training split is empty");
  apply_normalisation(info, split);
  validate_dataset(split.train);
  validate_dataset(split.test);
  check_same_kind(split.train, split.test, where.c_str());
  return split;
}

void validate_dataset(const Dataset& d) {
  check_dataset_layout(d);
  for (int64_t i = 0; i < d.size(); ++i) {
    BASTION_CHECK(0 <= d.labels[i] && d.labels[i] < d.num_classes, "dataset '", d.name, "': label ", d.labels[i],
                  " of sample ", i, " is outside [0, ", d.num_classes, ")");
  }
}

void check_dataset_layout(const Dataset& d) {
  const uint64_t expected = static_cast<uint64_t>(d.size() * d.sample_numel());
  BASTION_CHECK(d.channels > 0 && d.height > 0 && d.width > 0 && d.num_classes > 0, "dataset '", d.name,
                "': bad shape ", d.channels, "x", d.height, "x", d.width, " or classes ", d.num_classes);
  if (d.is_float()) {
    BASTION_CHECK(d.pixels.empty() && d.values.size() == expected, "dataset '", d.name, "' holds ", d.values.size(),
                  " float values (and ", d.pixels.size(), " pixels), expected ", expected);
  } else {
    BASTION_CHECK(d.pixels.size() == expected, "dataset '", d.name, "' holds ", d.pixels.size(),
                  " pixel bytes, expected ", d.size(), " samples of ", d.sample_numel());
  }
  BASTION_CHECK(d.groups.empty() || d.groups.size() == d.labels.size(), "dataset '", d.name, "' has ", d.groups.size(),
                " group ids for ", d.size(), " samples");
  BASTION_CHECK(static_cast<int64_t>(d.mean.size()) == d.channels && static_cast<int64_t>(d.std.size()) == d.channels,
                "dataset '", d.name, "' has ", d.channels, " channels but ", d.mean.size(), " means and ", d.std.size(),
                " stds");
}

Dataset concat_datasets(const Dataset& a, const Dataset& b) {
  check_same_kind(a, b, "concat_datasets");
  Dataset out = a;
  out.pixels.insert(out.pixels.end(), b.pixels.begin(), b.pixels.end());
  out.values.insert(out.values.end(), b.values.begin(), b.values.end());
  out.labels.insert(out.labels.end(), b.labels.begin(), b.labels.end());
  BASTION_CHECK(a.groups.empty() == b.groups.empty(), "concat_datasets: only one of '", a.name, "' and '", b.name,
                "' has group ids");
  out.groups.insert(out.groups.end(), b.groups.begin(), b.groups.end());
  return out;
}

Dataset subset_dataset(const Dataset& d, const std::vector<int64_t>& indices) {
  Dataset out = d;
  out.pixels.clear();
  out.values.clear();
  out.labels.clear();
  out.groups.clear();
  const int64_t numel = d.sample_numel();
  for (int64_t index : indices) {
    BASTION_CHECK(0 <= index && index < d.size(), "subset_dataset: index ", index, " out of range for '", d.name,
                  "' of ", d.size(), " samples");
    if (d.is_float()) {
      out.values.insert(out.values.end(), d.values.begin() + index * numel, d.values.begin() + (index + 1) * numel);
    } else {
      out.pixels.insert(out.pixels.end(), d.pixels.begin() + index * numel, d.pixels.begin() + (index + 1) * numel);
    }
    out.labels.push_back(d.labels[index]);
    if (!d.groups.empty()) out.groups.push_back(d.groups[index]);
  }
  return out;
}

}  // namespace bastion
