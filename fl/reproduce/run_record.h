// What a `bastion reproduce` run folder (runs/<cell>/) records about itself, read back: whether it finished
// with a given experiment, and what its rounds cost. Shared by the grid runner (reproduce.cpp) and the
// campaign status (reproduce_status.h).
#pragma once

#include <cstdint>
#include <string>

namespace bastion {

// Finished with the same experiment: summary.json exists and config.toml computes the same (the [run]
// table, threads and checkpoint frequency, may differ).
bool finished_with(const std::string& dir, const std::string& resolved_config);

// What a run's rounds cost so far (timing.csv, every seed-<s>/ too), in core-seconds: each round's CPU time
// (cpu_s) where it was measured; else its wall time (round_s) times the run's threads, the largest count its
// provenance.tsv records (a run resumed with other counts is charged the largest). Wall time x threads also
// counts the time a run waited for a core that other work held, so it overstates a run on a shared machine;
// CPU time does not. A folder without timing.csv costs 0.
struct RunCost {
  double core_seconds = 0.0;
  int64_t rounds = 0;             // timing.csv rows, summed over the seeds: the rounds run so far
  int64_t cpu_rounds = 0;         // of those, the rounds charged their measured CPU time
  bool threads_recorded = false;  // false: provenance without thread counts, charged as 1 thread
};
RunCost run_cost(const std::string& dir);

// The parts run_cost adds up: one timing.csv's rounds, their wall and CPU seconds (none when the file is
// absent), and the largest thread count a run folder's provenance.tsv records (0 when none does).
struct TimingTotals {
  int64_t rounds = 0;
  int64_t cpu_rounds = 0;            // rounds with cpu_s
  double cpu_seconds = 0.0;          // their cpu_s
  double seconds_without_cpu = 0.0;  // round_s of the rounds without it
  // The core-seconds of these rounds for a run of `threads` threads (run_cost's rule).
  double core_seconds(int64_t threads) const;
};
TimingTotals timing_totals(const std::string& path);
int64_t recorded_threads(const std::string& dir);

}  // namespace bastion
