// Tests for the non-image readers: WISDM raw windows and ARFF features (data/wisdm.h), scikit-learn
// digits (data/digits.cpp), and the IDX reader's in-memory twins (synthetic data: test_data_synthetic.cpp). Small files are generated in a temp dir (plain and gzip); every corruption
// case checks that the message names the file, the line and what was wrong. The real files are tested
// when $BASTION_DATA has them (else skipped, with the reason).
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "data/dataset.h"
#include "data/formats.h"
#include "data/idx.h"
#include "data/wisdm.h"
#include "tests/test_support.h"

using namespace bastion;
using namespace bastion::testing;
namespace fs = std::filesystem;

namespace {

using TabularTest = TempDirTest;

// ---------------------------------------------------------------- WISDM raw helpers

// `n` records of one run; sample t has x = base + t, y = base + 100 + t, z = base + 200 + t.
std::string raw_run(int user, const std::string& activity, int n, int base = 0) {
  std::ostringstream out;
  for (int t = 0; t < n; ++t)
    out << user << "," << activity << "," << 1000 + t << "," << base + t << "," << base + 100 + t << ","
        << base + 200 + t << ";\n";
  return out.str();
}

std::vector<float> window_of(const WisdmParsed& p, int64_t n) {
  const int64_t numel = p.data.sample_numel();
  return {p.data.values.begin() + n * numel, p.data.values.begin() + (n + 1) * numel};
}

}  // namespace

// ---------------------------------------------------------------- WISDM raw

TEST(WisdmRaw, WindowsPerRunChannelMajorRemainderDropped) {
  const std::string text = raw_run(7, "Walking", 5) + raw_run(7, "Jogging", 3, 50) + raw_run(8, "Walking", 4, 90);
  const WisdmParsed p = parse_wisdm_raw_text(text, "raw.txt", 2);
  EXPECT_EQ(p.data.channels, 3);
  EXPECT_EQ(p.data.height, 1);
  EXPECT_EQ(p.data.width, 2);
  EXPECT_EQ(p.data.num_classes, 6);
  EXPECT_TRUE(p.data.pixels.empty());
  EXPECT_EQ(p.data.labels, (std::vector<int32_t>{0, 0, 1, 0, 0}));
  EXPECT_EQ(p.data.groups, (std::vector<int32_t>{7, 7, 7, 8, 8}));
  EXPECT_EQ(p.stats.records, 12);
  EXPECT_EQ(p.stats.skipped, 0);
  EXPECT_EQ(p.stats.dropped_samples, 2);  // the 5th Walking and the 3rd Jogging sample
  // Sample 1 = records 2 and 3 of the first run: x plane, then y, then z.
  EXPECT_EQ(window_of(p, 1), (std::vector<float>{2, 3, 102, 103, 202, 203}));
  EXPECT_EQ(window_of(p, 2), (std::vector<float>{50, 51, 150, 151, 250, 251}));
  EXPECT_EQ(p.data.class_names,
            (std::vector<std::string>{"Walking", "Jogging", "Upstairs", "Downstairs", "Sitting", "Standing"}));
}

TEST(WisdmRaw, ActivityOrderIsDocumented) {
  const char* names[] = {"Walking", "Jogging", "Upstairs", "Downstairs", "Sitting", "Standing"};
  for (int32_t i = 0; i < 6; ++i) EXPECT_EQ(wisdm_activity_index(names[i]), i);
  EXPECT_EQ(wisdm_activity_index("walking"), -1);
  EXPECT_EQ(wisdm_activity_index(""), -1);
}

TEST(WisdmRaw, QuirksOfTheRealFileAreTolerated) {
  // Several records on a line, a missing ';', a ',' before ';', CRLF, blank lines, blanks around fields.
  const std::string text =
      "33,Jogging,1,0.5,1.5,2.5;33,Jogging,2,1,2,3;\r\n"
      "\n"
      "33,Jogging,3,-0.6946377,12.680544,0.50395286,;\n"
      "   33 , Jogging , 4 , 4 , 5 , 6\n"
      ";;\n";
  const WisdmParsed p = parse_wisdm_raw_text(text, "raw.txt", 4);
  EXPECT_EQ(p.stats.skipped, 0) << p.stats.first_skipped;
  EXPECT_EQ(p.stats.records, 4);
  ASSERT_EQ(p.data.size(), 1);
  EXPECT_EQ(window_of(p, 0),
            (std::vector<float>{0.5f, 1, -0.6946377f, 4, 1.5f, 2, 12.680544f, 5, 2.5f, 3, 0.50395286f, 6}));
}

