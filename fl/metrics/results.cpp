// Results files of `bastion run`: rounds.csv (and its parser, for resume), timing.csv, summary.json,
// the run summary and the console's last line. curves.svg is drawn in svg.cpp.
//
// Numbers are formatted with std::to_chars, never printf/iostreams: those follow the C/C++ locale, and
// a process whose locale writes "0,8123" would break the CSV and make files differ between machines.
#include "fl/metrics/results.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <sstream>
#include <nlohmann/json.hpp>

#include "tensor/error.h"

namespace bastion {

namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::array<const char*, 17> kRoundsColumns = {
    "round",     "acc",      "asr", "bfr", "v",  "loss", "local_acc", "train_loss", "sampled",
    "malicious", "rejected", "tp",  "fp",  "tn", "fn",   "bytes_up",  "bytes_down"};
// Per-client detection of the latest verdicts (RoundRecord::client_detection), after bytes_down. Files
// written before these columns existed (checkpoints' rounds_csv) parse with the columns left NaN.
constexpr std::array<const char*, 3> kClientColumns = {"client_dacc", "client_fpr", "client_fnr"};
constexpr std::array<double DetectionRates::*, 3> kClientFields = {&DetectionRates::dacc, &DetectionRates::fpr,
                                                                   &DetectionRates::fnr};
// Appended when a run evaluates personalised models (RoundRecord::personal): the client count, then for
// each figure (local acc, global acc, asr) its plain mean, weighted mean, min, median and max.
constexpr std::array<const char*, 3> kPersonalFigures = {"p_acc", "p_gacc", "p_asr"};
constexpr std::array<const char*, 5> kSpreadSuffixes = {"", "_w", "_min", "_med", "_max"};
constexpr std::array<double ClientSpread::*, 5> kSpreadFields = {
    &ClientSpread::mean, &ClientSpread::weighted, &ClientSpread::min, &ClientSpread::median, &ClientSpread::max};
constexpr std::array<ClientSpread PersonalRecord::*, 3> kPersonalSpreads = {
    &PersonalRecord::acc, &PersonalRecord::global_acc, &PersonalRecord::asr};
// The received models' figure (eval.personal_received), after the p_* columns when a run measures it.
constexpr const char* kReceivedFigure = "p_racc";

// Which optional column groups a rounds.csv has.
struct ColumnSet {
  bool client_columns = true, personalized = false, received = false;
};

std::vector<std::string> personal_column_names(bool received) {
  std::vector<std::string> names = {"p_clients"};
  for (const char* figure : kPersonalFigures)
    for (const char* suffix : kSpreadSuffixes) names.push_back(std::string(figure) + suffix);
  if (received)
    for (const char* suffix : kSpreadSuffixes) names.push_back(std::string(kReceivedFigure) + suffix);
  return names;
}

std::vector<std::string> column_names(ColumnSet set) {
  std::vector<std::string> names(kRoundsColumns.begin(), kRoundsColumns.end());
  if (set.client_columns) names.insert(names.end(), kClientColumns.begin(), kClientColumns.end());
  if (set.personalized)
    for (const std::string& name : personal_column_names(set.received)) names.push_back(name);
  return names;
}

// The spread values of a record in column order (after p_clients): 15, or 20 with the received figure.
std::vector<double> personal_values(const PersonalRecord& p, bool received) {
  std::vector<double> values;
  for (ClientSpread PersonalRecord::*spread : kPersonalSpreads)
    for (double ClientSpread::*field : kSpreadFields) values.push_back((p.*spread).*field);
  if (received)
    for (double ClientSpread::*field : kSpreadFields) values.push_back(p.received_acc.*field);
  return values;
}

constexpr const char* kTimingHeader = "round,train_s,aggregate_s,eval_s,round_s,cpu_s";
constexpr const char* kTimingHeaderWithoutCpu = "round,train_s,aggregate_s,eval_s,round_s";  // before 2026-11-29

// "%.6g" / "%.4f" without the locale; NaN becomes "" (an empty CSV cell).
std::string format_real(double value, std::chars_format format, int precision) {
  if (std::isnan(value)) return "";
  char buffer[400];  // a fixed-format 1e308 needs 309 digits plus the precision
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value, format, precision);
  BASTION_ASSERT(error == std::errc());
  return std::string(buffer, end);
}

std::string general6(double value) { return format_real(value, std::chars_format::general, 6); }

