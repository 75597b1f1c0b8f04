// summary.json's per-seed entries read back: what `bastion reproduce --merge-from` needs to write one
// summary over seeds that separate invocations ran (fl/reproduce/merge_seeds.h). The inverse of run_json in
// results.cpp. A key that an older version did not write reads as its default (malicious_clients, from
// before it was recorded, as none), which is why a merged file keeps each entry as it was written.
#include <string>
#include <nlohmann/json.hpp>

#include "fl/metrics/results.h"
#include "tensor/error.h"

namespace bastion {

namespace {

using ordered_json = nlohmann::ordered_json;

// run_json writes NaN as null; a missing key is as unmeasured.
double number_or_nan(const ordered_json& object, const char* key) {
  if (!object.contains(key) || object[key].is_null()) return kNoValue;
  return object[key].get<double>();
}

DetectionRates detection_from(const ordered_json& object) {
  return {number_or_nan(object, "dacc"), number_or_nan(object, "fpr"), number_or_nan(object, "fnr")};
}

// ("name", value) pairs of a flat object, in file order (the order run_json wrote them).
std::vector<std::pair<std::string, double>> named_values(const ordered_json& object) {
  std::vector<std::pair<std::string, double>> values;
  for (const auto& [name, value] : object.items())
    values.emplace_back(name, value.is_null() ? kNoValue : value.get<double>());
  return values;
}

// An integer field, or `fallback` when the entry was written before the field existed.
int64_t integer_or(const ordered_json& object, const char* key, int64_t fallback) {
  return object.contains(key) ? object[key].get<int64_t>() : fallback;
}

RunSummary run_from_json(const ordered_json& j) {
  RunSummary run;
  run.seed = j.at("seed").get<uint64_t>();
  run.rounds = integer_or(j, "rounds", 0);
  run.acc = number_or_nan(j, "acc");
  run.asr = number_or_nan(j, "asr");
  run.bfr = number_or_nan(j, "bfr");
  run.v = number_or_nan(j, "v");
  run.local_acc = number_or_nan(j, "local_acc");
  run.final_acc = number_or_nan(j, "final_acc");
  run.best_acc = number_or_nan(j, "best_acc");
  run.round_to_target = integer_or(j, "round_to_target", -1);
  if (j.contains("detection")) run.detection = detection_from(j["detection"]);
  if (j.contains("client_detection")) run.client_detection = detection_from(j["client_detection"]);
  run.rejected = integer_or(j, "rejected", 0);
  run.bytes_up = integer_or(j, "bytes_up", 0);
  run.bytes_down = integer_or(j, "bytes_down", 0);
  run.seconds_per_round = number_or_nan(j, "seconds_per_round");
  if (j.contains("malicious_clients")) run.malicious_clients = j["malicious_clients"].get<std::vector<int64_t>>();
  if (j.contains("resolved")) run.resolved = named_values(j["resolved"]);
  if (j.contains("personalized")) run.personal = named_values(j["personalized"]);
  return run;
}

}  // namespace

std::vector<SummaryEntry> parse_summary_entries(const std::string& text, const std::string& path) {
  try {
    const ordered_json summary = ordered_json::parse(text);
    std::vector<SummaryEntry> entries;
    for (const ordered_json& run : summary.at("runs")) entries.push_back({run_from_json(run), run.dump()});
    return entries;
  } catch (const nlohmann::json::exception& e) {  // damaged, truncated, or not a summary.json
    BASTION_FAIL(path, ": not a summary.json that bastion run writes (", e.what(), ")");
  }
}

std::vector<RunSummary> parse_summary_runs(const std::string& text, const std::string& path) {
  std::vector<RunSummary> runs;
  for (SummaryEntry& entry : parse_summary_entries(text, path)) runs.push_back(std::move(entry.run));
  return runs;
}

std::string summary_json(const std::string& name, const std::string& report, const std::vector<SummaryEntry>& entries) {
  std::vector<RunSummary> runs;
  for (const SummaryEntry& entry : entries) runs.push_back(entry.run);
  ordered_json summary = ordered_json::parse(summary_json(name, report, runs));
  for (size_t i = 0; i < entries.size(); ++i) summary["runs"][i] = ordered_json::parse(entries[i].json);
  return summary.dump(2, ' ', false, ordered_json::error_handler_t::replace) + '\n';
}

}  // namespace bastion