TEST(WisdmRaw, MalformedRecordsAreSkippedCountedAndDoNotSplitARun) {
  const std::string text =
      "1,Walking,1,1,1,1;\n"
      "1,Walking,2,1,,1;\n"         // line 2: empty y
      "1,Wlaking,3,1,1,1;\n"        // line 3: unknown activity
      "1,Walking,4,1,1;\n"          // five fields
      "1,Walking,x,1,1,1;\n"        // timestamp
      "-1,Walking,6,1,1,1;\n"       // negative user
      "1,Walking,7,nan,1,1;\n"      // non-finite
      "1,Walking,8,1,1,1e99;\n"     // overflows float
      "1,Walking,9,1,1,1,2,3,4;\n"  // too many fields
      "1,Walking,10,2,2,2;\n";
  const WisdmParsed p = parse_wisdm_raw_text(text, "raw.txt", 2);
  EXPECT_EQ(p.stats.skipped, 8);
  EXPECT_EQ(p.stats.records, 2);
  EXPECT_EQ(p.stats.first_skipped, "raw.txt:2: y '' is not a finite number");
  ASSERT_EQ(p.data.size(), 1);  // the two valid records still form one window
  EXPECT_EQ(window_of(p, 0), (std::vector<float>{1, 2, 1, 2, 1, 2}));
}

TEST(WisdmRaw, FailsWhenNoWindowRemains) {
  expect_error([] { parse_wisdm_raw_text("hello\nworld;\n", "junk.txt", 2); },
               {"junk.txt", "no complete window of 2 samples", "0 valid records", "2 malformed records skipped",
                "first: junk.txt:1: expected 6 fields"});
  expect_error([] { parse_wisdm_raw_text(raw_run(3, "Sitting", 199), "short.txt", 200); },
               {"short.txt", "no complete window of 200 samples", "199 valid records", "0 malformed"});
  expect_error([] { parse_wisdm_raw_text("", "empty.txt", 200); }, {"empty.txt", "0 valid records"});
  expect_error([] { parse_wisdm_raw_text(raw_run(3, "Sitting", 4), "w.txt", 0); }, {"w.txt", "window", "got 0"});
}

TEST_F(TabularTest, WisdmRawLoadsPlainAndGzipThroughTheTable) {
  const std::string text = raw_run(4, "Upstairs", 450) + raw_run(9, "Standing", 200, 7);
  write_text(dir_ / "plain" / "wisdm" / "WISDM_ar_v1.1_raw.txt", text);
  write_text(dir_ / "gz" / "wisdm" / "WISDM_ar_v1.1_raw.txt.gz", text);
  for (const char* root : {"plain", "gz"}) {
    const DatasetSplit split = load_dataset("wisdm", (dir_ / root).string());
    EXPECT_EQ(split.train.name, "wisdm");
    EXPECT_EQ(split.train.sample_numel(), 3 * 200);
    EXPECT_EQ(split.train.labels, (std::vector<int32_t>{2, 2, 5})) << root;
    EXPECT_EQ(split.train.groups, (std::vector<int32_t>{4, 4, 9}));
    EXPECT_EQ(split.test.size(), 0);
    EXPECT_EQ(split.test.width, 200);
    EXPECT_EQ(split.train.mean.size(), 3u);  // computed from the windows (no published preset)
  }
}

TEST_F(TabularTest, WisdmMissingFileNamesThePath) {
  expect_error([&] { load_wisdm_raw_dir(dir_); },
               {"WISDM file not found", (dir_ / "WISDM_ar_v1.1_raw.txt").string(), "WISDM_ar_v1.1_raw.txt.gz"});
  expect_error([&] { load_wisdm_features_dir(dir_); }, {"WISDM_ar_v1.1_transformed.arff"});
}

// ---------------------------------------------------------------- WISDM ARFF