// The value a reader of the file will get back. bfr and v are derived from these rather than from
// the exact acc/asr, so the file is self-consistent (bfr cell = 1 - asr cell, to 6 digits) and
// parse_rounds_csv + rounds_csv reproduces the text byte for byte, which resume relies on.
double as_printed(double value) {
  if (std::isnan(value)) return value;
  const std::string text = general6(value);
  double parsed = 0;
  std::from_chars(text.data(), text.data() + text.size(), parsed);
  return parsed;
}

// Reads the cells of one rounds.csv (or timing.csv) line; errors name the file, the line and the column.
struct CellReader {
  const std::vector<std::string>& cells;
  size_t line_number;
  const std::vector<std::string>& names;
  const char* file = "rounds.csv";

  [[noreturn]] void fail(size_t column, const char* expected) const {
    BASTION_FAIL(file, " line ", line_number, ", column '", names[column], "': '", cells[column], "' is not ",
                 expected);
  }
  double real(size_t column) const {
    const std::string& cell = cells[column];
    if (cell.empty()) return kNoValue;
    double value = 0;
    const auto [end, error] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
    if (error != std::errc() || end != cell.data() + cell.size()) fail(column, "a number (or empty)");
    return value;
  }
  int64_t integer(size_t column) const {
    const std::string& cell = cells[column];
    int64_t value = 0;
    const auto [end, error] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
    if (cell.empty() || error != std::errc() || end != cell.data() + cell.size()) fail(column, "an integer");
    return value;
  }
};

RoundRecord parse_rounds_row(const std::string& line, size_t line_number, const std::vector<std::string>& names) {
  const std::vector<std::string> cells = split_fields(line, ',');
  BASTION_CHECK(cells.size() == names.size(), "rounds.csv line ", line_number, ": ", cells.size(),
                " columns, expected ", names.size());
  const CellReader read{cells, line_number, names};
  RoundRecord r;
  r.round = read.integer(0);
  r.acc = read.real(1);
  r.asr = read.real(2);
  read.real(3);  // bfr and v are derived from acc and asr: checked to be numbers, then ignored
  read.real(4);
  r.loss = read.real(5);
  r.local_acc = read.real(6);
  r.train_loss = read.real(7);
  r.sampled = read.integer(8);
  r.malicious = read.integer(9);
  r.rejected = read.integer(10);
  r.true_positive = read.integer(11);
  r.false_positive = read.integer(12);
  r.true_negative = read.integer(13);
  r.false_negative = read.integer(14);
  r.bytes_up = read.integer(15);
  r.bytes_down = read.integer(16);
  size_t column = kRoundsColumns.size();
  if (names.size() > column && names[column] == kClientColumns[0])
    for (double DetectionRates::*field : kClientFields) r.client_detection.*field = read.real(column++);
  if (names.size() == column) return r;
  r.personal.present = true;
  r.personal.clients = read.integer(column++);
  for (ClientSpread PersonalRecord::*spread : kPersonalSpreads)
    for (double ClientSpread::*field : kSpreadFields) (r.personal.*spread).*field = read.real(column++);
  if (names.size() == column) return r;
  r.personal.received = true;
  for (double ClientSpread::*field : kSpreadFields) r.personal.received_acc.*field = read.real(column++);
  return r;
}

