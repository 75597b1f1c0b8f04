// WISDM v1.1 readers: the raw accelerometer file (windows) and the transformed ARFF (features). Format,
// labels and the quirk policy are in wisdm.h. Both parsers work on the whole text in memory (50 MB for
// the raw file), which is what the fuzzer drives; string_views into it avoid a copy per record.
#include "data/wisdm.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <type_traits>
#include <vector>

#include "data/formats.h"
#include "data/idx.h"  // resolve_plain_or_gz_path, read_text_file
#include "tensor/error.h"

namespace bastion {

const std::array<const char*, kWisdmFeatureCount> kWisdmFeatureNames = {
    "X0",        "X1",        "X2",        "X3",        "X4",        "X5",        "X6",       "X7",    "X8",
    "X9",        "Y0",        "Y1",        "Y2",        "Y3",        "Y4",        "Y5",       "Y6",    "Y7",
    "Y8",        "Y9",        "Z0",        "Z1",        "Z2",        "Z3",        "Z4",       "Z5",    "Z6",
    "Z7",        "Z8",        "Z9",        "XAVG",      "YAVG",      "ZAVG",      "XPEAK",    "YPEAK", "ZPEAK",
    "XABSOLDEV", "YABSOLDEV", "ZABSOLDEV", "XSTANDDEV", "YSTANDDEV", "ZSTANDDEV", "RESULTANT"};

int32_t wisdm_activity_index(std::string_view name) {
  for (size_t i = 0; i < kWisdmActivities.size(); ++i)
    if (name == kWisdmActivities[i]) return static_cast<int32_t>(i);
  return -1;
}

namespace {

constexpr size_t kQuoteLimit = 40;  // characters of an offending field echoed in a message

std::string_view trim(std::string_view s) {
  constexpr const char* kBlank = " \t\r\f\v";
  const size_t begin = s.find_first_not_of(kBlank);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kBlank) - begin + 1);
}

// The field as quoted in a message, cut short: a fuzzed line may be megabytes long.
std::string shown(std::string_view s) {
  std::string out = "'";  // built by append: GCC 12 warns (-Wrestrict, falsely) on "'" + std::string
  out.append(s.substr(0, kQuoteLimit));
  out.append(s.size() > kQuoteLimit ? "...'" : "'");
  return out;
}

// Whole-field parse (no leading '+', no trailing junk). Floats must be finite: from_chars accepts "inf"
// and "nan", and a float from a larger double would overflow, so floats are parsed as float directly.
template <typename T>
bool parse_whole(std::string_view s, T& out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || end != s.data() + s.size()) return false;
  if constexpr (std::is_floating_point_v<T>) return std::isfinite(out);
  return true;
}

bool parse_user(std::string_view s, int32_t& user) { return parse_whole(s, user) && user >= 0; }

std::string activity_list() {
  std::string list;
  for (const char* name : kWisdmActivities) list += (list.empty() ? "" : ", ") + std::string(name);
  return list;
}

Dataset empty_like(const Dataset& d) {
  Dataset out;
  out.channels = d.channels;
  out.height = d.height;
  out.width = d.width;
  out.num_classes = d.num_classes;
  out.class_names = d.class_names;
  return out;
}

Dataset wisdm_dataset(int64_t channels, int64_t width) {
  Dataset d;
  d.channels = channels;
  d.height = 1;
  d.width = width;
  d.num_classes = static_cast<int64_t>(kWisdmActivities.size());
  d.class_names.assign(kWisdmActivities.begin(), kWisdmActivities.end());
  return d;
}

// ---------------------------------------------------------------- raw records

struct RawRecord {
  int32_t user = 0, activity = 0;
  float xyz[3] = {0, 0, 0};
};

