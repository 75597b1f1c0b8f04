#include "fl/reproduce/run_record.h"

#include <algorithm>
#include <cmath>
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
    ++totals.rounds;
    if (std::isnan(t.cpu_seconds)) {
      totals.seconds_without_cpu += t.round_seconds;
    } else {
      totals.cpu_seconds += t.cpu_seconds;
      ++totals.cpu_rounds;
    }
  }
  return totals;
}

double TimingTotals::core_seconds(int64_t threads) const {
  return cpu_seconds + seconds_without_cpu * static_cast<double>(std::max<int64_t>(threads, 1));
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
  const int64_t threads = recorded_threads(dir);
  for (const std::string& file : files) {
    const TimingTotals totals = timing_totals(file);
    cost.core_seconds += totals.core_seconds(threads);
    cost.rounds += totals.rounds;
    cost.cpu_rounds += totals.cpu_rounds;
  }
  cost.threads_recorded = threads > 0;
  return cost;
}

}  // namespace bastion
