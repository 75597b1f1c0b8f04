// Tests for the image-dataset readers behind the dataset table: EMNIST (IDX, transposed), CIFAR binary,
// image folders and TinyImageNet through stb_image (SVHN and the MAT v5 reader: test_data_matlab.cpp).
// Each reader gets a round trip on small files written here (PNG/JPEG trees through stb_image_write),
// corrupt-file tests that check the message names the file and what was wrong, and, where the real
// files are present ($BASTION_DATA), pinned counts, labels and pixel checksums.
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
#include "tests/test_support.h"

using namespace bastion;
using namespace bastion::testing;
namespace fs = std::filesystem;

using ReaderTest = TempDirTest;

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
  expect_error([&] { decode_image_bytes(cut.data(), cut.size(), "cut.png", 3); }, {"cut.png", "PNG chunk", "remain"});
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
  put_le(62, 4), put_le(0, 4), put_le(54, 4);                     // file size, reserved, pixel offset
  put_le(40, 4), put_le(2048, 4), put_le(2048, 4), put_le(1, 2);  // DIB size, width, height, planes
  put_le(24, 2), put_le(0, 4), put_le(0, 4), put_le(2835, 4), put_le(2835, 4), put_le(0, 4), put_le(0, 4);
  bmp.resize(62, 0);
  expect_error([&] { decode_image_bytes(bmp.data(), bmp.size(), "lying.bmp", 3); },
               {"lying.bmp", "header says 2048x2048", "only 62 bytes"});
  // A PNG chunk claiming 1 GiB of data in a small file: stb_image would grow its IDAT buffer to that size
  // before reading (fuzz_image_folder found a 2 KB file that made it reallocate 2 GB).
  Bytes chunky = png(4, 4, 3, 0);
  const Bytes idat = {'I', 'D', 'A', 'T'};
  const auto at = std::search(chunky.begin(), chunky.end(), idat.begin(), idat.end()) - chunky.begin();
  ASSERT_LT(at, static_cast<long>(chunky.size()));
  chunky[at - 4] = 0x40, chunky[at - 3] = 0, chunky[at - 2] = 0, chunky[at - 1] = 0;
  expect_error([&] { decode_image_bytes(chunky.data(), chunky.size(), "chunky.png", 3); },
               {"chunky.png", "PNG chunk 'IDAT'", "claims 1073741824 data bytes"});
  const Bytes gif = {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0, 0, 0};
  expect_error([&] { decode_image_bytes(gif.data(), gif.size(), "x.gif", 3); },
               {"x.gif", "expected a PNG, JPEG or BMP signature"});
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
  EXPECT_EQ(Bytes(split.train.pixels.begin() + 12, split.train.pixels.end()), [] {
    Bytes b = pattern_chw(2, 2, 3, 2);
    append(b, pattern_chw(2, 2, 3, 1));
    return b;
  }());
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