// Parses one record (without its ';'); returns "" when valid, else why it is skipped.
std::string parse_raw_record(std::string_view record, RawRecord& r) {
  constexpr size_t kMaxFields = 7;  // six, plus the empty one a trailing ',' leaves
  std::string_view fields[kMaxFields];
  size_t count = 0;
  for (size_t start = 0;; ++count) {
    const size_t comma = record.find(',', start);
    if (count == kMaxFields) return "expected 6 fields (user,activity,timestamp,x,y,z), found more than 7";
    fields[count] = trim(record.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  ++count;
  if (count == kMaxFields && fields[kMaxFields - 1].empty()) --count;  // "...,z,;" (trailing comma)
  if (count != 6) return "expected 6 fields (user,activity,timestamp,x,y,z), found " + std::to_string(count);
  if (!parse_user(fields[0], r.user)) return "user " + shown(fields[0]) + " is not a non-negative integer";
  r.activity = wisdm_activity_index(fields[1]);
  if (r.activity < 0) return "unknown activity " + shown(fields[1]) + " (expected one of " + activity_list() + ")";
  int64_t timestamp = 0;  // unused, but a garbled timestamp marks a garbled record
  if (!parse_whole(fields[2], timestamp)) return "timestamp " + shown(fields[2]) + " is not an integer";
  static constexpr const char* kAxes[3] = {"x", "y", "z"};
  for (int axis = 0; axis < 3; ++axis) {
    if (!parse_whole(fields[3 + axis], r.xyz[axis]))
      return std::string(kAxes[axis]) + " " + shown(fields[3 + axis]) + " is not a finite number";
  }
  return "";
}

// Collects one (user, activity) run at a time and emits every complete window of it.
class WindowCutter {
 public:
  WindowCutter(int64_t window, WisdmParsed& out) : window_(window), out_(out) {
    buffer_.reserve(static_cast<size_t>(3 * window));
  }

  void add(const RawRecord& r) {
    if (r.user != user_ || r.activity != activity_) {
      end_run();
      user_ = r.user;
      activity_ = r.activity;
    }
    buffer_.insert(buffer_.end(), r.xyz, r.xyz + 3);
    if (static_cast<int64_t>(buffer_.size()) == 3 * window_) emit();
  }

  void end_run() {
    out_.stats.dropped_samples += static_cast<int64_t>(buffer_.size() / 3);
    buffer_.clear();
  }

 private:
  // The buffer is sample-major (x, y, z per record); a Dataset sample is channel-major (C, H=1, W).
  void emit() {
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t t = 0; t < window_; ++t) out_.data.values.push_back(buffer_[static_cast<size_t>(3 * t + c)]);
    out_.data.labels.push_back(activity_);
    out_.data.groups.push_back(user_);
    buffer_.clear();
  }

  int64_t window_;
  WisdmParsed& out_;
  std::vector<float> buffer_;
  int32_t user_ = -1, activity_ = -1;
};

}  // namespace

WisdmParsed parse_wisdm_raw_text(const std::string& text, const std::string& file, int64_t window) {
  BASTION_CHECK(window >= 1 && window <= kWisdmMaxWindow, file, ": WISDM window must be in [1, ", kWisdmMaxWindow,
                "], got ", window);
  WisdmParsed out;
  out.data = wisdm_dataset(3, window);
  WindowCutter cutter(window, out);
  const std::string_view all(text);
  int64_t line = 1;
  for (size_t pos = 0; pos <= all.size();) {
    const size_t end = std::min(all.find_first_of(";\n", pos), all.size());
    const std::string_view record = trim(all.substr(pos, end - pos));
    if (!record.empty()) {
      RawRecord r;
      const std::string reason = parse_raw_record(record, r);
      if (reason.empty()) {
        ++out.stats.records;
        cutter.add(r);
      } else if (out.stats.skipped++ == 0) {
        out.stats.first_skipped = file + ":" + std::to_string(line) + ": " + reason;
      }
    }
    if (end < all.size() && all[end] == '\n') ++line;
    pos = end + 1;
  }
  cutter.end_run();
  BASTION_CHECK(out.data.size() > 0, file, ": no complete window of ", window, " samples: ", out.stats.records,
                " valid records, ", out.stats.skipped, " malformed records skipped",
                out.stats.skipped > 0 ? " (first: " + out.stats.first_skipped + ")" : std::string());
  return out;
}

// ---------------------------------------------------------------- ARFF

