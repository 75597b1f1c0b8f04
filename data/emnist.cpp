// EMNIST (Cohen et al. 2017, "EMNIST: an extension of MNIST to handwritten letters"), splits byclass and
// letters, from the IDX files of the official "gzip" archive:
//   emnist-<split>-{train,test}-{images-idx3,labels-idx1}-ubyte[.gz]
// - byclass: 62 classes, labels 0..61 = '0'..'9', 'A'..'Z', 'a'..'z' (the order of the archive's
//   emnist-byclass-mapping.txt).
// - letters: 26 classes; the files store labels 1..26 ('a/A' .. 'z/Z', each class merging both cases),
//   kept here as 0..25 so labels index from 0 like every other set.
// - Orientation: EMNIST's IDX images are stored transposed relative to MNIST (the archive's pixels are
//   column-major). Each image is transposed back on load, so a sample looks upright like an MNIST digit
//   and pixel-space triggers land where they would on MNIST. torchvision's EMNIST does NOT do this
//   (pytorch/vision#8783): a paper trained through it saw transposed images (docs/decisions.md).
#include <algorithm>
#include <string>

#include "data/formats.h"
#include "data/idx.h"
#include "tensor/error.h"

namespace bastion {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kLettersClasses = 26;
constexpr int64_t kIdxLabelsHeaderBytes = 8;  // magic + count; label i sits at byte 8 + i
constexpr int64_t kAnyByte = 256;             // read_idx_labels bound that lets every uint8 through

// Transposes each (rows x cols) image in place; the result is (cols x rows). One image of scratch.
void transpose_images(IdxImages& images) {
  const int64_t plane = images.rows * images.cols;
  std::vector<uint8_t> scratch(static_cast<size_t>(plane));
  for (int64_t n = 0; n < images.count; ++n) {
    uint8_t* image = images.pixels.data() + n * plane;
    std::copy(image, image + plane, scratch.begin());
    for (int64_t r = 0; r < images.rows; ++r)
      for (int64_t c = 0; c < images.cols; ++c) image[c * images.rows + r] = scratch[r * images.cols + c];
  }
  std::swap(images.rows, images.cols);
}

// letters: the files' 1..26 become 0..25; 0 (the unused "N/A" slot of the mapping) and > 26 are errors.
void shift_letter_labels(std::vector<int32_t>& labels, const std::string& file) {
  for (size_t i = 0; i < labels.size(); ++i) {
    const int32_t label = labels[i];
    BASTION_CHECK(1 <= label && label <= kLettersClasses, file, ": label ", label, " at index ", i, " (byte offset ",
                  kIdxLabelsHeaderBytes + static_cast<int64_t>(i),
                  ") is out of range: EMNIST letters labels must be 1..26");
    labels[i] = label - 1;
  }
}

Dataset load_emnist_split(const fs::path& dir, const std::string& split, const std::string& part, int64_t num_classes) {
  const std::string stem = "emnist-" + split + "-" + part;
  const std::string images_file = (dir / (stem + "-images-idx3-ubyte")).string();
  const std::string labels_file = (dir / (stem + "-labels-idx1-ubyte")).string();
  IdxImages images = read_idx_images(images_file);
  Dataset d;
  if (split == "letters") {
    d.labels = read_idx_labels(labels_file, kAnyByte);
    shift_letter_labels(d.labels, resolve_idx_path(labels_file));
  } else {
    d.labels = read_idx_labels(labels_file, num_classes);
  }
  BASTION_CHECK(images.count == d.size(), dir.string(), ": ", stem, "-images-idx3-ubyte holds ", images.count,
                " images but ", stem, "-labels-idx1-ubyte holds ", d.size(), " labels");
  transpose_images(images);
  d.channels = 1;
  d.height = images.rows;
  d.width = images.cols;
  d.num_classes = num_classes;
  d.pixels = std::move(images.pixels);
  return d;
}

std::vector<std::string> byclass_names() {
  std::vector<std::string> names;
  for (char c = '0'; c <= '9'; ++c) names.emplace_back(1, c);
  for (char c = 'A'; c <= 'Z'; ++c) names.emplace_back(1, c);
  for (char c = 'a'; c <= 'z'; ++c) names.emplace_back(1, c);
  return names;
}

std::vector<std::string> letters_names() {
  std::vector<std::string> names;
  for (char c = 'A'; c <= 'Z'; ++c) names.push_back(std::string(1, c) + "/" + std::string(1, c - 'A' + 'a'));
  return names;
}

DatasetSplit load_emnist(const fs::path& dir, const std::string& split, int64_t num_classes,
                         const std::vector<std::string>& names) {
  DatasetSplit out{load_emnist_split(dir, split, "train", num_classes),
                   load_emnist_split(dir, split, "test", num_classes)};
  out.train.class_names = out.test.class_names = names;
  return out;
}

}  // namespace

DatasetSplit load_emnist_byclass_dir(const fs::path& dir) { return load_emnist(dir, "byclass", 62, byclass_names()); }

DatasetSplit load_emnist_letters_dir(const fs::path& dir) {
  return load_emnist(dir, "letters", kLettersClasses, letters_names());
}

}  // namespace bastion
