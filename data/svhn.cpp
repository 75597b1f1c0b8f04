// SVHN cropped digits (Netzer et al. 2011), format 2: train_32x32.mat and test_32x32.mat, MATLAB v5 files
// (data/matlab.h) holding
//   X: uint8 [32, 32, 3, N], column-major: X(r, c, ch, n) at r + 32*(c + 32*(ch + 3*n))
//   y: [N, 1] (double in the official files; any numeric class accepted), values 1..10, 10 meaning digit 0.
// Each image's 3072 bytes are already contiguous, so X's buffer becomes the Dataset's pixels and each
// 32x32 plane is transposed in place to row-major NCHW: no second copy of the 225 MB training set.
// Labels: 10 -> 0, so label == digit (the convention of torchvision's SVHN); the extra_32x32.mat split
// is not loaded.
#include <cmath>
#include <string>
#include <utility>

#include "data/formats.h"
#include "data/matlab.h"
#include "tensor/error.h"

namespace bastion {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kSide = 32;
constexpr int64_t kChannels = 3;
constexpr int64_t kPlane = kSide * kSide;

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

// Checks X is uint8 [32, 32, 3, N] (MATLAB drops a trailing singleton: N = 1 reads [32, 32, 3]); returns N.
int64_t check_images(const MatArray& x, const std::string& file) {
  const std::vector<int64_t>& d = x.dims;
  BASTION_CHECK(x.mx_class == kMxUint8Class && x.stored_type == kMiUint8, file, ": array 'X' at ", x.position,
                ": expected uint8 images, found MATLAB class ", x.mx_class, " stored as type ", x.stored_type);
  const bool shape_ok = (d.size() == 3 || d.size() == 4) && d[0] == kSide && d[1] == kSide && d[2] == kChannels;
  BASTION_CHECK(shape_ok, file, ": array 'X' at ", x.position, ": expected dimensions [32, 32, 3, N], found ",
                dims_text(d));
  return d.size() == 4 ? d[3] : 1;
}

std::vector<int32_t> read_labels(const MatArray& y, int64_t count, const std::string& file) {
  const bool column_or_row = y.dims.size() == 2 && (y.dims[0] == 1 || y.dims[1] == 1);
  BASTION_CHECK(column_or_row && y.numel() == count, file, ": array 'y' at ", y.position, ": expected dimensions [",
                count, ", 1] (one label per image of X), found ", dims_text(y.dims));
  std::vector<int32_t> labels(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const double v = y.value(i);
    BASTION_CHECK(v >= 1 && v <= 10 && v == std::floor(v), file, ": array 'y' at ", y.position, ": label ", v,
                  " at index ", i, " is out of range: expected an integer 1..10 (10 = digit 0)");
    labels[static_cast<size_t>(i)] = static_cast<int32_t>(v) % 10;
  }
  return labels;
}

// Column-major planes (r + 32c) become row-major (32r + c): a square transpose, done in place.
void planes_to_row_major(std::vector<uint8_t>& pixels) {
  for (size_t base = 0; base < pixels.size(); base += kPlane) {
    uint8_t* plane = pixels.data() + base;
    for (int64_t r = 0; r < kSide; ++r)
      for (int64_t c = r + 1; c < kSide; ++c) std::swap(plane[r * kSide + c], plane[c * kSide + r]);
  }
}

Dataset load_svhn_file(const fs::path& path) {
  const std::string file = path.string();
  std::error_code ignored;
  BASTION_CHECK(fs::is_regular_file(path, ignored), file, ": SVHN file not found (expected train_32x32.mat and ",
                "test_32x32.mat from the cropped-digits format 2)");
  std::vector<MatArray> arrays = read_mat_v5_file(file);
  MatArray& x = find_mat_array(arrays, "X", file);
  const MatArray& y = find_mat_array(arrays, "y", file);
  const int64_t count = check_images(x, file);
  Dataset d;
  d.labels = read_labels(y, count, file);
  d.channels = kChannels;
  d.height = d.width = kSide;
  d.num_classes = 10;
  d.class_names = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
  d.pixels = std::move(x.data);
  planes_to_row_major(d.pixels);
  return d;
}

}  // namespace

DatasetSplit load_svhn_dir(const fs::path& dir) {
  return {load_svhn_file(dir / "train_32x32.mat"), load_svhn_file(dir / "test_32x32.mat")};
}

}  // namespace bastion