namespace {

constexpr size_t kArffAttributes = 2 + kWisdmFeatureCount + 1;  // UNIQUE_ID, user, features, class
constexpr size_t kArffNominalLimit = 4096;  // values in one {..} list; the real file's longest has 36

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// Hands out the text's lines, trimmed, skipping blank lines and '%' comments; tracks the 1-based number.
class LineCursor {
 public:
  explicit LineCursor(const std::string& text) : text_(text) {}
  bool next(std::string_view& out) {
    while (pos_ <= text_.size()) {
      const size_t end = std::min(text_.find('\n', pos_), text_.size());
      out = trim(text_.substr(pos_, end - pos_));
      pos_ = end + 1;
      ++line_;
      if (!out.empty() && out[0] != '%') return true;
    }
    return false;
  }
  int64_t line() const { return line_; }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  int64_t line_ = 0;
};

enum class ArffType { kNumeric, kNominal, kUntyped, kOther };

struct ArffAttribute {
  std::string name;
  ArffType type = ArffType::kUntyped;
  std::string type_text;            // as written, for messages
  std::vector<std::string> values;  // nominal values, unquoted
  int64_t line = 0;
};

// Splits "a, 'b c', \"d\"" at commas outside quotes, unquoting and trimming each field; stops after
// max_fields + 1 fields (enough to report a wrong count). Throws on an unterminated quote.
std::vector<std::string_view> split_quoted(std::string_view s, size_t max_fields, const std::string& where) {
  std::vector<std::string_view> fields;
  size_t pos = 0;
  while (fields.size() <= max_fields) {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t')) ++pos;
    size_t end = 0;
    if (pos < s.size() && (s[pos] == '\'' || s[pos] == '"')) {
      const size_t close = s.find(s[pos], pos + 1);
      BASTION_CHECK(close != std::string_view::npos, where, ": unterminated ", s[pos], " quote at column ", pos + 1);
      fields.push_back(s.substr(pos + 1, close - pos - 1));
      end = s.find(',', close + 1);
      BASTION_CHECK(trim(s.substr(close + 1, end == std::string_view::npos ? end : end - close - 1)).empty(), where,
                    ": unexpected text after the quoted value at column ", pos + 1);
    } else {
      end = s.find(',', pos);
      fields.push_back(trim(s.substr(pos, end == std::string_view::npos ? end : end - pos)));
    }
    if (end == std::string_view::npos) break;
    pos = end + 1;
  }
  return fields;
}

ArffType type_of(std::string_view text) {
  if (text.empty()) return ArffType::kUntyped;
  if (iequals(text, "numeric") || iequals(text, "real") || iequals(text, "integer")) return ArffType::kNumeric;
  return ArffType::kOther;
}

// "@attribute <name> <type>" after the keyword: the name may be quoted; the type is a keyword or {a, b}.
ArffAttribute parse_attribute(std::string_view rest, const std::string& where, int64_t line) {
  ArffAttribute a;
  a.line = line;
  std::string_view type;
  if (!rest.empty() && (rest[0] == '\'' || rest[0] == '"')) {
    const size_t close = rest.find(rest[0], 1);
    BASTION_CHECK(close != std::string_view::npos, where, ": unterminated quote in the @attribute name");
    a.name = std::string(rest.substr(1, close - 1));
    type = trim(rest.substr(close + 1));
  } else {
    const size_t end = std::min(rest.find_first_of(" \t{"), rest.size());
    a.name = std::string(rest.substr(0, end));
    type = trim(rest.substr(end));
  }
  BASTION_CHECK(!a.name.empty(), where, ": @attribute without a name");
  a.type_text = std::string(type.substr(0, kQuoteLimit));
  if (!type.empty() && type[0] == '{') {
    BASTION_CHECK(type.back() == '}', where, ": nominal attribute '", a.name, "' lacks its closing '}'");
    for (std::string_view v : split_quoted(type.substr(1, type.size() - 2), kArffNominalLimit, where))
      a.values.emplace_back(v);
    BASTION_CHECK(a.values.size() <= kArffNominalLimit, where, ": nominal attribute '", a.name, "' has more than ",
                  kArffNominalLimit, " values");
    a.type = ArffType::kNominal;
  } else {
    a.type = type_of(type);
  }
  return a;
}

// Reads @relation and the @attribute lines up to @data (keywords are case-insensitive in ARFF).
std::vector<ArffAttribute> parse_arff_header(LineCursor& lines, const std::string& file) {
  bool relation = false;
  std::vector<ArffAttribute> attributes;
  std::string_view line;
  while (lines.next(line)) {
    const std::string where = file + ":" + std::to_string(lines.line());
    const size_t split = std::min(line.find_first_of(" \t"), line.size());
    const std::string_view keyword = line.substr(0, split), rest = trim(line.substr(split));
    if (iequals(keyword, "@relation")) {
      BASTION_CHECK(!relation, where, ": a second @relation");
      relation = true;
    } else if (iequals(keyword, "@attribute")) {
      BASTION_CHECK(relation, where, ": @attribute before @relation");
      BASTION_CHECK(attributes.size() < kArffAttributes, where, ": more than ", kArffAttributes,
                    " attributes (expected UNIQUE_ID, user, 43 features and class)");
      attributes.push_back(parse_attribute(rest, where, lines.line()));
    } else if (iequals(keyword, "@data")) {
      BASTION_CHECK(relation, where, ": @data before @relation");
      return attributes;
    } else {
      BASTION_FAIL(where, ": expected @relation, @attribute or @data in the ARFF header, found ", shown(line));
    }
  }
  BASTION_FAIL(file, ": no @data line (the file ends at line ", lines.line(), ")");
}

std::string expected_attribute(size_t i) {
  if (i == 0) return "UNIQUE_ID";
  if (i == 1) return "user";
  if (i < kArffAttributes - 1) return kWisdmFeatureNames[i - 2];
  return "class";
}

// Names in WISDM's order and types that fit them. The class declaration may be missing (the real file).
void check_attributes(const std::vector<ArffAttribute>& attributes, const std::string& file) {
  BASTION_CHECK(attributes.size() + 1 >= kArffAttributes, file, ": expected ", kArffAttributes - 1, " or ",
                kArffAttributes, " attributes (UNIQUE_ID, user, 43 features[, class]), found ", attributes.size());
  for (size_t i = 0; i < attributes.size(); ++i) {
    const ArffAttribute& a = attributes[i];
    const std::string where = file + ":" + std::to_string(a.line) + ": attribute " + std::to_string(i + 1);
    BASTION_CHECK(a.name == expected_attribute(i), where, " is '", a.name, "', expected '", expected_attribute(i), "'");
    const bool user_or_id = i < 2, is_class = i == kArffAttributes - 1;
    const bool fits = is_class     ? a.type == ArffType::kNominal
                      : user_or_id ? a.type != ArffType::kOther
                                   : a.type == ArffType::kNumeric;
    BASTION_CHECK(fits, where, " ('", a.name, "') has type ", shown(a.type_text), ", expected ",
                  is_class     ? "a nominal {..} list"
                  : user_or_id ? "numeric, nominal or none"
                               : "numeric");
    for (const std::string& v : a.values) {
      int32_t user = 0;
      BASTION_CHECK(i != 1 || parse_user(v, user), where, " ('user') lists ", shown(v), ", not a user id");
      BASTION_CHECK(!is_class || wisdm_activity_index(v) >= 0, where, " ('class') lists ", shown(v),
                    ", expected one of ", activity_list());
    }
  }
}

bool declared(const ArffAttribute& a, std::string_view value) {
  return a.type != ArffType::kNominal || std::find(a.values.begin(), a.values.end(), value) != a.values.end();
}

// One data row, appended to `out`; a missing feature value '?' is stored as NaN for impute_missing().
void parse_arff_row(std::string_view line, const std::vector<ArffAttribute>& attributes, const std::string& where,
                    WisdmParsed& out) {
  BASTION_CHECK(line[0] != '{', where, ": sparse ARFF rows ({index value, ...}) are not supported");
  const std::vector<std::string_view> f = split_quoted(line, kArffAttributes, where);
  BASTION_CHECK(f.size() == kArffAttributes, where, ": expected ", kArffAttributes,
                " fields (UNIQUE_ID, user, 43 features, class), found ",
                f.size() > kArffAttributes ? "more" : std::to_string(f.size()));
  for (size_t i : {size_t{0}, size_t{1}, kArffAttributes - 1}) {
    BASTION_CHECK(f[i] != "?", where, ": field ", i + 1, " (", expected_attribute(i),
                  ") is missing ('?'); only feature values may be");
  }
  double id = 0;
  BASTION_CHECK(parse_whole(f[0], id), where, ": field 1 (UNIQUE_ID): expected a number, found ", shown(f[0]));
  int32_t user = 0;
  const bool nominal_user = attributes[1].type == ArffType::kNominal;
  BASTION_CHECK(parse_user(f[1], user) && declared(attributes[1], f[1]), where, ": field 2 (user): expected a user id",
                nominal_user ? " declared in the header" : "", ", found ", shown(f[1]));
  float features[kWisdmFeatureCount];
  int64_t missing = 0;
  for (int64_t k = 0; k < kWisdmFeatureCount; ++k) {
    if (f[2 + k] == "?") {
      features[k] = std::numeric_limits<float>::quiet_NaN();  // parse_whole never yields NaN: a safe mark
      if (missing++ == 0 && out.stats.imputed_rows == 0)
        out.stats.first_skipped =
            where + ": missing value '?' in field " + std::to_string(k + 3) + " (" + kWisdmFeatureNames[k] + ")";
      continue;
    }
    BASTION_CHECK(parse_whole(f[2 + k], features[k]), where, ": field ", k + 3, " (", kWisdmFeatureNames[k],
                  "): expected a finite number, found ", shown(f[2 + k]));
  }
  out.stats.imputed_rows += missing > 0;
  out.stats.imputed_values += missing;
  const std::string_view activity = f[kArffAttributes - 1];
  const int32_t label = wisdm_activity_index(activity);
  const bool listed = attributes.size() < kArffAttributes || declared(attributes.back(), activity);
  BASTION_CHECK(label >= 0 && listed, where, ": field ", kArffAttributes, " (class): expected one of ", activity_list(),
                listed ? "" : " declared in the header", ", found ", shown(activity));
  out.data.values.insert(out.data.values.end(), features, features + kWisdmFeatureCount);
  out.data.labels.push_back(label);
  out.data.groups.push_back(user);
  ++out.stats.records;
}

// Replaces each NaN mark by the mean of its column over the rows that have a value (accumulated in
// double, as Weka's ReplaceMissingValues).
void impute_missing(WisdmParsed& out, const std::string& file) {
  if (out.stats.imputed_values == 0) return;
  std::vector<float>& v = out.data.values;
  for (int64_t k = 0; k < kWisdmFeatureCount; ++k) {
    double sum = 0;
    int64_t present = 0;
    for (size_t i = static_cast<size_t>(k); i < v.size(); i += kWisdmFeatureCount) {
      if (std::isnan(v[i])) continue;
      sum += v[i];
      ++present;
    }
    const float mean = present > 0 ? static_cast<float>(sum / static_cast<double>(present)) : 0.0f;
    for (size_t i = static_cast<size_t>(k); i < v.size(); i += kWisdmFeatureCount) {
      if (!std::isnan(v[i])) continue;
      BASTION_CHECK(present > 0, file, ": column ", k + 3, " (", kWisdmFeatureNames[k],
                    ") has no value in any row: nothing to replace its '?' with (first: ", out.stats.first_skipped,
                    ")");
      v[i] = mean;
    }
  }
}

}  // namespace

