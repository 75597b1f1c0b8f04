#include "fl/reproduce/run_record.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "data/idx.h"
#include "fl/core/run_setup.h"
#include "fl/metrics/results.h"

namespace bastion {

bool finished_with(const std::string& dir, const std::string& resolved_config) {
  return std::filesystem::exists(dir + "/summary.json") && std::filesystem::exists(dir + "/config.toml") &&
         computed_part(read_text_file(dir + "/config.toml")) == computed_part(resolved_config);
}

TimingTotals timing_totals(const std::string& path) {
  TimingTotals totals;
  if (!std::filesystem::exists(path)) return totals;
  for (const RoundTiming& t : parse_timing_csv(read_text_file(path))) {  // names a damaged file
    totals.seconds += t.round_seconds;
    ++totals.rounds;
  }
  return totals;
}

int64_t recorded_threads(const std::string& dir) {
  int64_t threads = 0;  // the fourth field of each provenance line (date, commit, machine, threads)
  const std::string provenance = dir + "/provenance.tsv";
  if (std::filesystem::exists(provenance))
    for (const std::string& line : split_fields(read_text_file(provenance), '\n')) {
      const std::vector<std::string> fields = split_fields(line, '\t');
      if (fields.size() >= 4) threads = std::max<int64_t>(threads, std::atoll(fields[3].c_str()));
    }
  return threads;
}

RunCost run_cost(const std::string& dir) {
  std::vector<std::string> files = {dir + "/timing.csv"};
  if (std::filesystem::is_directory(dir))
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (entry.is_directory() && entry.path().filename().string().rfind("seed-", 0) == 0)
        files.push_back(entry.path().string() + "/timing.csv");
  RunCost cost;
  double seconds = 0.0;
  for (const std::string& file : files) {
    const TimingTotals totals = timing_totals(file);
    seconds += totals.seconds;
    cost.rounds += totals.rounds;
  }
  const int64_t threads = recorded_threads(dir);
  cost.core_seconds = seconds * static_cast<double>(std::max<int64_t>(threads, 1));
  cost.threads_recorded = threads > 0;
  return cost;
}

}  // namespace bastion