double median(std::vector<double> values) {
  std::erase_if(values, [](double v) { return std::isnan(v); });
  if (values.empty()) return kNoValue;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// JSON has no NaN; nlohmann would write null anyway, but saying so keeps the contract visible.
ordered_json number_or_null(double value) { return std::isfinite(value) ? ordered_json(value) : ordered_json(); }

ordered_json run_json(const RunSummary& run) {
  ordered_json j;
  j["seed"] = run.seed;
  j["rounds"] = run.rounds;
  j["acc"] = number_or_null(run.acc);
  j["asr"] = number_or_null(run.asr);
  j["bfr"] = number_or_null(run.bfr);
  j["v"] = number_or_null(run.v);
  j["local_acc"] = number_or_null(run.local_acc);
  j["final_acc"] = number_or_null(run.final_acc);
  j["best_acc"] = number_or_null(run.best_acc);
  j["round_to_target"] = run.round_to_target;
  j["detection"] = {{"dacc", number_or_null(run.detection.dacc)},
                    {"fpr", number_or_null(run.detection.fpr)},
                    {"fnr", number_or_null(run.detection.fnr)}};
  j["client_detection"] = {{"dacc", number_or_null(run.client_detection.dacc)},
                           {"fpr", number_or_null(run.client_detection.fpr)},
                           {"fnr", number_or_null(run.client_detection.fnr)}};
  j["rejected"] = run.rejected;
  j["bytes_up"] = run.bytes_up;
  j["bytes_down"] = run.bytes_down;
  j["seconds_per_round"] = number_or_null(run.seconds_per_round);
  j["malicious_clients"] = run.malicious_clients;
  if (!run.resolved.empty()) {
    ordered_json resolved = ordered_json::object();
    for (const auto& [name, value] : run.resolved) resolved[name] = number_or_null(value);
    j["resolved"] = resolved;
  }
  if (!run.personal.empty()) {
    ordered_json personal = ordered_json::object();
    for (const auto& [name, value] : run.personal) personal[name] = number_or_null(value);
    j["personalized"] = personal;
  }
  return j;
}

// The fields averaged over seeds in summary.json's "mean" and "std" objects, in file order.
constexpr std::array<std::pair<const char*, double RunSummary::*>, 8> kAveragedFields = {{
    {"acc", &RunSummary::acc},
    {"asr", &RunSummary::asr},
    {"bfr", &RunSummary::bfr},
    {"v", &RunSummary::v},
    {"local_acc", &RunSummary::local_acc},
    {"final_acc", &RunSummary::final_acc},
    {"best_acc", &RunSummary::best_acc},
    {"seconds_per_round", &RunSummary::seconds_per_round},
}};

MeanStd field_over_runs(const std::vector<RunSummary>& runs, double RunSummary::*field) {
  std::vector<double> values;
  for (const RunSummary& run : runs) values.push_back(run.*field);
  return mean_std(values);
}

// "0.8123", "nan" for a missing figure (the console line is read by people and by grep, never parsed
// back, so "nan" is clearer there than an empty string).
std::string fixed4(double value) { return std::isnan(value) ? "nan" : format_real(value, std::chars_format::fixed, 4); }

// "-" where no run measured the figure (asr without a backdoor): "nan" read like a failed computation.
std::string figure_text(const char* name, const MeanStd& stats, size_t runs) {
  if (stats.count == 0) return std::string(name) + "=-";
  std::string text = std::string(name) + "=" + fixed4(stats.mean);
  if (runs > 1) text += "\u00b1" + fixed4(stats.std);  // "±" in UTF-8
  return text;
}

std::string figure(const char* name, const std::vector<RunSummary>& runs, double RunSummary::*field) {
  return figure_text(name, field_over_runs(runs, field), runs.size());
}

// FedCAP's TAcc (FedCAP §VI-A: "the model with higher average test accuracy between customized models
// and personalized models"; its code: max of the two sample-weighted accuracies, last round): the better
// of p_acc_w and p_racc_w, or p_acc_w when the received models were not evaluated.
double tacc(const RunSummary& s) {
  const double personal_w = s.personal_value("p_acc_w"),
               received_w = s.personal_value(std::string(kReceivedFigure) + "_w");
  if (std::isnan(received_w)) return personal_w;
  if (std::isnan(personal_w)) return received_w;
  return std::max(personal_w, received_w);
}

}  // namespace

std::vector<std::string> split_fields(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at = text.find(separator); at != std::string::npos; at = text.find(separator, start)) {
    parts.push_back(text.substr(start, at - start));
    start = at + 1;
  }
  parts.push_back(text.substr(start));
  return parts;
}

RunSummary summarize_run(uint64_t seed, const std::vector<RoundRecord>& records,
                         const std::vector<RoundTiming>& timings, const std::string& report, double target_acc) {
  const ReportMode mode = parse_report_mode(report);
  std::vector<double> acc, asr, local_acc, round_seconds;
  std::vector<int64_t> rounds;
  int64_t tp = 0, fp = 0, tn = 0, fn = 0;
  RunSummary s;
  s.seed = seed;
  for (const RoundRecord& r : records) {
    rounds.push_back(r.round);
    acc.push_back(r.acc);
    asr.push_back(r.asr);
    local_acc.push_back(r.local_acc);
    tp += r.true_positive, fp += r.false_positive, tn += r.true_negative, fn += r.false_negative;
    s.rejected += r.rejected, s.bytes_up += r.bytes_up, s.bytes_down += r.bytes_down;
  }
  for (const RoundTiming& t : timings) round_seconds.push_back(t.round_seconds);
  // The last evaluated round: rounds are numbered from 1, and evaluation may skip rounds (eval.every),
  // so this is the number of rounds run, which records.size() is not.
  s.rounds = records.empty() ? 0 : records.back().round;
  s.acc = reported_value(acc, rounds, mode);
  s.asr = reported_value(asr, rounds, mode);
  s.local_acc = reported_value(local_acc, rounds, mode);
  s.bfr = backdoor_failure_rate(s.asr);
  s.v = v_score(s.acc, s.asr);
  s.final_acc = records.empty() ? kNoValue : records.back().acc;
  s.best_acc = reported_value(acc, rounds, ReportMode{ReportMode::Best, 1});
  s.round_to_target = round_to_accuracy(records, target_acc);
  s.detection = detection_rates(tp, fp, tn, fn);
  if (!records.empty()) s.client_detection = records.back().client_detection;
  s.seconds_per_round = median(round_seconds);
  if (std::any_of(records.begin(), records.end(), [](const RoundRecord& r) { return r.personal.present; })) {
    const bool received =
        std::any_of(records.begin(), records.end(), [](const RoundRecord& r) { return r.personal.received; });
    const std::vector<std::string> names = personal_column_names(received);
    std::vector<std::vector<double>> columns(names.size() - 1);  // after p_clients, one per figure
    for (const RoundRecord& r : records) {
      const std::vector<double> values =
          r.personal.present ? personal_values(r.personal, received) : std::vector<double>(columns.size(), kNoValue);
      for (size_t k = 0; k < columns.size(); ++k) columns[k].push_back(values[k]);
    }
    for (size_t k = 0; k < columns.size(); ++k)
      s.personal.emplace_back(names[k + 1], reported_value(columns[k], rounds, mode));
    s.personal.emplace_back("p_tacc", tacc(s));
  }
  return s;
}

