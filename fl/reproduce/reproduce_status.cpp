#include "fl/reproduce/reproduce_status.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <vector>

#include "data/idx.h"
#include "fl/core/config.h"
#include "fl/core/experiment.h"
#include "fl/core/run_setup.h"
#include "fl/reproduce/merge_seeds.h"
#include "fl/reproduce/reproduce_text.h"
#include "fl/reproduce/reuse_runs.h"
#include "fl/reproduce/run_record.h"
#include "tensor/error.h"

namespace bastion {

namespace {

using namespace reproduce_text;

enum class RunState { finished, in_progress, not_started, unreadable };

struct RunStatus {
  RunState state = RunState::not_started;
  std::string folder;  // where it is; empty when not started
  int64_t rounds = 0, total_rounds = 0;
  double core_seconds = 0.0;
  std::string problem;  // unreadable: the error reading its files
};

// The run in its candidate folders: the first that finished it; else the one with the most rounds of the
// same experiment (rounds may differ: a run can be continued to more).
RunStatus find_run(const ExperimentConfig& config, const std::vector<std::string>& candidates) {
  const std::string toml = config_to_toml(config);
  RunStatus status;
  status.total_rounds = config.experiment.integer("rounds") * config.experiment.integer("repeat");
  for (const std::string& dir : candidates) {
    if (finished_with(dir, toml)) {
      const RunCost cost = run_cost(dir);
      return {RunState::finished, dir, status.total_rounds, status.total_rounds, cost.core_seconds, ""};
    }
    const std::string recorded = dir + "/config.toml";
    if (!std::filesystem::exists(recorded) || resumable_part(read_text_file(recorded)) != resumable_part(toml))
      continue;
    const RunCost cost = run_cost(dir);
    if (status.state == RunState::not_started || cost.rounds > status.rounds)
      status = {RunState::in_progress, dir, std::min(cost.rounds, status.total_rounds), status.total_rounds,
                cost.core_seconds,     ""};
  }
  return status;
}

// The same experiment as `target` but for the seed range and `rounds` (a run can be continued to more):
// what --merge-from assembles seeds from. A config that no longer parses is another experiment.
bool same_but_seeds(const std::string& path, const ExperimentConfig& target) {
  try {
    return resumable_part(config_to_toml(with_target_seeds(path, target))) == resumable_part(config_to_toml(target));
  } catch (const Error&) {
    return false;
  }
}

// No folder holds the run with the target's seed range: the target's seeds that runs of the same experiment
// with other seed ranges hold (a campaign adding seeds 2 and 3 beside a finished seed 1), each seed counted
// from the first candidate that has rounds of it. Finished when every seed's run is (--merge-from can then
// assemble the run); the folder column lists the candidates used.
RunStatus find_seed_parts(const ExperimentConfig& target, const std::vector<std::string>& candidates) {
  const uint64_t first = static_cast<uint64_t>(target.experiment.integer("seed"));
  const uint64_t end = first + static_cast<uint64_t>(target.experiment.integer("repeat"));
  const int64_t rounds = target.experiment.integer("rounds");
  RunStatus status;
  status.total_rounds = rounds * target.experiment.integer("repeat");
  std::set<uint64_t> counted;
  bool every_run_finished = true;
  for (const std::string& dir : candidates) {
    if (!std::filesystem::exists(dir + "/config.toml") || !same_but_seeds(dir + "/config.toml", target)) continue;
    const ExperimentConfig own = parse_config(read_text_file(dir + "/config.toml"), dir + "/config.toml");
    const int64_t repeat = own.experiment.integer("repeat");
    const int64_t threads = recorded_threads(dir);
    bool used = false;
    for (int64_t r = 0; r < repeat; ++r) {
      const uint64_t seed = static_cast<uint64_t>(own.experiment.integer("seed") + r);
      const TimingTotals timing = timing_totals(seed_folder(dir, repeat, seed) + "/timing.csv");
      if (seed < first || seed >= end || counted.count(seed) > 0 || timing.rounds == 0) continue;
      counted.insert(seed);
      status.rounds += std::min(timing.rounds, rounds);
      status.core_seconds += timing.core_seconds(threads);
      used = true;
    }
    if (!used) continue;
    every_run_finished = every_run_finished && std::filesystem::exists(dir + "/summary.json") &&
                         own.experiment.integer("rounds") == rounds;
    status.folder += (status.folder.empty() ? "" : " + ") + dir;
  }
  if (counted.empty()) return status;
  const bool complete = counted.size() == end - first && every_run_finished;
  status.state = complete ? RunState::finished : RunState::in_progress;
  return status;
}

// Not in --out or the --merge-from folders: a finished run of the same experiment that --reuse-from would
// copy (any folder name), counted as finished there; else not started.
RunStatus find_reusable_run(const ExperimentConfig& config, const std::vector<std::string>& reusable) {
  RunStatus status;
  status.total_rounds = config.experiment.integer("rounds") * config.experiment.integer("repeat");
  const std::string source = find_reusable(reusable, config_to_toml(config));
  if (source.empty()) return status;
  return {RunState::finished,  source + " (--reuse-from)",    status.total_rounds,
          status.total_rounds, run_cost(source).core_seconds, ""};
}

const char* state_text(RunState state) {
  switch (state) {
    case RunState::finished:
      return "finished";
    case RunState::in_progress:
      return "in progress";
    case RunState::not_started:
      return "not started";
    case RunState::unreadable:
      break;
  }
  return "unreadable";
}

// Core-seconds per round of the runs that have rounds, over the rows' runs: [row] -> rate (0: none).
std::vector<double> row_rates(const Preset& preset, const PresetGrid& grid, const std::vector<RunStatus>& runs) {
  std::vector<double> rates(preset.rows.size(), 0.0);
  for (size_t r = 0; r < preset.rows.size(); ++r) {
    std::vector<size_t> members(grid.cell_run[r].begin(), grid.cell_run[r].end());
    std::sort(members.begin(), members.end());
    members.erase(std::unique(members.begin(), members.end()), members.end());
    double seconds = 0.0;
    int64_t rounds = 0;
    for (size_t i : members) {
      seconds += runs[i].core_seconds;
      rounds += runs[i].rounds;
    }
    rates[r] = rounds > 0 ? seconds / static_cast<double>(rounds) : 0.0;
  }
  return rates;
}

// Core-hours left: each unfinished run's rounds left at its (first) row's rate, else the mean of all runs.
// Negative when some unfinished run has no rate at all (no run has any rounds yet).
double hours_left(const Preset& preset, const PresetGrid& grid, const std::vector<RunStatus>& runs) {
  const std::vector<double> rates = row_rates(preset, grid, runs);
  double seconds = 0.0, all_seconds = 0.0;
  int64_t all_rounds = 0;
  for (const RunStatus& run : runs) {
    all_seconds += run.core_seconds;
    all_rounds += run.rounds;
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].state == RunState::finished) continue;
    double rate = 0.0;
    for (size_t r = 0; r < preset.rows.size() && rate == 0.0; ++r)
      if (std::find(grid.cell_run[r].begin(), grid.cell_run[r].end(), i) != grid.cell_run[r].end()) rate = rates[r];
    if (rate == 0.0 && all_rounds > 0) rate = all_seconds / static_cast<double>(all_rounds);
    if (rate == 0.0) return -1.0;
    seconds += rate * static_cast<double>(runs[i].total_rounds - runs[i].rounds);
  }
  return seconds / 3600.0;
}