namespace {

// An ARFF like the real one; `class_decl` is "" (undeclared, as the real file) or an @attribute line.
std::string arff_header(const std::string& class_decl = "", const std::string& user_type = "{\"33\" , \"7\"}") {
  std::string out = "% a comment\n@RELATION activity_recognition_labeled\r\n\r\n@attribute \"UNIQUE_ID\" numeric\n";
  out += "@attribute 'user' " + user_type + "\n";
  for (const char* name : kWisdmFeatureNames) out += std::string("@attribute \"") + name + "\" numeric\r\n";
  return out + class_decl + "\n@data\n";
}

// A row whose feature k is first + k (or `feature_text` for every feature when given).
std::string arff_row(int id, const std::string& user, const std::string& activity, double first,
                     const std::string& feature_text = "") {
  std::ostringstream out;
  out << id << "," << user;
  for (int64_t k = 0; k < kWisdmFeatureCount; ++k) {
    out << ",";
    if (feature_text.empty())
      out << first + k;
    else
      out << feature_text;
  }
  out << "," << activity << "\r\n";
  return out.str();
}

std::string two_rows() { return arff_row(1, "33", "Jogging", 0.5) + arff_row(2, "7", "Standing", 10); }

}  // namespace

TEST(WisdmArff, ParsesRowsWithUndeclaredClass) {
  const WisdmParsed p = parse_wisdm_arff_text(arff_header() + two_rows(), "f.arff");
  EXPECT_EQ(p.data.channels, 1);
  EXPECT_EQ(p.data.height, 1);
  EXPECT_EQ(p.data.width, 43);
  EXPECT_EQ(p.data.labels, (std::vector<int32_t>{1, 5}));
  EXPECT_EQ(p.data.groups, (std::vector<int32_t>{33, 7}));
  ASSERT_EQ(p.data.values.size(), 86u);
  EXPECT_EQ(p.data.values[0], 0.5f);
  EXPECT_EQ(p.data.values[42], 42.5f);
  EXPECT_EQ(p.data.values[43], 10.0f);
  EXPECT_EQ(p.stats.records, 2);
  EXPECT_EQ(p.stats.imputed_rows, 0);
}

TEST(WisdmArff, DeclaredClassQuotedValuesAndUntypedUser) {
  const std::string header = arff_header("@attribute class {Walking, 'Jogging', \"Standing\"}", /*user_type=*/"");
  std::string row = "% comment\n1,'12'";  // quoted user and class, blanks around a field
  for (int64_t k = 0; k < kWisdmFeatureCount; ++k) row += ",1";
  row += ", \"Standing\"\n";
  const WisdmParsed p = parse_wisdm_arff_text(header + row, "f.arff");
  EXPECT_EQ(p.data.groups, (std::vector<int32_t>{12}));
  EXPECT_EQ(p.data.labels, (std::vector<int32_t>{5}));
}

TEST(WisdmArff, MissingFeatureValuesTakeTheirColumnMean) {
  std::string row = arff_row(3, "33", "Sitting", 0, "?");
  const std::string text = arff_header() + two_rows() + row + arff_row(4, "33", "Walking", 2.5);
  const WisdmParsed p = parse_wisdm_arff_text(text, "f.arff");
  ASSERT_EQ(p.data.size(), 4);
  EXPECT_EQ(p.stats.records, 4);
  EXPECT_EQ(p.stats.imputed_rows, 1);
  EXPECT_EQ(p.stats.imputed_values, 43);
  EXPECT_EQ(p.stats.first_skipped, "f.arff:53: missing value '?' in field 3 (X0)");
  // Column 0 holds 0.5, 10 and 2.5 elsewhere: mean 13/3.
  EXPECT_FLOAT_EQ(p.data.values[2 * 43], 13.0f / 3.0f);
  EXPECT_FLOAT_EQ(p.data.values[2 * 43 + 42], (42.5f + 52 + 44.5f) / 3.0f);
  EXPECT_EQ(p.data.labels[2], 4);
}

