// digits: scikit-learn's 8x8 handwritten digits, `digits.csv.gz` as shipped in sklearn/datasets/data (the
// test part of UCI's "Optical Recognition of Handwritten Digits", 1797 samples, 13 writers not told apart).
// Format: no header; one sample per line: 64 integers 0..16 (an 8x8 image, row-major; each counts the set
// pixels of a 4x4 block of a 32x32 bitmap), then the label 0..9; comma-separated.
// Stored as float `values` v/16 in [0, 1], C=1, H=8, W=8; no test split (dataset.h).
// digits.csv or digits.csv.gz is read through zlib (read_text_file). Blank lines and a '\r' before the
// newline are ignored; every other departure throws naming the file, the 1-based line and the 1-based
// CSV column, what was expected and what was found.
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <string>
#include <string_view>

#include "data/formats.h"
#include "data/idx.h"  // resolve_plain_or_gz_path, read_text_file
#include "tensor/error.h"

namespace bastion {
namespace {

constexpr int64_t kSide = 8;
constexpr int64_t kPixels = kSide * kSide;
constexpr int64_t kColumns = kPixels + 1;  // 64 values, then the label
constexpr int kMaxValue = 16;              // a 4x4 block has 16 pixels
constexpr int64_t kClasses = 10;
constexpr size_t kQuoteLimit = 20;  // characters of a bad field echoed in a message

std::string_view trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(" \t\r") - begin + 1);
}

// Parses field `column` (1-based) of a line; throws unless it is an integer in [0, max].
int parse_field(std::string_view field, int max, const std::string& where, int64_t column) {
  int value = -1;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  const bool integer = !field.empty() && ec == std::errc() && end == field.data() + field.size();
  const char* what = column == kColumns ? "label" : "value";
  BASTION_CHECK(integer, where, ", column ", column, ": expected an integer ", what, " 0..", max, ", found '",
                field.substr(0, kQuoteLimit), field.size() > kQuoteLimit ? "...'" : "'");
  BASTION_CHECK(0 <= value && value <= max, where, ", column ", column, ": ", what, " ", value,
                " is out of range: expected 0..", max);
  return value;
}

// Appends one line's sample to `d`.
void parse_line(std::string_view line, const std::string& where, Dataset& d) {
  int64_t column = 0;
  for (size_t start = 0;;) {
    const size_t comma = line.find(',', start);
    const std::string_view field = trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start));
    ++column;
    if (column < kColumns) {
      d.values.push_back(static_cast<float>(parse_field(field, kMaxValue, where, column)) / kMaxValue);
    } else {
      BASTION_CHECK(comma == std::string_view::npos, where, ": expected ", kColumns,
                    " comma-separated columns (64 values, label), found more");
      d.labels.push_back(parse_field(field, kClasses - 1, where, column));
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  BASTION_CHECK(column == kColumns, where, ": expected ", kColumns, " comma-separated columns (64 values, label), ",
                "found ", column);
}

Dataset parse_digits_csv(const std::string& text, const std::string& file) {
  Dataset d;
  d.channels = 1;
  d.height = d.width = kSide;
  d.num_classes = kClasses;
  int64_t line_number = 0;
  for (size_t pos = 0; pos <= text.size();) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = trim(std::string_view(text).substr(pos, end - pos));
    ++line_number;
    pos = end + 1;
    if (!line.empty()) parse_line(line, file + ": line " + std::to_string(line_number), d);
  }
  BASTION_CHECK(d.size() > 0, file, ": no samples (", line_number, " blank lines)");
  return d;
}

}  // namespace

DatasetSplit load_digits_dir(const std::filesystem::path& dir) {
  const std::string path = resolve_plain_or_gz_path((dir / "digits.csv").string(), "digits CSV");
  DatasetSplit split;
  split.train = parse_digits_csv(read_text_file(path), path);
  split.test.channels = 1;
  split.test.height = split.test.width = kSide;
  split.test.num_classes = kClasses;
  return split;
}

}  // namespace bastion