std::string rounds_csv(const std::vector<RoundRecord>& records) {
  const bool personalized =
      std::any_of(records.begin(), records.end(), [](const RoundRecord& r) { return r.personal.present; });
  const bool received =
      std::any_of(records.begin(), records.end(), [](const RoundRecord& r) { return r.personal.received; });
  std::string out = join_row(column_names({true, personalized, received}));
  for (const RoundRecord& r : records) {
    const double acc = as_printed(r.acc), asr = as_printed(r.asr);
    std::vector<std::string> cells = {std::to_string(r.round),
                                      general6(acc),
                                      general6(asr),
                                      general6(backdoor_failure_rate(asr)),
                                      general6(v_score(acc, asr)),
                                      general6(r.loss),
                                      general6(r.local_acc),
                                      general6(r.train_loss),
                                      std::to_string(r.sampled),
                                      std::to_string(r.malicious),
                                      std::to_string(r.rejected),
                                      std::to_string(r.true_positive),
                                      std::to_string(r.false_positive),
                                      std::to_string(r.true_negative),
                                      std::to_string(r.false_negative),
                                      std::to_string(r.bytes_up),
                                      std::to_string(r.bytes_down)};
    for (double DetectionRates::*field : kClientFields) cells.push_back(general6(r.client_detection.*field));
    if (personalized) {
      cells.push_back(std::to_string(r.personal.clients));
      for (double value : personal_values(r.personal, received)) cells.push_back(general6(value));
    }
    out += join_row(cells);
  }
  return out;
}

RoundRecord as_printed(RoundRecord r) {
  for (double RoundRecord::*field :
       {&RoundRecord::acc, &RoundRecord::loss, &RoundRecord::asr, &RoundRecord::local_acc, &RoundRecord::train_loss})
    r.*field = as_printed(r.*field);
  for (double DetectionRates::*field : kClientFields) r.client_detection.*field = as_printed(r.client_detection.*field);
  for (ClientSpread PersonalRecord::*spread : kPersonalSpreads)
    for (double ClientSpread::*field : kSpreadFields)
      (r.personal.*spread).*field = as_printed((r.personal.*spread).*field);
  for (double ClientSpread::*field : kSpreadFields)
    r.personal.received_acc.*field = as_printed(r.personal.received_acc.*field);
  return r;
}

// Accepts what rounds_csv writes, plus "\r\n" line ends (a file saved by a Windows editor).
std::vector<RoundRecord> parse_rounds_csv(const std::string& text) {
  std::vector<std::string> lines = split_fields(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // the final '\n'
  for (std::string& line : lines)
    if (!line.empty() && line.back() == '\r') line.pop_back();
  const std::string first = lines.empty() ? std::string() : lines[0] + "\n";
  std::vector<std::string> names;
  for (const ColumnSet set : {ColumnSet{true, false, false}, ColumnSet{true, true, false}, ColumnSet{true, true, true},
                              // without the per-client columns: a file from before them
                              ColumnSet{false, false, false}, ColumnSet{false, true, false}})
    if (names.empty() && first == join_row(column_names(set))) names = column_names(set);
  const std::string header = join_row(column_names({}));
  BASTION_CHECK(!names.empty(), "rounds.csv line 1: expected the header '", header.substr(0, header.size() - 1),
                "' (optionally followed by the p_* columns), got '", lines.empty() ? std::string() : lines[0], "'");
  std::vector<RoundRecord> records;
  for (size_t i = 1; i < lines.size(); ++i) records.push_back(parse_rounds_row(lines[i], i + 1, names));
  return records;
}

std::string join_row(const std::vector<std::string>& cells) {
  std::string row;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i > 0) row += ',';
    row += cells[i];
  }
  return row + '\n';
}