WisdmParsed parse_wisdm_arff_text(const std::string& text, const std::string& file) {
  LineCursor lines(text);
  const std::vector<ArffAttribute> attributes = parse_arff_header(lines, file);
  check_attributes(attributes, file);
  WisdmParsed out;
  out.data = wisdm_dataset(1, kWisdmFeatureCount);
  std::string_view line;
  while (lines.next(line)) parse_arff_row(line, attributes, file + ":" + std::to_string(lines.line()), out);
  BASTION_CHECK(out.stats.records > 0, file, ": no data rows after @data (the file ends at line ", lines.line(), ")");
  impute_missing(out, file);
  return out;
}

// ---------------------------------------------------------------- loaders

namespace {
DatasetSplit load_wisdm_file(const std::filesystem::path& dir, const char* name, bool raw) {
  const std::string path = resolve_plain_or_gz_path((dir / name).string(), "WISDM");
  const std::string text = read_text_file(path);
  WisdmParsed parsed = raw ? parse_wisdm_raw_text(text, path, kWisdmWindow) : parse_wisdm_arff_text(text, path);
  DatasetSplit split;
  split.test = empty_like(parsed.data);
  split.train = std::move(parsed.data);
  return split;
}
}  // namespace

DatasetSplit load_wisdm_raw_dir(const std::filesystem::path& dir) {
  return load_wisdm_file(dir, "WISDM_ar_v1.1_raw.txt", true);
}

DatasetSplit load_wisdm_features_dir(const std::filesystem::path& dir) {
  return load_wisdm_file(dir, "WISDM_ar_v1.1_transformed.arff", false);
}

}  // namespace bastion
