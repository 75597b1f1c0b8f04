// Tests for the MATLAB v5 reader (data/matlab.h) and the SVHN loader on top of it: MAT files written
// here, plain and miCOMPRESSED, read back exactly; every header, element and zlib corruption named with
// the file and byte offset; SVHN's [32,32,3,N] column-major X and label 10 -> 0 through the table.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>

#include "data/dataset.h"
#include "data/formats.h"
#include "data/matlab.h"
#include "tests/test_support.h"

using namespace bastion;
using namespace bastion::testing;
namespace fs = std::filesystem;

using ReaderTest = TempDirTest;

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
      {"text", 4, kMiUint16, {1, 2}, {'h', 0, 'i', 0}},                    // char: skipped
      {"z", kMxDoubleClass, kMiDouble, {1, 1}, as_doubles({1.0}), 0x800},  // complex: skipped
      {"counts", kMxDoubleClass, kMiUint8, {2, 3}, {1, 2, 3, 4, 5, 250}},  // double stored narrow
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