std::string fixed_text(double value, int digits) { return format_real(value, std::chars_format::fixed, digits); }

std::string timing_csv(const std::vector<RoundTiming>& timings) {
  const auto seconds = [](double v) { return format_real(v, std::chars_format::fixed, 4); };
  std::string out = std::string(kTimingHeader) + '\n';
  for (const RoundTiming& t : timings)
    out += join_row({std::to_string(t.round), seconds(t.train_seconds), seconds(t.aggregate_seconds),
                     seconds(t.eval_seconds), seconds(t.round_seconds), seconds(t.cpu_seconds)});
  return out;
}

std::vector<RoundTiming> parse_timing_csv(const std::string& text) {
  const std::vector<std::string> lines = split_fields(text, '\n');
  BASTION_CHECK(lines.front() == kTimingHeader || lines.front() == kTimingHeaderWithoutCpu,
                "timing.csv: no header line '", kTimingHeader, "' (or '", kTimingHeaderWithoutCpu, "')");
  const std::vector<std::string> names = split_fields(lines.front(), ',');
  const bool has_cpu = names.size() > 5;
  std::vector<RoundTiming> timings;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;  // the newline after the last row
    const std::vector<std::string> cells = split_fields(lines[i], ',');
    BASTION_CHECK(cells.size() == names.size(), "timing.csv line ", i + 1, ": ", cells.size(), " columns, expected ",
                  names.size());
    const CellReader read{cells, i + 1, names, "timing.csv"};
    timings.push_back(
        {read.integer(0), read.real(1), read.real(2), read.real(3), read.real(4), has_cpu ? read.real(5) : kNoValue});
  }
  return timings;
}

std::string summary_json(const std::string& name, const std::string& report, const std::vector<RunSummary>& runs) {
  ordered_json j;
  j["name"] = name;
  j["report"] = report;
  j["runs"] = ordered_json::array();
  for (const RunSummary& run : runs) j["runs"].push_back(run_json(run));
  ordered_json mean = ordered_json::object(), spread = ordered_json::object();
  for (const auto& [field_name, field] : kAveragedFields) {
    const MeanStd stats = field_over_runs(runs, field);
    mean[field_name] = number_or_null(stats.mean);
    spread[field_name] = number_or_null(stats.std);
  }
  for (size_t k = 0; k < kClientColumns.size(); ++k) {
    std::vector<double> values;
    for (const RunSummary& run : runs) values.push_back(run.client_detection.*kClientFields[k]);
    const MeanStd stats = mean_std(values);
    mean[kClientColumns[k]] = number_or_null(stats.mean);
    spread[kClientColumns[k]] = number_or_null(stats.std);
  }
  if (!runs.empty() && !runs.front().personal.empty()) {
    for (size_t k = 0; k < runs.front().personal.size(); ++k) {
      std::vector<double> values;
      for (const RunSummary& run : runs) values.push_back(k < run.personal.size() ? run.personal[k].second : kNoValue);
      const MeanStd stats = mean_std(values);
      mean[runs.front().personal[k].first] = number_or_null(stats.mean);
      spread[runs.front().personal[k].first] = number_or_null(stats.std);
    }
  }
  j["mean"] = mean;
  j["std"] = spread;
  // A name with invalid UTF-8 (from a hand-edited config) gets U+FFFD instead of failing the whole run.
  return j.dump(2, ' ', false, ordered_json::error_handler_t::replace) + '\n';
}

std::string summary_line(const std::vector<RunSummary>& runs) {
  std::string line = figure("acc", runs, &RunSummary::acc) + " " + figure("asr", runs, &RunSummary::asr);
  if (runs.empty() || runs.front().personal.empty()) return line;
  for (const char* name : {"p_acc", "p_asr"}) {
    std::vector<double> values;
    for (const RunSummary& run : runs) values.push_back(run.personal_value(name));
    line += " " + figure_text(name, mean_std(values), runs.size());
  }
  return line;
}

double RunSummary::personal_value(const std::string& name) const {
  for (const auto& [key, value] : personal)
    if (key == name) return value;
  return kNoValue;
}

}  // namespace bastion
