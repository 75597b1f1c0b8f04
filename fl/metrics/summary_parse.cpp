// summary.json's per-seed entries read back into RunSummary: what `bastion reproduce --merge-from` needs to
// write one summary over seeds that separate invocations ran (fl/reproduce/merge_seeds.h). The inverse of
// run_json in results.cpp: summary_json(name, report, parse_summary_runs(text)) gives the file back.
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

RunSummary run_from_json(const ordered_json& j) {
  RunSummary run;
  run.seed = j.at("seed").get<uint64_t>();
  run.rounds = j.at("rounds").get<int64_t>();
  run.acc = number_or_nan(j, "acc");
  run.asr = number_or_nan(j, "asr");
  run.bfr = number_or_nan(j, "bfr");
  run.v = number_or_nan(j, "v");
  run.local_acc = number_or_nan(j, "local_acc");
  run.final_acc = number_or_nan(j, "final_acc");
  run.best_acc = number_or_nan(j, "best_acc");
  run.round_to_target = j.at("round_to_target").get<int64_t>();
  run.detection = detection_from(j.at("detection"));
  run.client_detection = detection_from(j.at("client_detection"));
  run.rejected = j.at("rejected").get<int64_t>();
  run.bytes_up = j.at("bytes_up").get<int64_t>();
  run.bytes_down = j.at("bytes_down").get<int64_t>();
  run.seconds_per_round = number_or_nan(j, "seconds_per_round");
  run.malicious_clients = j.at("malicious_clients").get<std::vector<int64_t>>();
  if (j.contains("resolved")) run.resolved = named_values(j["resolved"]);
  if (j.contains("personalized")) run.personal = named_values(j["personalized"]);
  return run;
}

}  // namespace

std::vector<RunSummary> parse_summary_runs(const std::string& text, const std::string& path) {
  try {
    const ordered_json summary = ordered_json::parse(text);
    std::vector<RunSummary> runs;
    for (const ordered_json& run : summary.at("runs")) runs.push_back(run_from_json(run));
    return runs;
  } catch (const nlohmann::json::exception& e) {  // damaged, truncated, or not a summary.json
    BASTION_FAIL(path, ": not a summary.json that bastion run writes (", e.what(), ")");
  }
}

}  // namespace bastion