TEST(WisdmArff, HeaderErrorsNameFileLineAndWhat) {
  const std::string good = arff_header();
  expect_error([&] { parse_wisdm_arff_text(good.substr(0, good.find("@data")), "a.arff"); },
               {"a.arff", "no @data line"});
  expect_error([] { parse_wisdm_arff_text("@attribute x numeric\n", "b.arff"); },
               {"b.arff:1", "@attribute before @relation"});
  expect_error([] { parse_wisdm_arff_text("@relation r\nhello\n", "c.arff"); },
               {"c.arff:2", "expected @relation, @attribute or @data", "'hello'"});
  std::string renamed = good;
  renamed.replace(renamed.find("\"X3\""), 4, "\"X33\"");
  expect_error([&] { parse_wisdm_arff_text(renamed, "d.arff"); }, {"d.arff:9", "attribute 6 is 'X33', expected 'X3'"});
  std::string typed = good;
  typed.replace(typed.find("\"YAVG\" numeric"), 14, "\"YAVG\" string");
  expect_error([&] { parse_wisdm_arff_text(typed, "e.arff"); },
               {"e.arff:37", "attribute 34 ('YAVG') has type 'string', expected numeric"});
  expect_error([] { parse_wisdm_arff_text("@relation r\n@attribute UNIQUE_ID numeric\n@data\n", "f.arff"); },
               {"f.arff", "expected 45 or 46 attributes", "found 1"});
  expect_error([] { parse_wisdm_arff_text(arff_header("@attribute class {Walking, Running}"), "g.arff"); },
               {"g.arff:49: attribute 46 ('class') lists 'Running'", "expected one of Walking, Jogging"});
  expect_error([] { parse_wisdm_arff_text(arff_header("", "{\"33\", \"x\"}"), "h.arff"); },
               {"h.arff:5: attribute 2 ('user') lists 'x', not a user id"});
  expect_error([] { parse_wisdm_arff_text(arff_header("", "{\"33\", \"7\""), "i.arff"); },
               {"i.arff:5", "lacks its closing '}'"});
  expect_error([] { parse_wisdm_arff_text("@relation r\n@attribute \"UNIQUE_ID numeric\n", "j.arff"); },
               {"j.arff:2", "unterminated quote"});
}

TEST(WisdmArff, RowErrorsNameFileLineFieldAndWhat) {
  const std::string h = arff_header();  // 50 lines; the first row is line 51
  std::string short_row = arff_row(1, "33", "Walking", 0);
  short_row.erase(short_row.find(",0,"), 2);
  expect_error([&] { parse_wisdm_arff_text(h + short_row, "a.arff"); },
               {"a.arff:51", "expected 46 fields", "found 45"});
  expect_error([&] { parse_wisdm_arff_text(h + two_rows() + arff_row(3, "33", "Walking", 0, "0.1x"), "b.arff"); },
               {"b.arff:53", "field 3 (X0)", "expected a finite number", "'0.1x'"});
  expect_error([&] { parse_wisdm_arff_text(h + arff_row(1, "33", "Running", 0), "c.arff"); },
               {"c.arff:51", "field 46 (class)", "'Running'"});
  expect_error([&] { parse_wisdm_arff_text(h + arff_row(1, "34", "Walking", 0), "d.arff"); },
               {"d.arff:51", "field 2 (user)", "declared in the header", "'34'"});
  expect_error([&] { parse_wisdm_arff_text(h + arff_row(1, "?", "Walking", 0), "e.arff"); },
               {"e.arff:51", "field 2 (user) is missing"});
  expect_error([&] { parse_wisdm_arff_text(h + arff_row(1, "33", "Walking", 0, "inf"), "f.arff"); },
               {"f.arff:51", "'inf'"});
  expect_error([&] { parse_wisdm_arff_text(h + "{0 1, 1 33}\n", "g.arff"); }, {"g.arff:51", "sparse"});
  expect_error([&] { parse_wisdm_arff_text(h, "h.arff"); }, {"h.arff", "no data rows"});
  expect_error([&] { parse_wisdm_arff_text(h + arff_row(1, "'33", "Walking", 0), "i.arff"); },
               {"i.arff:51", "unterminated ' quote"});
  expect_error([&] { parse_wisdm_arff_text(h + arff_row(1, "33", "Walking", 0, "?"), "j.arff"); },
               {"j.arff", "column 3 (X0) has no value in any row", "j.arff:51: missing value"});
}

