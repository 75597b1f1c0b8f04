// Dataset registry and loading: see dataset.h. One explicit table (kDatasets) lists every set; adding a
// set is one row here plus, for a new file format, a reader beside data/idx.cpp (data/README.md).
#include "data/dataset.h"

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "data/idx.h"
#include "tensor/error.h"

namespace bastion {
namespace {

struct DatasetInfo {
  const char* name;       // registered name (--dataset)
  const char* subfolder;  // folder name under a data root
  int64_t num_classes;
  float mean, std;  // single channel; after scaling to [0, 1]
};

// Normalisation presets: the usual published statistics of each training set (MNIST's are the
// torchvision example's Normalize((0.1307,), (0.3081,)); Fashion-MNIST's are its training-set mean
// and std). Presets that a paper overrides (IMPLEMENTATION-FACTS) are the FL config's business.
constexpr DatasetInfo kDatasets[] = {
    {"mnist", "mnist", 10, 0.1307f, 0.3081f},
    {"fmnist", "fashion-mnist", 10, 0.2860f, 0.3530f},
};

constexpr const char* kTrainImages = "train-images-idx3-ubyte";
constexpr const char* kTrainLabels = "train-labels-idx1-ubyte";
constexpr const char* kTestImages = "t10k-images-idx3-ubyte";
constexpr const char* kTestLabels = "t10k-labels-idx1-ubyte";

const DatasetInfo& dataset_info(const std::string& name) {
  for (const DatasetInfo& info : kDatasets)
    if (name == info.name) return info;
  std::ostringstream valid;
  for (const std::string& n : dataset_names()) valid << " " << n;
  BASTION_FAIL("unknown dataset '", name, "'; valid names:", valid.str());
}

std::vector<std::string> search_roots(const std::string& data_dir) {
  std::vector<std::string> roots;
  if (!data_dir.empty()) roots.push_back(data_dir);
  if (const char* env = std::getenv("BASTION_DATA"); env != nullptr && *env != '\0') roots.push_back(env);
  roots.push_back("./data");
  roots.push_back("/usr/share/datasets");
  return roots;
}

bool holds_file(const std::filesystem::path& dir, const std::string& file) {
  std::error_code ignored;
  return std::filesystem::is_regular_file(dir / file, ignored) ||
         std::filesystem::is_regular_file(dir / (file + ".gz"), ignored);
}

// One split: images and labels read separately, then checked against each other.
Dataset load_split(const DatasetInfo& info, const std::filesystem::path& dir, const char* images_file,
                   const char* labels_file) {
  IdxImages images = read_idx_images((dir / images_file).string());
  Dataset d;
  d.name = info.name;
  d.labels = read_idx_labels((dir / labels_file).string(), info.num_classes);
  BASTION_CHECK(images.count == d.size(), "dataset '", info.name, "' in ", dir.string(), ": ", images_file,
                " holds ", images.count, " images but ", labels_file, " holds ", d.size(), " labels");
  d.channels = 1;
  d.height = images.rows;
  d.width = images.cols;
  d.num_classes = info.num_classes;
  d.pixels = std::move(images.pixels);
  d.mean.assign(d.channels, info.mean);
  d.std.assign(d.channels, info.std);
  return d;
}

}  // namespace

std::vector<std::string> dataset_names() {
  std::vector<std::string> names;
  for (const DatasetInfo& info : kDatasets) names.push_back(info.name);
  return names;
}

std::string find_dataset_dir(const std::string& name, const std::string& data_dir) {
  const DatasetInfo& info = dataset_info(name);
  BASTION_CHECK(data_dir.empty() || std::filesystem::is_directory(data_dir), "--data-dir '", data_dir,
                "' is not a directory");
  std::ostringstream looked;
  for (const std::string& root : search_roots(data_dir)) {
    std::vector<std::filesystem::path> candidates{std::filesystem::path(root) / info.subfolder};
    // Only an explicit --data-dir may hold the files directly: MNIST and Fashion-MNIST share file
    // names, so a shared root (e.g. $BASTION_DATA) holding one of them must not answer for the other.
    if (root == data_dir) candidates.push_back(root);
    for (const std::filesystem::path& dir : candidates) {
      if (holds_file(dir, kTrainImages)) return dir.string();
      looked << "\n  " << dir.string();
    }
  }
  BASTION_FAIL("dataset '", name, "' not found: looked for ", kTrainImages, " (or ", kTrainImages,
               ".gz) in:", looked.str(), "\n(pass --data-dir or set BASTION_DATA)");
}

DatasetSplit load_dataset(const std::string& name, const std::string& data_dir) {
  const DatasetInfo& info = dataset_info(name);
  const std::filesystem::path dir = find_dataset_dir(name, data_dir);
  DatasetSplit split{load_split(info, dir, kTrainImages, kTrainLabels),
                     load_split(info, dir, kTestImages, kTestLabels)};
  BASTION_CHECK(split.train.height == split.test.height && split.train.width == split.test.width, "dataset '",
                name, "' in ", dir.string(), ": train images are ", split.train.height, "x",
                split.train.width, " but test images are ", split.test.height, "x", split.test.width);
  return split;
}

}  // namespace bastion