std::string padded(const std::string& text, size_t width) {
  return text + std::string(width > text.size() ? width - text.size() : 0, ' ');
}

}  // namespace

std::string reproduce_status(const Preset& preset, const ReproduceOptions& options) {
  const PresetGrid grid = reproduce_grid(preset, options);
  const std::vector<std::string> reusable = reusable_runs(options.reuse_from);
  std::vector<RunStatus> runs;
  size_t name_width = 3;
  for (const PresetRun& run : grid.runs) {
    std::vector<std::string> candidates = {options.out_dir + "/runs/" + run.folder};
    for (const std::string& source : options.merge_from) candidates.push_back(source + "/runs/" + run.folder);
    const ExperimentConfig config = load_config(preset.base, run.overrides);
    try {
      RunStatus status = find_run(config, candidates);
      if (status.state == RunState::not_started) status = find_seed_parts(config, candidates);
      if (status.state == RunState::not_started) status = find_reusable_run(config, reusable);
      runs.push_back(status);
    } catch (const Error& e) {  // a damaged file of one run: say so there, and go on with the others
      RunStatus unreadable;
      unreadable.state = RunState::unreadable;
      unreadable.total_rounds = config.experiment.integer("rounds") * config.experiment.integer("repeat");
      unreadable.problem = without_source_locations(e.what());
      runs.push_back(unreadable);
    }
    name_width = std::max(name_width, run.folder.size());
  }
  std::string text = "reproduce " + preset.name + " status: " + std::to_string(grid.runs.size()) + " runs\n";
  text += padded("run", name_width) + "  " + padded("state", 11) + "  " + padded("rounds", 11) + "  " +
          padded("core-h", 7) + "  folder\n";
  int64_t counts[4] = {0, 0, 0, 0};
  std::string problems;
  double spent = 0.0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunStatus& run = runs[i];
    ++counts[static_cast<int>(run.state)];
    spent += run.core_seconds / 3600.0;
    const std::string rounds = std::to_string(run.rounds) + "/" + std::to_string(run.total_rounds);
    const bool costed = run.state == RunState::finished || run.state == RunState::in_progress;
    const std::string hours = costed ? fixed(run.core_seconds / 3600.0, 2) : "-";
    if (!run.problem.empty()) problems += "  " + grid.runs[i].folder + ": " + run.problem + "\n";
    text += padded(grid.runs[i].folder, name_width) + "  " + padded(state_text(run.state), 11) + "  " +
            padded(rounds, 11) + "  " + padded(hours, 7) + "  " + (run.folder.empty() ? "-" : run.folder) + "\n";
  }
  text += "finished " + std::to_string(counts[0]) + " of " + std::to_string(runs.size()) + " runs, " +
          std::to_string(counts[1]) + " in progress, " + std::to_string(counts[2]) + " not started" +
          (counts[3] > 0 ? ", " + std::to_string(counts[3]) + " unreadable:\n" + problems : "\n");
  const double left = hours_left(preset, grid, runs);
  text += "core-hours: " + fixed(spent, 2) +
          " spent (CPU time of the rounds; round time x threads where timing.csv has "
          "no cpu_s); " +
          (left < 0 ? std::string("left unknown (no run has rounds yet)")
                    : "about " + fixed(left, 2) +
                          " left (each unfinished run's rounds left x its row's core-seconds per round so far, "
                          "else the mean of all runs)") +
          "\n";
  return text;
}

}  // namespace bastion