TEST_F(TabularTest, WisdmFeaturesLoadGzipThroughTheTable) {
  write_text(dir_ / "wisdm" / "WISDM_ar_v1.1_transformed.arff.gz", arff_header() + two_rows());
  const DatasetSplit split = load_dataset("wisdm-features", dir_.string());
  EXPECT_EQ(split.train.name, "wisdm-features");
  EXPECT_EQ(split.train.size(), 2);
  EXPECT_EQ(split.train.groups, (std::vector<int32_t>{33, 7}));
  EXPECT_EQ(split.test.size(), 0);
  EXPECT_EQ(split.test.width, 43);
}

// ---------------------------------------------------------------- digits

namespace {

// A digits line: pixel j = (seed + j) % 17, then the label.
std::string digits_line(int seed, int label) {
  std::string out;
  for (int j = 0; j < 64; ++j) out += std::to_string((seed + j) % 17) + ",";
  return out + std::to_string(label) + "\n";
}

}  // namespace

TEST_F(TabularTest, DigitsPlainAndGzip) {
  const std::string text = digits_line(0, 3) + digits_line(5, 9) + "\r\n" + digits_line(16, 0);
  write_text(dir_ / "plain" / "sklearn-digits" / "digits.csv", text);
  write_text(dir_ / "gz" / "digits" / "digits.csv.gz", text);
  for (const char* root : {"plain", "gz"}) {
    const DatasetSplit split = load_dataset("digits", (dir_ / root).string());
    EXPECT_EQ(split.train.size(), 3) << root;
    EXPECT_EQ(split.train.channels, 1);
    EXPECT_EQ(split.train.height, 8);
    EXPECT_EQ(split.train.width, 8);
    EXPECT_EQ(split.train.labels, (std::vector<int32_t>{3, 9, 0}));
    ASSERT_EQ(split.train.values.size(), 3u * 64);
    EXPECT_EQ(split.train.values[0], 0.0f);
    EXPECT_EQ(split.train.values[16], 1.0f);  // (0 + 16) % 17 = 16 -> 16/16
    EXPECT_EQ(split.train.values[64 + 1], 6.0f / 16);
    EXPECT_EQ(split.test.size(), 0);
    EXPECT_EQ(split.test.height, 8);
  }
}

TEST_F(TabularTest, DigitsErrorsNameFileLineAndColumn) {
  const fs::path file = dir_ / "digits.csv";
  const std::string good = digits_line(0, 1);
  const auto check = [&](const std::string& text, const std::vector<std::string>& parts) {
    write_text(file, text);
    std::vector<std::string> all = parts;
    all.push_back(file.string());
    expect_error([&] { load_digits_dir(dir_); }, all);
  };
  std::string few = good;
  few.erase(few.find(",1\n"));
  check(good + few + "\n", {"line 2", "expected 65 comma-separated columns", "found 64"});
  check(good + good.substr(0, good.size() - 1) + ",4\n", {"line 2", "expected 65", "found more"});
  std::string bad = good;
  bad.replace(0, 1, "a");
  check(good + good + bad, {"line 3, column 1", "expected an integer value 0..16", "found 'a'"});
  bad = good;
  bad.replace(bad.find(",3,"), 3, ",17,");
  check(bad, {"line 1, column 4", "value 17 is out of range: expected 0..16"});
  bad = good;
  bad.replace(bad.find(",5,"), 3, ",-1,");
  check(bad, {"line 1, column 6", "value -1 is out of range"});
  bad = good;
  bad.replace(bad.find(",6,"), 3, ",2.5,");
  check(bad, {"line 1, column 7", "found '2.5'"});
  check(good.substr(0, good.size() - 2) + "10\n", {"line 1, column 65", "label 10 is out of range: expected 0..9"});
  check(good.substr(0, good.size() - 2) + "\n", {"line 1, column 65", "expected an integer label", "found ''"});
  check("\n\n", {"no samples"});
  fs::remove(file);
  expect_error([&] { load_digits_dir(dir_); }, {"digits CSV file not found", file.string(), "digits.csv.gz"});
}

// ---------------------------------------------------------------- IDX in memory

