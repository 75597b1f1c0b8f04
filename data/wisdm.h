// WISDM Activity Prediction v1.1 (Kwapisz, Weiss & Moore, "Activity Recognition using Cell Phone
// Accelerometers", SensorKDD 2010): one release, two files, two registered sets.
//   wisdm:          WISDM_ar_v1.1_raw.txt, records "user,activity,timestamp,x,y,z;" sampled at 20 Hz,
//                   x/y/z in m/s^2 (10 = 1 g, gravity included). Each user's consecutive records of one
//                   activity are cut into non-overlapping windows of `window` samples (the remainder is
//                   dropped): Dataset C=3 (x, y, z), H=1, W=window, float `values` in the file's units.
//   wisdm-features: WISDM_ar_v1.1_transformed.arff, one row per 10 s window: UNIQUE_ID, user, 43 numeric
//                   features (kWisdmFeatureNames), class: Dataset C=1, H=1, W=43, float `values`.
// Labels: the activity's index in kWisdmActivities (Walking 0, Jogging 1, Upstairs 2, Downstairs 3,
// Sitting 4, Standing 5: the order of the class counts in WISDM_ar_v1.1_raw_about.txt, most frequent
// first). groups: the user id as written in the file (1..36), so one client per user is a natural split.
// class_names: kWisdmActivities. Neither file has a test split: `test` is empty (data/dataset.h).
//
// Quirk policy, raw file (the real file has several records on one line, a missing ';', a ',' before the
// ';', empty fields, blank lines and a few malformed records):
// - A record ends at ';' or at a line end; blank records are ignored; blanks and '\r' around fields too.
// - One trailing empty field (a ',' just before the ';') is dropped.
// - Any other malformed record (not 6 fields, an empty or non-numeric field, an unknown activity, a
//   negative user, a non-finite x/y/z) is skipped and counted in WisdmStats; the first one's line and
//   reason are kept. A skipped record does not split its run: the run just loses one 50 ms sample.
// - Parsing fails only when the file cannot be read or not one complete window remains; the message
//   then gives the skipped count and the first skipped record's line and reason.
// ARFF policy: the header is checked (@relation, @attribute with quoted names and {nominal} lists,
// @data; attribute names in the order above). The real file declares no `class` attribute although
// every row carries it as a 46th field: a missing `class` declaration is accepted, a declared one must
// be nominal over activity names. Missing values '?' (615 in 474 of the real file's 5418 rows, all in
// XPEAK/YPEAK/ZPEAK: a still phone has no periodic peak) are replaced by the mean of their column over
// the rows that have it, as Weka's ReplaceMissingValues does (the paper used Weka), and counted in
// WisdmStats. Dropping those rows instead would remove 56% of Sitting and 70% of Standing rows and
// skew the classes. A '?' in UNIQUE_ID, user or class, a column with no value at all, and every other
// problem (field count, a non-number, an unknown activity or user) throw naming the file, the 1-based
// line, the field and what was found.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "data/dataset.h"

namespace bastion {

constexpr int64_t kWisdmWindow = 200;         // 10 s at 20 Hz, as the transformed file's windows
constexpr int64_t kWisdmMaxWindow = 1 << 20;  // larger windows are refused (no multi-GB buffers)
constexpr int64_t kWisdmFeatureCount = 43;

inline constexpr std::array<const char*, 6> kWisdmActivities = {"Walking",    "Jogging", "Upstairs",
                                                                "Downstairs", "Sitting", "Standing"};

// The ARFF's feature attributes, in file order (UNIQUE_ID, user and class excluded).
extern const std::array<const char*, kWisdmFeatureCount> kWisdmFeatureNames;

// What a parse accepted, left out or filled in.
struct WisdmStats {
  int64_t records = 0;          // raw: valid records; ARFF: data rows
  int64_t skipped = 0;          // raw: malformed records skipped
  int64_t dropped_samples = 0;  // raw: valid records in run remainders shorter than a window
  int64_t imputed_rows = 0;     // ARFF: rows holding a missing value '?'
  int64_t imputed_values = 0;   // ARFF: '?' feature values replaced by their column's mean
  std::string first_skipped;    // raw: "file:line: reason" of the first skipped record; ARFF: of the first '?'
};

struct WisdmParsed {
  Dataset data;  // every field but name, mean and std (the dataset table sets those)
  WisdmStats stats;
};

// The raw file's text; `file` names it in messages. window in [1, kWisdmMaxWindow].
WisdmParsed parse_wisdm_raw_text(const std::string& text, const std::string& file, int64_t window);

// The transformed ARFF's text; `file` names it in messages.
WisdmParsed parse_wisdm_arff_text(const std::string& text, const std::string& file);

// The activity's label (index in kWisdmActivities) or -1 when `name` is none of them (exact match).
int32_t wisdm_activity_index(std::string_view name);

}  // namespace bastion
