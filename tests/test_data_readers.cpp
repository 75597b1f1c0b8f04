// Tests for the image-dataset readers behind the dataset table: EMNIST (IDX, transposed), CIFAR binary,
// SVHN through the MAT v5 reader, image folders and TinyImageNet through stb_image. Each reader gets a
// round trip on small files written here (MAT files both plain and miCOMPRESSED, PNG/JPEG trees through
// stb_image_write), corrupt-file tests that check the message names the file and what was wrong, and,
// where the real files are present ($BASTION_DATA), pinned counts, labels and pixel checksums.
#include <gtest/gtest.h>
#include <stb_image_write.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>

#include "data/cifar.h"
#include "data/dataset.h"
#include "data/formats.h"
#include "data/idx.h"
#include "data/image_folder.h"
#include "data/matlab.h"
#include "tests/test_support.h"

using namespace bastion;
using namespace bastion::testing;
namespace fs = std::filesystem;

namespace {

using ReaderTest = TempDirTest;

void put_be32(Bytes& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

void put_le32(Bytes& out, uint32_t v) {
  for (int shift = 0; shift <= 24; shift += 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

void append(Bytes& out, const Bytes& more) { out.insert(out.end(), more.begin(), more.end()); }

}  // namespace

// ---------------------------------------------------------------- EMNIST

namespace {
class EmnistTest : public ReaderTest {};

Bytes idx_images(uint32_t count, uint32_t rows, uint32_t cols) {
  Bytes out;
  for (uint32_t v : {kIdxImagesMagic, count, rows, cols}) put_be32(out, v);
  for (uint32_t i = 0; i < count * rows * cols; ++i) out.push_back(static_cast<uint8_t>(i));
  return out;
}

Bytes idx_labels(const Bytes& labels) {
  Bytes out;
  put_be32(out, kIdxLabelsMagic);
  put_be32(out, static_cast<uint32_t>(labels.size()));
  append(out, labels);
  return out;
}

// Two 2x3 training images (pixel i of the files = i) and one test image, train gzipped, test plain.
void write_emnist(const fs::path& dir, const std::string& split, const Bytes& train_labels) {
  const std::string stem = "emnist-" + split;
  write_file(dir / (stem + "-train-images-idx3-ubyte.gz"), idx_images(2, 2, 3));
  write_file(dir / (stem + "-train-labels-idx1-ubyte.gz"), idx_labels(train_labels));
  write_file(dir / (stem + "-test-images-idx3-ubyte"), idx_images(1, 2, 3));
  write_file(dir / (stem + "-test-labels-idx1-ubyte"), idx_labels({train_labels[0]}));
}
}  // namespace

TEST_F(EmnistTest, ByclassTransposesEachImage) {
  write_emnist(dir_, "byclass", {0, 61});
  const DatasetSplit split = load_emnist_byclass_dir(dir_);
  EXPECT_EQ(split.train.height, 3);  // files hold 2 rows x 3 cols; upright is their transpose
  EXPECT_EQ(split.train.width, 2);
  // file image 0 = [[0 1 2] [3 4 5]] -> [[0 3] [1 4] [2 5]]; image 1 is the same plus 6
  EXPECT_EQ(split.train.pixels, (Bytes{0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11}));
  EXPECT_EQ(split.train.labels, (std::vector<int32_t>{0, 61}));
  EXPECT_EQ(split.test.size(), 1);
  EXPECT_EQ(split.train.num_classes, 62);
  ASSERT_EQ(split.train.class_names.size(), 62u);
  EXPECT_EQ(split.train.class_names[10], "A");
  EXPECT_EQ(split.train.class_names[61], "z");
}

TEST_F(EmnistTest, LettersStoreLabelMinusOneThroughTheTable) {
  write_emnist(dir_ / "emnist", "letters", {1, 26});
  const DatasetSplit split = load_dataset("emnist-letters", dir_.string());
  EXPECT_EQ(split.train.labels, (std::vector<int32_t>{0, 25}));
  EXPECT_EQ(split.test.labels, (std::vector<int32_t>{0}));
  EXPECT_EQ(split.train.num_classes, 26);
  EXPECT_EQ(split.train.class_names.front(), "A/a");
  EXPECT_EQ(split.train.mean.size(), 1u);  // no preset: computed from the training split
}

TEST_F(EmnistTest, BadLabelsNameFileIndexAndOffset) {
  write_emnist(dir_, "letters", {5, 0});
  const std::string labels = (dir_ / "emnist-letters-train-labels-idx1-ubyte.gz").string();
  expect_error([&] { load_emnist_letters_dir(dir_); }, {labels, "label 0 at index 1 (byte offset 9)", "1..26"});
  write_emnist(dir_, "letters", {27, 1});
  expect_error([&] { load_emnist_letters_dir(dir_); }, {labels, "label 27 at index 0 (byte offset 8)", "1..26"});
  write_emnist(dir_, "byclass", {62, 1});
  expect_error([&] { load_emnist_byclass_dir(dir_); }, {"emnist-byclass-train-labels", "label 62", "num_classes 62"});
}

TEST_F(EmnistTest, MissingFileAndCountMismatch) {
  expect_error([&] { load_emnist_byclass_dir(dir_); }, {"not found", "emnist-byclass-train-images-idx3-ubyte"});
  write_emnist(dir_, "byclass", {1, 2});
  write_file(dir_ / "emnist-byclass-test-labels-idx1-ubyte", idx_labels({1, 2}));
  expect_error([&] { load_emnist_byclass_dir(dir_); },
               {"emnist-byclass-test-images-idx3-ubyte holds 1 images", "labels-idx1-ubyte holds 2 labels"});
}

// ---------------------------------------------------------------- CIFAR

namespace {
class CifarTest : public ReaderTest {};

// Records whose pixels are (seed + i) mod 256, so order and placement show.
Bytes cifar_records(const std::vector<Bytes>& labels, uint8_t seed) {
  Bytes out;
  for (size_t r = 0; r < labels.size(); ++r) {
    append(out, labels[r]);
    for (int64_t i = 0; i < kCifarImageBytes; ++i) out.push_back(static_cast<uint8_t>(seed + r + i));
  }
  return out;
}

Bytes cifar_pixels(size_t records, uint8_t seed) {
  Bytes out;
  for (size_t r = 0; r < records; ++r)
    for (int64_t i = 0; i < kCifarImageBytes; ++i) out.push_back(static_cast<uint8_t>(seed + r + i));
  return out;
}

// data_batch_k holds labels {k, k+1} with seed 10k; test_batch {9, 0} with seed 60.
void write_cifar10(const fs::path& dir) {
  for (uint8_t k = 1; k <= 5; ++k)
    write_file(dir / ("data_batch_" + std::to_string(k) + ".bin"), cifar_records({{k}, {uint8_t(k + 1)}}, 10 * k));
  write_file(dir / "test_batch.bin", cifar_records({{9}, {0}}, 60));
  write_text(dir / "batches.meta.txt", "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n\n");
}
}  // namespace

TEST_F(CifarTest, ParseBytesAppendsRecords) {
  Dataset d;
  const Bytes first = cifar_records({{3}, {0}}, 5), second = cifar_records({{9}}, 7);
  parse_cifar_bytes(first.data(), first.size(), "a.bin", 1, 10, d);
  parse_cifar_bytes(second.data(), second.size(), "b.bin", 1, 10, d);
  EXPECT_EQ(d.labels, (std::vector<int32_t>{3, 0, 9}));
  Bytes expected = cifar_pixels(2, 5);
  append(expected, cifar_pixels(1, 7));
  EXPECT_EQ(d.pixels, expected);
  EXPECT_EQ(d.channels * d.height * d.width, kCifarImageBytes);
  Dataset fine;
  const Bytes cifar100 = cifar_records({{19, 99}, {0, 42}}, 1);
  parse_cifar_bytes(cifar100.data(), cifar100.size(), "train.bin", 2, 100, fine);
  EXPECT_EQ(fine.labels, (std::vector<int32_t>{99, 42}));  // the fine label, not the coarse
  EXPECT_EQ(fine.pixels, cifar_pixels(2, 1));
}

TEST_F(CifarTest, ParseBytesRejectsBadInput) {
  Dataset d;
  Bytes bytes = cifar_records({{1}, {2}}, 0);
  bytes.resize(bytes.size() + 5);
  expect_error([&] { parse_cifar_bytes(bytes.data(), bytes.size(), "x.bin", 1, 10, d); },
               {"x.bin", "not a whole number of 3073-byte records", "partial record of 5 bytes at byte offset 6146"});
  expect_error([&] { parse_cifar_bytes(nullptr, 0, "empty.bin", 1, 10, d); }, {"empty.bin", "empty file"});
  bytes = cifar_records({{1}, {10}}, 0);
  expect_error([&] { parse_cifar_bytes(bytes.data(), bytes.size(), "x.bin", 1, 10, d); },
               {"x.bin", "label 10 of record 1 (byte offset 3073)", "expected < num_classes 10"});
  bytes = cifar_records({{20, 1}}, 0);
  expect_error([&] { parse_cifar_bytes(bytes.data(), bytes.size(), "c.bin", 2, 100, d); },
               {"c.bin", "coarse label 20 of record 0 (byte offset 0)"});
  expect_error([&] { parse_cifar_bytes(bytes.data(), bytes.size(), "c.bin", 3, 100, d); }, {"label_bytes"});
  EXPECT_EQ(d.size(), 0);  // a rejected file leaves the Dataset untouched
  EXPECT_TRUE(d.pixels.empty());
}

TEST_F(CifarTest, Cifar10ThroughTheTableKeepsFileOrder) {
  write_cifar10(dir_ / "cifar-10-batches-bin");
  const DatasetSplit split = load_dataset("cifar10", dir_.string());
  EXPECT_EQ(split.train.labels, (std::vector<int32_t>{1, 2, 2, 3, 3, 4, 4, 5, 5, 6}));
  EXPECT_EQ(split.test.labels, (std::vector<int32_t>{9, 0}));
  Bytes expected;
  for (uint8_t k = 1; k <= 5; ++k) append(expected, cifar_pixels(2, 10 * k));
  EXPECT_EQ(split.train.pixels, expected);
  EXPECT_EQ(split.test.pixels, cifar_pixels(2, 60));
  EXPECT_EQ(split.train.pixels.capacity(), 10u * 3073u);  // reserved once for the files, never regrown
  ASSERT_EQ(split.train.class_names.size(), 10u);
  EXPECT_EQ(split.test.class_names[9], "truck");
  EXPECT_EQ(split.train.mean, (std::vector<float>{0.4914f, 0.4822f, 0.4465f}));
}

TEST_F(CifarTest, Cifar100FineLabelsAndNames) {
  write_file(dir_ / "train.bin", cifar_records({{0, 7}, {19, 99}, {4, 0}}, 3));
  write_file(dir_ / "test.bin", cifar_records({{1, 5}}, 4));
  std::string names;
  for (int i = 0; i < 100; ++i) names += "class" + std::to_string(i) + "\r\n";
  write_text(dir_ / "fine_label_names.txt", names);
  const DatasetSplit split = load_cifar100_dir(dir_);
  EXPECT_EQ(split.train.labels, (std::vector<int32_t>{7, 99, 0}));
  EXPECT_EQ(split.test.labels, (std::vector<int32_t>{5}));
  EXPECT_EQ(split.train.pixels, cifar_pixels(3, 3));
  EXPECT_EQ(split.train.class_names[99], "class99");
  EXPECT_EQ(split.train.num_classes, 100);
}

TEST_F(CifarTest, MissingTruncatedAndBadNamesFileAreNamed) {
  write_cifar10(dir_);
  fs::remove(dir_ / "data_batch_3.bin");
  expect_error([&] { load_cifar10_dir(dir_); },
               {(dir_ / "data_batch_3.bin").string(), "missing", "data_batch_1.bin .. data_batch_5.bin"});
  write_cifar10(dir_);
  Bytes cut = cifar_records({{1}, {2}}, 0);
  cut.resize(4000);
  write_file(dir_ / "data_batch_2.bin", cut);
  expect_error([&] { load_cifar10_dir(dir_); },
               {(dir_ / "data_batch_2.bin").string(), "partial record of 927 bytes at byte offset 3073"});
  write_cifar10(dir_);
  write_text(dir_ / "batches.meta.txt", "cat\ndog\n");
  expect_error([&] { load_cifar10_dir(dir_); }, {"batches.meta.txt", "expected 10 class names", "found 2"});
  write_file(dir_ / "data_batch_1.bin", cifar_records({{2, 7}}, 0));  // a CIFAR-100 record in CIFAR-10
  expect_error([&] { load_cifar10_dir(dir_); }, {"data_batch_1.bin", "not a whole number of 3073-byte records"});
}

// The real CIFAR-10 (binary version). Pinned values were computed once with a plain Python script over the
// .bin files (zlib.crc32 of the concatenated pixels); the train pixel sum / (50000*3072*255) = 0.4734 is
// the mean of the published per-channel means.
TEST(CifarReal, Cifar10) {
  try {
    find_dataset_dir("cifar10", "");
  } catch (const Error& e) {
    GTEST_SKIP() << "CIFAR-10 not available (set BASTION_DATA): " << e.what();
  }
  const DatasetSplit split = load_dataset("cifar10", "");
  ASSERT_EQ(split.train.size(), 50000);
  ASSERT_EQ(split.test.size(), 10000);
  EXPECT_EQ(split.train.sample_numel(), 3072);
  EXPECT_EQ(std::vector<int32_t>(split.train.labels.begin(), split.train.labels.begin() + 10),
            (std::vector<int32_t>{6, 9, 9, 4, 1, 1, 2, 7, 8, 3}));
  EXPECT_EQ(std::vector<int32_t>(split.test.labels.begin(), split.test.labels.begin() + 10),
            (std::vector<int32_t>{3, 8, 8, 0, 6, 6, 1, 6, 3, 1}));
  auto sum = [](const Bytes& p) { return std::accumulate(p.begin(), p.end(), uint64_t{0}); };
  auto crc = [](const Bytes& p) { return crc32(0L, p.data(), static_cast<uInt>(p.size())); };
  EXPECT_EQ(sum(split.train.pixels), 18540682003u);
  EXPECT_EQ(sum(split.test.pixels), 3733375634u);
  EXPECT_EQ(crc(split.train.pixels), 3798869581u);
  EXPECT_EQ(crc(split.test.pixels), 1854372032u);
  EXPECT_EQ(std::accumulate(split.train.labels.begin(), split.train.labels.end(), int64_t{0}), 225000);
  EXPECT_EQ(split.train.class_names, (std::vector<std::string>{"airplane", "automobile", "bird", "cat", "deer", "dog",
                                                               "frog", "horse", "ship", "truck"}));
}

// ---------------------------------------------------------------- MAT v5 and SVHN

namespace {
class MatTest : public ReaderTest {};
class SvhnTest : public ReaderTest {};

// One array variable for the test writer: class, element type of the stored values, dims, raw values.
struct MatVar {
  std::string name;
  int mx_class;
  uint32_t stored_type;
  std::vector<int32_t> dims;
  Bytes values;
  uint32_t extra_flags = 0;  // 0x800: complex (then `values` is written twice, real and imaginary)
};

// A data element: the small form (type and count in one word) when allowed and the data fits in 4 bytes.
Bytes mat_element(uint32_t type, const Bytes& data, bool small = false) {
  Bytes out;
  if (small && data.size() <= 4) {
    put_le32(out, static_cast<uint32_t>(data.size() << 16) | type);
    append(out, data);
    out.resize(8);
    return out;
  }
  put_le32(out, type);
  put_le32(out, static_cast<uint32_t>(data.size()));
  append(out, data);
  out.resize((out.size() + 7) / 8 * 8);
  return out;
}

Bytes mat_matrix(const MatVar& v) {
  Bytes flags, dims, body;
  put_le32(flags, static_cast<uint32_t>(v.mx_class) | v.extra_flags);
  put_le32(flags, 0);
  for (int32_t d : v.dims) put_le32(dims, static_cast<uint32_t>(d));
  append(body, mat_element(kMiUint32, flags));
  append(body, mat_element(kMiInt32, dims));
  append(body, mat_element(kMiInt8, Bytes(v.name.begin(), v.name.end()), /*small=*/true));
  append(body, mat_element(v.stored_type, v.values));
  if (v.extra_flags & 0x800) append(body, mat_element(v.stored_type, v.values));
  return mat_element(kMiMatrix, body);
}

Bytes mat_header() {
  std::string text = "MATLAB 5.0 MAT-file, Platform: test, written by Bastion's tests";
  Bytes out(128, 0);  // bytes 116..123: subsystem data offset, none
  std::fill(out.begin(), out.begin() + 116, ' ');
  std::copy(text.begin(), text.end(), out.begin());
  out[125] = 0x01;  // version 0x0100, little-endian
  out[126] = 'I';
  out[127] = 'M';
  return out;
}

// A miCOMPRESSED element holding `element` (its count is the zlib stream's exact length: no padding).
Bytes mat_compressed(const Bytes& element) {
  uLongf size = compressBound(element.size());
  Bytes z(size);
  EXPECT_EQ(compress(z.data(), &size, element.data(), element.size()), Z_OK);
  z.resize(size);
  Bytes out;
  put_le32(out, kMiCompressed);
  put_le32(out, static_cast<uint32_t>(z.size()));
  append(out, z);
  return out;
}

Bytes mat_file(const std::vector<MatVar>& vars, bool compressed) {
  Bytes out = mat_header();
  for (const MatVar& v : vars) append(out, compressed ? mat_compressed(mat_matrix(v)) : mat_matrix(v));
  return out;
}

Bytes as_doubles(const std::vector<double>& values) {
  Bytes out(values.size() * sizeof(double));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// SVHN's X(r, c, ch, n), column-major, is this function of the index: any transposition mistake shows.
uint8_t svhn_pixel(int r, int c, int ch, int n) { return static_cast<uint8_t>(r * 3 + c * 5 + ch * 64 + n * 128); }

MatVar svhn_x(int n) {
  MatVar x{"X", kMxUint8Class, kMiUint8, {32, 32, 3, n}, {}};
  for (int i = 0; i < n; ++i)
    for (int ch = 0; ch < 3; ++ch)
      for (int c = 0; c < 32; ++c)
        for (int r = 0; r < 32; ++r) x.values.push_back(svhn_pixel(r, c, ch, i));  // r fastest
  return x;
}

void expect_svhn_pixels(const Dataset& d) {
  for (int i = 0; i < d.size(); ++i)
    for (int ch = 0; ch < 3; ++ch)
      for (int r = 0; r < 32; ++r)
        for (int c = 0; c < 32; ++c)
          ASSERT_EQ(d.pixels[((i * 3 + ch) * 32 + r) * 32 + c], svhn_pixel(r, c, ch, i)) << i << ch << r << c;
}

std::vector<MatArray> parse(const Bytes& bytes) { return parse_mat_v5_bytes(bytes.data(), bytes.size(), "t.mat"); }
}  // namespace

TEST_F(MatTest, ReadsPlainAndCompressedSkipsOtherClasses) {
  const std::vector<MatVar> vars = {
      {"text", 4, kMiUint16, {1, 2}, {'h', 0, 'i', 0}},                            // char: skipped
      {"z", kMxDoubleClass, kMiDouble, {1, 1}, as_doubles({1.0}), 0x800},          // complex: skipped
      {"counts", kMxDoubleClass, kMiUint8, {2, 3}, {1, 2, 3, 4, 5, 250}},          // double stored narrow
      {"w", kMxSingleClass, kMiDouble, {1, 2}, as_doubles({-0.5, 1e10})}};
  for (bool compressed : {false, true}) {
    std::vector<MatArray> arrays = parse(mat_file(vars, compressed));
    ASSERT_EQ(arrays.size(), 2u) << compressed;
    const MatArray& counts = find_mat_array(arrays, "counts", "t.mat");
    EXPECT_EQ(counts.mx_class, kMxDoubleClass);
    EXPECT_EQ(counts.dims, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(counts.numel(), 6);
    EXPECT_EQ(counts.value(5), 250.0);
    EXPECT_EQ(find_mat_array(arrays, "w", "t.mat").value(1), 1e10);
    expect_error([&] { find_mat_array(arrays, "y", "t.mat"); }, {"t.mat", "no numeric array named 'y'", "counts, w"});
  }
}

TEST_F(MatTest, HeaderErrors) {
  Bytes bytes = mat_header();
  expect_error([&] { parse(Bytes(bytes.begin(), bytes.begin() + 100)); },
               {"t.mat", "truncated header", "expected 128 bytes", "found 100"});
  bytes[126] = 'M';
  bytes[127] = 'I';
  expect_error([&] { parse(bytes); }, {"t.mat", "big-endian", "'MI' at byte 126", "expected little-endian 'IM'"});
  bytes[126] = 'X';
  expect_error([&] { parse(bytes); }, {"t.mat", "bad endian indicator at byte 126"});
  bytes = mat_header();
  bytes[125] = 2;
  expect_error([&] { parse(bytes); }, {"t.mat", "bad version at byte 124", "expected 0x0100"});
  bytes = mat_header();
  std::memcpy(bytes.data(), "MATLAB 7.3 MAT-file", 19);
  expect_error([&] { parse(bytes); }, {"t.mat", "v7.3 (HDF5)"});
}

TEST_F(MatTest, ElementErrorsNameTheOffset) {
  const MatVar y{"y", kMxDoubleClass, kMiDouble, {2, 1}, as_doubles({1, 2})};
  Bytes bytes = mat_file({y}, false);
  bytes[132] = 0xE8;  // the miMATRIX tag's count: now 1000 + the real count's high bytes
  bytes[133] = 0x03;
  expect_error([&] { parse(bytes); }, {"t.mat", "miMATRIX (14) at byte 128 claims 1000 bytes but only 64 remain"});
  bytes = mat_file({y}, false);
  bytes[128] = kMiDouble;
  expect_error([&] { parse(bytes); }, {"data element at byte 128", "expected miMATRIX (14) or miCOMPRESSED (15)"});
  MatVar wrong = y;
  wrong.values.resize(8);
  expect_error([&] { parse(mat_file({wrong}, false)); },
               {"real part of 'y' at byte 176", "expected 2 values of 8 bytes, found 8 bytes"});
  wrong = y;
  wrong.dims = {-2, -1};
  expect_error([&] { parse(mat_file({wrong}, false)); }, {"dimension 0 at byte 160 is -2", "expected >= 0"});
  bytes = mat_file({y}, false);
  bytes.resize(bytes.size() - 12);  // cut into the real part
  expect_error([&] { parse(bytes); }, {"t.mat", "at byte 128 claims", "remain"});
}

TEST_F(MatTest, CompressedErrors) {
  const MatVar y{"y", kMxDoubleClass, kMiDouble, {64, 1}, as_doubles(std::vector<double>(64, 3.0))};
  Bytes bytes = mat_file({y}, true);
  Bytes damaged = bytes;
  for (size_t i = 140; i < 150; ++i) damaged[i] ^= 0x5A;
  expect_error([&] { parse(damaged); }, {"t.mat", "miCOMPRESSED element at byte 128"});
  Bytes cut = bytes;  // the stream cut short, with the count adjusted to match
  cut.resize(cut.size() - 10);
  const uint32_t count = static_cast<uint32_t>(cut.size() - 136);
  std::memcpy(cut.data() + 132, &count, 4);
  expect_error([&] { parse(cut); }, {"t.mat", "miCOMPRESSED element at byte 128", "end before the zlib stream does"});
  // An inner tag that lies: claims 2^31 bytes from a stream of a few dozen.
  Bytes inner = mat_matrix(y);
  inner[4] = 0, inner[5] = 0, inner[6] = 0, inner[7] = 0x80;
  Bytes liar = mat_header();
  append(liar, mat_compressed(inner));
  expect_error([&] { parse(liar); }, {"claims 2147483648 bytes", "deflate's limit is 1032:1"});
  inner = mat_matrix(y);
  inner[4] += 8;  // claims 8 bytes more than the stream holds
  liar = mat_header();
  append(liar, mat_compressed(inner));
  expect_error([&] { parse(liar); }, {"miCOMPRESSED element at byte 128", "the zlib stream ends after"});
  inner = mat_matrix(y);
  append(inner, Bytes(16, 0));  // the stream holds 16 bytes more than the tag claims
  liar = mat_header();
  append(liar, mat_compressed(inner));
  expect_error([&] { parse(liar); }, {"holds more than the", "bytes its element tag claims"});
}

TEST_F(SvhnTest, CompressedAndPlainFilesThroughTheTable) {
  // train: compressed, y double (as the official files); test: uncompressed, y uint8.
  write_file(dir_ / "svhn" / "train_32x32.mat",
             mat_file({svhn_x(2), {"y", kMxDoubleClass, kMiDouble, {2, 1}, as_doubles({10, 3})}}, true));
  write_file(dir_ / "svhn" / "test_32x32.mat",
             mat_file({{"y", kMxUint8Class, kMiUint8, {3, 1}, {1, 10, 9}}, svhn_x(3)}, false));
  const DatasetSplit split = load_dataset("svhn", dir_.string());
  EXPECT_EQ(split.train.labels, (std::vector<int32_t>{0, 3}));  // 10 is digit 0
  EXPECT_EQ(split.test.labels, (std::vector<int32_t>{1, 0, 9}));
  EXPECT_EQ(split.train.sample_numel(), 3072);
  expect_svhn_pixels(split.train);
  expect_svhn_pixels(split.test);
  EXPECT_EQ(split.test.class_names[9], "9");
}

TEST_F(SvhnTest, BadFilesNameWhatIsWrong) {
  const MatVar good_y{"y", kMxDoubleClass, kMiDouble, {2, 1}, as_doubles({1, 2})};
  const fs::path train = dir_ / "train_32x32.mat";
  expect_error([&] { load_svhn_dir(dir_); }, {train.string(), "not found"});
  write_file(train, mat_file({svhn_x(2)}, true));
  expect_error([&] { load_svhn_dir(dir_); }, {train.string(), "no numeric array named 'y'", "found X"});
  write_file(train, mat_file({svhn_x(2), {"y", kMxDoubleClass, kMiDouble, {2, 1}, as_doubles({0, 2})}}, true));
  expect_error([&] { load_svhn_dir(dir_); }, {train.string(), "label 0 at index 0", "expected an integer 1..10"});
  write_file(train, mat_file({svhn_x(2), {"y", kMxDoubleClass, kMiDouble, {2, 1}, as_doubles({1, 2.5})}}, false));
  expect_error([&] { load_svhn_dir(dir_); }, {train.string(), "label 2.5 at index 1"});
  write_file(train, mat_file({svhn_x(3), good_y}, false));
  expect_error([&] { load_svhn_dir(dir_); }, {train.string(), "expected dimensions [3, 1]", "found [2, 1]"});
  MatVar x = svhn_x(1);
  x.dims = {32, 32, 1, 3};
  write_file(train, mat_file({x, good_y}, true));
  expect_error([&] { load_svhn_dir(dir_); },
               {train.string(), "'X' at decompressed byte 0 of the miCOMPRESSED element at byte 128",
                "expected dimensions [32, 32, 3, N], found [32, 32, 1, 3]"});
  x = {"X", kMxDoubleClass, kMiUint8, {32, 32, 3, 1}, svhn_x(1).values};
  write_file(train, mat_file({x, {"y", kMxDoubleClass, kMiDouble, {1, 1}, as_doubles({1})}}, false));
  expect_error([&] { load_svhn_dir(dir_); }, {train.string(), "expected uint8 images"});
}

// ---------------------------------------------------------------- image folders and TinyImageNet

namespace {
class ImageFolderTest : public ReaderTest {};
class TinyImageNetTest : public ReaderTest {};

void append_callback(void* context, void* data, int size) {
  auto* out = static_cast<Bytes*>(context);
  out->insert(out->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
}

// An h x w image with `comp` interleaved channels whose value at (y, x, c) is seed + 16y + 4x + 100c.
Bytes pattern_hwc(int h, int w, int comp, int seed) {
  Bytes hwc;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < comp; ++c) hwc.push_back(static_cast<uint8_t>(seed + 16 * y + 4 * x + 100 * c));
  return hwc;
}

Bytes png(int h, int w, int comp, int seed) {
  const Bytes hwc = pattern_hwc(h, w, comp, seed);
  Bytes out;
  EXPECT_NE(stbi_write_png_to_func(append_callback, &out, w, h, comp, hwc.data(), w * comp), 0);
  return out;
}

Bytes jpeg(int h, int w, int comp, int seed) {
  const Bytes hwc = pattern_hwc(h, w, comp, seed);
  Bytes out;
  EXPECT_NE(stbi_write_jpg_to_func(append_callback, &out, w, h, comp, hwc.data(), 95), 0);
  return out;
}

// The planar (C, H, W) form of pattern_hwc.
Bytes pattern_chw(int h, int w, int comp, int seed) {
  Bytes chw;
  for (int c = 0; c < comp; ++c)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) chw.push_back(static_cast<uint8_t>(seed + 16 * y + 4 * x + 100 * c));
  return chw;
}

DecodedImage decode(const Bytes& bytes, int channels) {
  return decode_image_bytes(bytes.data(), bytes.size(), "img", channels);
}
}  // namespace

TEST_F(ImageFolderTest, DecodesPngExactlyAndJpegClosely) {
  const DecodedImage colour = decode(png(3, 4, 3, 1), 3);
  EXPECT_EQ(colour.channels, 3);
  EXPECT_EQ(colour.height, 3);
  EXPECT_EQ(colour.width, 4);
  EXPECT_EQ(colour.chw, pattern_chw(3, 4, 3, 1));
  const DecodedImage gray_as_rgb = decode(png(2, 2, 1, 7), 3);  // expanded: three equal planes
  const Bytes plane = pattern_chw(2, 2, 1, 7);
  Bytes three = plane;
  append(three, plane);
  append(three, plane);
  EXPECT_EQ(gray_as_rgb.chw, three);
  // JPEG is lossy: a smooth ramp (no wrap-around edges) at quality 95 must come back within a few levels.
  // Measured max error 1 on this image; 4 leaves room for another stb version's rounding, while a
  // channel or plane mix-up would be off by >= 28.
  constexpr int kJpegTolerance = 4;
  Bytes smooth_hwc, exact;
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x)
      for (int c = 0; c < 3; ++c) smooth_hwc.push_back(static_cast<uint8_t>(60 + 4 * y + 4 * x + 40 * c));
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 8; ++y)
      for (int x = 0; x < 8; ++x) exact.push_back(static_cast<uint8_t>(60 + 4 * y + 4 * x + 40 * c));
  Bytes jpg;
  ASSERT_NE(stbi_write_jpg_to_func(append_callback, &jpg, 8, 8, 3, smooth_hwc.data(), 95), 0);
  const DecodedImage lossy = decode(jpg, 3);
  ASSERT_EQ(lossy.chw.size(), exact.size());
  int worst = 0;
  for (size_t i = 0; i < exact.size(); ++i) worst = std::max(worst, std::abs(lossy.chw[i] - exact[i]));
  EXPECT_LE(worst, kJpegTolerance);
}

TEST_F(ImageFolderTest, DecodeRejectsGarbage) {
  const Bytes garbage = {'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'a', 'g', 'e'};
  expect_error([&] { decode_image_bytes(garbage.data(), garbage.size(), "bad.png", 3); }, {"bad.png", "cannot decode"});
  expect_error([&] { decode_image_bytes(nullptr, 0, "empty.png", 3); }, {"empty.png", "0 bytes"});
  Bytes cut = png(16, 16, 3, 0);
  cut.resize(cut.size() / 2);
  expect_error([&] { decode_image_bytes(cut.data(), cut.size(), "cut.png", 3); }, {"cut.png", "cannot decode"});
  expect_error([&] { decode(png(2, 2, 3, 0), 2); }, {"channels must be 1 or 3"});
  Bytes huge = png(2, 2, 3, 0);  // IHDR width and height (big-endian, bytes 16..23) patched to 5000x5000
  for (int at : {16, 20}) huge[at + 2] = 0x13, huge[at + 3] = 0x88;
  expect_error([&] { decode_image_bytes(huge.data(), huge.size(), "huge.png", 3); },
               {"huge.png", "header says 5000x5000", "at most 16777216 pixels"});
  // A 62-byte BMP header claiming 2048x2048 24-bit pixels (under the 2^24 cap): stb_image would allocate
  // and decode 12 MB from it (fuzz_image_folder found the pattern); the size bound rejects it first.
  Bytes bmp = {'B', 'M'};
  auto put_le = [&](uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) bmp.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  put_le(62, 4), put_le(0, 4), put_le(54, 4);                   // file size, reserved, pixel offset
  put_le(40, 4), put_le(2048, 4), put_le(2048, 4), put_le(1, 2);  // DIB size, width, height, planes
  put_le(24, 2), put_le(0, 4), put_le(0, 4), put_le(2835, 4), put_le(2835, 4), put_le(0, 4), put_le(0, 4);
  bmp.resize(62, 0);
  expect_error([&] { decode_image_bytes(bmp.data(), bmp.size(), "lying.bmp", 3); },
               {"lying.bmp", "header says 2048x2048", "only 62 bytes"});
}

TEST_F(ImageFolderTest, LoadsSortedTreeThroughTheTable) {
  const fs::path tree = dir_ / "image-folder";
  write_file(tree / "train" / "dog" / "z.png", png(2, 3, 3, 50));
  write_file(tree / "train" / "cat" / "b.PNG", png(2, 3, 3, 20));
  write_file(tree / "train" / "cat" / "a.png", png(2, 3, 3, 10));
  write_text(tree / "train" / "cat" / "notes.txt", "not an image, ignored");
  write_file(tree / "test" / "dog" / "t.jpg", jpeg(2, 3, 1, 0));  // gray JPEG expanded to the tree's 3
  const DatasetSplit split = load_dataset("image-folder", dir_.string());
  EXPECT_EQ(split.train.labels, (std::vector<int32_t>{0, 0, 1}));  // cat (a, b), dog
  Bytes expected = pattern_chw(2, 3, 3, 10);
  append(expected, pattern_chw(2, 3, 3, 20));
  append(expected, pattern_chw(2, 3, 3, 50));
  EXPECT_EQ(split.train.pixels, expected);
  EXPECT_EQ(split.test.labels, (std::vector<int32_t>{1}));
  EXPECT_EQ(split.test.channels, 3);
  EXPECT_EQ(split.train.num_classes, 2);
  EXPECT_EQ(split.train.class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(split.train.mean.size(), 3u);
}

TEST_F(ImageFolderTest, GrayTreeIsOneChannelWithoutTestSplit) {
  write_file(dir_ / "train" / "a" / "1.png", png(4, 4, 1, 3));
  write_file(dir_ / "train" / "b" / "2.png", png(4, 4, 3, 3));  // colour reduced to the tree's 1 channel
  const DatasetSplit split = load_image_folder_dir(dir_);
  EXPECT_EQ(split.train.channels, 1);
  EXPECT_EQ(split.train.size(), 2);
  EXPECT_EQ(split.test.size(), 0);
  EXPECT_EQ(Bytes(split.train.pixels.begin(), split.train.pixels.begin() + 16), pattern_chw(4, 4, 1, 3));
}

TEST_F(ImageFolderTest, TreeErrorsNameTheFile) {
  write_file(dir_ / "train" / "a" / "1.png", png(4, 4, 3, 0));
  write_file(dir_ / "train" / "b" / "2.png", png(5, 4, 3, 0));
  expect_error([&] { load_image_folder_dir(dir_); },
               {(dir_ / "train" / "b" / "2.png").string(), "image is 5x4, expected 4x4", "1.png"});
  write_file(dir_ / "train" / "b" / "2.png", png(4, 4, 3, 0));
  write_file(dir_ / "val" / "a" / "v.png", png(4, 3, 3, 0));
  expect_error([&] { load_image_folder_dir(dir_); },
               {"v.png", "image is 4x3, expected 4x4", "the size of the training images"});
  fs::remove_all(dir_ / "val");
  write_file(dir_ / "test" / "zebra" / "x.png", png(4, 4, 3, 0));
  expect_error([&] { load_image_folder_dir(dir_); }, {"zebra", "not among the 2 classes of train/"});
  fs::remove_all(dir_ / "test");
  write_text(dir_ / "train" / "a" / "broken.png", "garbage");
  expect_error([&] { load_image_folder_dir(dir_); }, {"broken.png", "cannot decode image"});
  fs::remove(dir_ / "train" / "a" / "broken.png");
  fs::create_directories(dir_ / "train" / "empty");
  expect_error([&] { load_image_folder_dir(dir_); }, {"empty", "no images"});
  expect_error([&] { load_image_folder_dir(dir_ / "nowhere"); }, {"nowhere", "not a directory"});
}

TEST_F(TinyImageNetTest, TrainValWordsAndWnidOrder) {
  // PNG bytes under .JPEG names decode exactly (stb_image detects the format from the content); one real
  // grayscale JPEG checks the expansion to 3 channels.
  write_text(dir_ / "wnids.txt", "n02\nn01\n");  // class order is the file's, not sorted
  write_text(dir_ / "words.txt", "n01\tgoldfish, Carassius auratus\nn02\tsalamander\nn03\tunused\n");
  write_file(dir_ / "train" / "n01" / "images" / "n01_0.JPEG", png(2, 2, 3, 1));
  write_file(dir_ / "train" / "n02" / "images" / "n02_1.JPEG", png(2, 2, 3, 2));
  write_file(dir_ / "train" / "n02" / "images" / "n02_0.JPEG", jpeg(2, 2, 1, 9));
  write_file(dir_ / "train" / "n02" / "n02_boxes.txt", Bytes{'x'});
  write_file(dir_ / "val" / "images" / "val_0.JPEG", png(2, 2, 3, 5));
  write_file(dir_ / "val" / "images" / "val_1.JPEG", png(2, 2, 3, 6));
  write_text(dir_ / "val" / "val_annotations.txt", "val_1.JPEG\tn01\t0\t0\t1\t1\nval_0.JPEG\tn02\t0\t0\t1\t1\n");
  const DatasetSplit split = load_tinyimagenet_dir(dir_);
  EXPECT_EQ(split.train.labels, (std::vector<int32_t>{0, 0, 1}));  // n02 (n02_0, n02_1), n01
  EXPECT_EQ(split.train.channels, 3);
  EXPECT_EQ(Bytes(split.train.pixels.begin() + 12, split.train.pixels.end()),
            [] { Bytes b = pattern_chw(2, 2, 3, 2); append(b, pattern_chw(2, 2, 3, 1)); return b; }());
  EXPECT_EQ(split.test.labels, (std::vector<int32_t>{1, 0}));  // annotation order: val_1 (n01), val_0 (n02)
  EXPECT_EQ(Bytes(split.test.pixels.begin(), split.test.pixels.begin() + 12), pattern_chw(2, 2, 3, 6));
  EXPECT_EQ(split.train.class_names, (std::vector<std::string>{"salamander", "goldfish, Carassius auratus"}));
  EXPECT_EQ(split.train.num_classes, 2);
}

TEST_F(TinyImageNetTest, AnnotationAndWnidErrors) {
  const auto entries = parse_val_annotations("a.JPEG\tn01\t1\t2\t3\t4\r\n\nb.JPEG\tn02\n", "ann.txt");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1], (std::pair<std::string, std::string>{"b.JPEG", "n02"}));
  expect_error([] { parse_val_annotations("a.JPEG\tn01\nbroken line\n", "ann.txt"); },
               {"ann.txt:2", "expected at least 2 tab-separated fields", "'broken line'"});
  expect_error([] { parse_val_annotations("../../etc/passwd\tn01\n", "ann.txt"); }, {"ann.txt:1"});
  write_text(dir_ / "wnids.txt", "n01\n");
  write_file(dir_ / "train" / "n01" / "images" / "a.JPEG", png(2, 2, 3, 0));
  write_file(dir_ / "val" / "images" / "v.JPEG", png(2, 2, 3, 0));
  write_text(dir_ / "val" / "val_annotations.txt", "v.JPEG\tn09\n");
  expect_error([&] { load_tinyimagenet_dir(dir_); }, {"val_annotations.txt", "wnid 'n09'", "wnids.txt does not list"});
  write_text(dir_ / "val" / "val_annotations.txt", "missing.JPEG\tn01\n");
  expect_error([&] { load_tinyimagenet_dir(dir_); }, {"missing.JPEG", "cannot open"});
  write_text(dir_ / "wnids.txt", "n01\nn01\n");
  expect_error([&] { load_tinyimagenet_dir(dir_); }, {"wnids.txt", "'n01' is listed twice"});
}