TEST(IdxBytes, SameChecksAsTheFileReader) {
  const std::vector<uint8_t> images = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 10, 20, 30, 40};
  const IdxImages parsed = parse_idx_images_bytes(images.data(), images.size(), "mem");
  EXPECT_EQ(parsed.count, 2);
  EXPECT_EQ(parsed.pixels, (std::vector<uint8_t>{10, 20, 30, 40}));
  expect_error([&] { parse_idx_images_bytes(images.data(), images.size() - 1, "mem"); },
               {"mem: truncated payload", "expected 4 bytes of pixels after offset 16, file ends at byte 19"});
  const std::vector<uint8_t> labels = {0, 0, 8, 1, 0, 0, 0, 3, 1, 7, 12};
  expect_error([&] { parse_idx_labels_bytes(labels.data(), labels.size(), "lab", 10); },
               {"lab: label 12 at index 2 (byte offset 10)"});
  expect_error([&] { parse_idx_images_bytes(labels.data(), labels.size(), "lab"); },
               {"lab: bad magic at byte 0", "labels file"});
  // A header promising 4 G labels over 3 bytes fails without reserving gigabytes.
  const std::vector<uint8_t> huge = {0, 0, 8, 1, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3};
  expect_error([&] { parse_idx_labels_bytes(huge.data(), huge.size(), "huge", 10); },
               {"huge: truncated payload", "expected 4294967295 bytes of labels"});
}

// ---------------------------------------------------------------- real files

namespace {

// The folder of a registered set, or "" with the reason when it is not installed.
std::string real_dir(const char* name, std::string& why) {
  try {
    return find_dataset_dir(name, "");
  } catch (const Error& e) {
    why = e.what();
    return "";
  }
}

}  // namespace

// Pinned values computed once from the file with Python's gzip/csv modules.
TEST(DatasetRealTabular, Digits) {
  std::string why;
  if (real_dir("digits", why).empty()) GTEST_SKIP() << "digits not available (set BASTION_DATA): " << why;
  const DatasetSplit split = load_dataset("digits", "");
  ASSERT_EQ(split.train.size(), 1797);
  EXPECT_EQ(split.test.size(), 0);
  EXPECT_EQ(std::vector<int32_t>(split.train.labels.begin(), split.train.labels.begin() + 10),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  double sum = 0;  // v/16 is exact in float, so the sum of v is recovered exactly
  for (float v : split.train.values) sum += v * 16.0;
  EXPECT_EQ(sum, 561718.0);
  EXPECT_EQ(std::accumulate(split.train.labels.begin(), split.train.labels.end(), int64_t{0}), 8070);
}

// Pinned with awk/Python from the ARFF: 5418 rows, 474 of them with '?' (615 values).
TEST(DatasetRealTabular, WisdmFeatures) {
  std::string why;
  const std::string dir = real_dir("wisdm-features", why);
  if (dir.empty()) GTEST_SKIP() << "wisdm-features not available (set BASTION_DATA): " << why;
  const std::string path = (fs::path(dir) / "WISDM_ar_v1.1_transformed.arff").string();
  const WisdmParsed p = parse_wisdm_arff_text(read_text_file(path), path);
  EXPECT_EQ(p.stats.records, 5418);
  EXPECT_EQ(p.stats.imputed_rows, 474);
  EXPECT_EQ(p.stats.imputed_values, 615);
  EXPECT_EQ(p.stats.first_skipped, path + ":59: missing value '?' in field 36 (XPEAK)");
  const DatasetSplit split = load_dataset("wisdm-features", "");
  ASSERT_EQ(split.train.size(), 5418);
  EXPECT_EQ(std::vector<int32_t>(split.train.labels.begin(), split.train.labels.begin() + 8),
            (std::vector<int32_t>{1, 1, 1, 0, 0, 0, 2, 2}));
  EXPECT_EQ(std::vector<int32_t>(split.train.groups.begin(), split.train.groups.begin() + 3),
            (std::vector<int32_t>{33, 33, 33}));
  EXPECT_EQ(std::set<int32_t>(split.train.groups.begin(), split.train.groups.end()).size(), 36u);
  std::map<int32_t, int> counts;
  for (int32_t y : split.train.labels) ++counts[y];
  EXPECT_EQ(counts, (std::map<int32_t, int>{{0, 2081}, {1, 1625}, {2, 632}, {3, 528}, {4, 306}, {5, 246}}));
  EXPECT_EQ(split.train.values[0], 0.04f);     // row 1, X0
  EXPECT_EQ(split.train.values[42], 11.96f);   // row 1, RESULTANT
  EXPECT_EQ(split.train.values[33], 2075.0f);  // row 1, XPEAK
}
