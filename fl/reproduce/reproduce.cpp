#include "fl/reproduce/reproduce.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>
#include <utility>
#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "data/download.h"
#include "data/idx.h"
#include "fl/core/config.h"
#include "fl/core/experiment.h"
#include "fl/core/mpi_grid.h"
#include "fl/reproduce/merge_seeds.h"
#include "fl/reproduce/reuse_runs.h"
#include "fl/reproduce/reproduce_text.h"
#include "fl/reproduce/run_record.h"
#include "fl/core/run_setup.h"
#include "fl/metrics/results.h"
#include "tensor/error.h"
#include "tensor/file_io.h"

namespace bastion {

namespace {

using namespace reproduce_text;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double json_number(const nlohmann::json& object, const std::string& key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_number()) return kNaN;
  return object[key].get<double>();
}

// The cells of one finished run, from its summary.json.
void read_cells(const Preset& preset, const PresetGrid& grid, size_t run, const std::string& dir, int64_t seeds,
                ReproduceReport& report) {
  const std::string path = dir + "/summary.json";
  nlohmann::json summary;
  try {
    summary = nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {  // a truncated or damaged file: say which, and what to do
    BASTION_FAIL(path, ": not valid JSON (", e.what(), "): run this cell again with --overwrite, or delete the file");
  }
  for (size_t r = 0; r < preset.rows.size(); ++r) {
    for (size_t c = 0; c < preset.columns.size(); ++c) {
      if (grid.cell_run[r][c] != run) continue;
      const PresetColumn& column = preset.columns[c];
      CellResult& cell = report.cells[r][c];
      cell.mean = json_number(summary["mean"], column.metric) * column.scale;
      cell.std = json_number(summary["std"], column.metric) * column.scale;
      cell.seeds = summary.contains("runs") ? static_cast<int64_t>(summary["runs"].size()) : seeds;
    }
  }
}

void mark_failed(const Preset& preset, const PresetGrid& grid, size_t run, ReproduceReport& report) {
  for (size_t r = 0; r < preset.rows.size(); ++r)
    for (size_t c = 0; c < preset.columns.size(); ++c)
      if (grid.cell_run[r][c] == run) report.cells[r][c].failed = true;
}

// runs/<cell>/provenance.tsv: one line per invocation that ran rounds of the run (a resumed run has
// several): date, commit, machine as `reproduce` was told them, and the run's thread count. A table
// assembled later from finished runs then still says which code made each of them, and what it cost.
// Lines written before the thread count was recorded have three fields.
constexpr const char* kProvenanceFile = "/provenance.tsv";

// Written when the run starts, so that an invocation stopped part-way (its rounds kept by a checkpoint)
// is recorded too; taken back when run_experiment refuses or fails. --overwrite starts the file anew.
void run_with_provenance(const ExperimentConfig& config, const RunOptions& run_options, const std::string& dir,
                         const ReproduceOptions& options) {
  const std::string path = dir + kProvenanceFile;
  const bool fresh = options.overwrite && !options.resume;
  const bool existed = !fresh && std::filesystem::exists(path);
  const std::string before = existed ? read_text_file(path) : "";
  std::filesystem::create_directories(dir);
  const int threads = run_threads(config, run_options);
  write_file_atomic(path, before + today() + "\t" + or_unknown(options.commit) + "\t" + or_unknown(options.machine) +
                              "\t" + std::to_string(threads) + "\n");
  try {
    run_experiment(config, run_options);
  } catch (const Error&) {
    if (existed)
      write_file_atomic(path, before);
    else
      std::filesystem::remove(path);
    throw;
  }
}

// The commits that made a run, in order and without repeats, joined by " then "; "unrecorded" when the
// run has no provenance file (made before reproduce wrote one).
std::string run_commits(const std::string& dir) {
  const std::string path = dir + kProvenanceFile;
  if (!std::filesystem::exists(path)) return "unrecorded";
  std::vector<std::string> commits;
  std::istringstream lines(read_text_file(path));
  for (std::string line; std::getline(lines, line);) {
    const size_t first = line.find('\t'), second = line.find('\t', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string commit = line.substr(first + 1, second - first - 1);
    if (commits.empty() || commits.back() != commit) commits.push_back(commit);
  }
  if (commits.empty()) return "unrecorded";
  std::string joined = "`" + commits[0] + "`";
  for (size_t i = 1; i < commits.size(); ++i) joined.append(" then `").append(commits[i]).append("`");
  return joined;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One run of the grid, on whichever rank the grid gives it: skipped when --resume finds it finished with
// the same config, else run_experiment; an Error is the run's failure, reported with its message.
GridOutcome run_grid_cell(const std::string& base, const PresetRun& run, const std::string& dir,
                          const ReproduceOptions& options) {
  GridOutcome outcome;
  try {
    const ExperimentConfig config = load_config(base, run.overrides);
    if (options.resume && finished_with(dir, config_to_toml(config))) {
      outcome.status = GridOutcome::Status::skipped;
      return outcome;
    }
    const auto run_start = std::chrono::steady_clock::now();
    RunOptions run_options;
    run_options.out_dir = dir;
    run_options.threads = options.threads;
    run_options.device = options.device;
    run_options.resume = options.resume;
    run_options.overwrite = options.overwrite;
    if (!options.tensorboard_dir.empty())
      run_options.tensorboard_dir = options.tensorboard_dir + "/" + std::filesystem::path(dir).filename().string();
    run_with_provenance(config, run_options, dir, options);
    outcome.seconds = seconds_since(run_start);
  } catch (const Error& e) {
    outcome.status = GridOutcome::Status::failed;
    outcome.error = e.what();
  }
  return outcome;
}

// Rank 0's side of the grid, one finished run at a time (with one process: in the grid's order): the
// counts, the progress line with its ETA, and the run's cells from its summary.json.
class GridTally {
 public:
  GridTally(const Preset& preset, const PresetGrid& grid, const ReproduceOptions& options, int64_t seeds,
            ReproduceReport& report)
      : preset_(preset), grid_(grid), options_(options), seeds_(seeds), report_(report) {}

  void record(size_t i, const GridOutcome& outcome) {
    const std::string dir = options_.out_dir + "/runs/" + grid_.runs[i].folder;
    std::string prefix = "[";  // appended: GCC 12's -Wrestrict false positive on "[" + std::string
    prefix.append(std::to_string(i + 1)).append("/").append(std::to_string(grid_.runs.size())).append("] ");
    prefix.append(grid_.runs[i].folder);
    if (report_.ranks > 1) prefix.append(" (rank ").append(std::to_string(outcome.rank)).append(")");
    const size_t left = grid_.runs.size() - ++finished_;
    std::string failure = outcome.error;
    if (outcome.status == GridOutcome::Status::skipped) {
      ++report_.skipped;
      if (options_.log) options_.log(prefix + ": finished earlier, skipped");
    } else if (outcome.status == GridOutcome::Status::ran) {
      executed_seconds_ += outcome.seconds;
      ++report_.runs;
      // The runs left share the ranks: the mean run time x left / ranks.
      const double eta =
          executed_seconds_ / static_cast<double>(report_.runs) * static_cast<double>(left) / report_.ranks;
      if (options_.log) options_.log(prefix + ": done in " + fixed(outcome.seconds, 1) + " s; eta " + minutes(eta));
    }
    if (outcome.status != GridOutcome::Status::failed) {
      try {
        read_cells(preset_, grid_, i, dir, seeds_, report_);
        report_.provenance[i] = {grid_.runs[i].folder, run_commits(dir)};
        const RunCost cost = run_cost(dir);
        report_.core_hours += cost.core_seconds / 3600.0;
        report_.runs_without_threads += cost.threads_recorded ? 0 : 1;
        report_.rounds += cost.rounds;
        report_.cpu_rounds += cost.cpu_rounds;
      } catch (const Error& e) {
        failure = e.what();
      }
    }
    if (outcome.status == GridOutcome::Status::failed || !failure.empty()) {
      ++report_.failed;
      mark_failed(preset_, grid_, i, report_);
      if (options_.log) options_.log(prefix + ": FAILED: " + message_for_user(failure));
    }
  }

 private:
  const Preset& preset_;
  const PresetGrid& grid_;
  const ReproduceOptions& options_;
  int64_t seeds_;
  ReproduceReport& report_;
  double executed_seconds_ = 0.0;
  size_t finished_ = 0;
};

}  // namespace

// Every dataset the cells to run read must be installed before anything runs: a missing one used to fail
// each of its runs one by one and leave a table of "error" cells (issue 40). Runs that --resume will skip
// as finished need no data.
void check_datasets_installed(const Preset& preset, const PresetGrid& grid, const ReproduceOptions& options) {
  std::set<std::pair<std::string, std::string>> checked;  // (dataset, data.data_dir)
  for (const PresetRun& run : grid.runs) {
    const ExperimentConfig config = load_config(preset.base, run.overrides);
    if (options.resume && finished_with(options.out_dir + "/runs/" + run.folder, config_to_toml(config))) continue;
    const std::string name = config.data.text("dataset"), dir = config.data.text("data_dir");
    if (!checked.insert({name, dir}).second) continue;
    try {
      find_dataset_dir(name, dir);
    } catch (const Error& e) {
      const std::vector<std::string> downloadable = downloadable_dataset_names();
      const bool get = std::find(downloadable.begin(), downloadable.end(), name) != downloadable.end();
      BASTION_FAIL("reproduce ", preset.name, ": its cells need dataset '", name, "', which is not installed (nothing ",
                   "was run; `bastion data get ", name, "` ", get ? "downloads it" : "says how to get it",
                   ", `bastion list datasets` names its files): ", without_source_locations(e.what()));
    }
  }
}

// --merge-from: each run of the grid not yet finished in the output folder is assembled from the sources'
// runs of the same folder name. All or nothing: every plan is made before anything is written.
void merge_grid_from_sources(const Preset& preset, const PresetGrid& grid, const ReproduceOptions& options) {
  BASTION_CHECK(grid_world().size == 1, "reproduce --merge-from trains nothing: run it without mpirun");
  struct Planned {
    size_t run;
    ExperimentConfig config;
    SeedMergePlan plan;
  };
  std::vector<Planned> plans;
  std::string missing;
  for (size_t i = 0; i < grid.runs.size(); ++i) {
    const ExperimentConfig config = load_config(preset.base, grid.runs[i].overrides);
    const std::string dir = options.out_dir + "/runs/" + grid.runs[i].folder;
    if (finished_with(dir, config_to_toml(config))) continue;
    if (std::filesystem::exists(dir)) {  // never merged over: its files may be a run in progress
      missing += "\n  " + grid.runs[i].folder + ": the output folder holds it unfinished or as another " +
                 "experiment (move it away, or merge into another --out)";
      continue;
    }
    std::vector<std::string> sources;
    for (const std::string& source : options.merge_from) sources.push_back(source + "/runs/" + grid.runs[i].folder);
    SeedMergePlan plan = plan_seed_merge(config, sources);
    if (plan.missing.empty())
      plans.push_back({i, config, std::move(plan)});
    else
      missing += "\n  " + grid.runs[i].folder + ": " + plan.missing;
  }
  BASTION_CHECK(missing.empty(), "reproduce --merge-from: these runs cannot be assembled from the sources (nothing ",
                "was written; --row keeps the rows that they complete):", missing);
  for (const auto& [i, config, plan] : plans) {
    write_seed_merge(config, plan, options.out_dir + "/runs/" + grid.runs[i].folder);
    if (options.log)
      options.log(grid.runs[i].folder + ": seeds " + std::to_string(plan.seeds.front().seed) + ".." +
                  std::to_string(plan.seeds.back().seed) + " assembled from the sources");
  }
}

PresetGrid reproduce_grid(const Preset& preset, const ReproduceOptions& options) {
  std::vector<std::string> extra;
  if (options.quick) extra = preset.quick;
  extra.insert(extra.end(), options.overrides.begin(), options.overrides.end());
  extra.push_back("repeat=" + std::to_string(options.seeds > 0 ? options.seeds : preset.seeds));
  return preset_grid(preset, extra);
}

ReproduceReport reproduce(const Preset& preset, const ReproduceOptions& given) {
  BASTION_CHECK(!given.out_dir.empty(), "reproduce: no output folder given");
  ReproduceOptions options = given;
  // The assembled or reused runs are finished: the grid skips them.
  options.resume = options.resume || !options.merge_from.empty() || !options.reuse_from.empty();
  const auto start = std::chrono::steady_clock::now();
  const int64_t seeds = options.seeds > 0 ? options.seeds : preset.seeds;
  const PresetGrid grid = reproduce_grid(preset, options);
  // A bad --set key would fail every run one by one; say it once, before anything runs.
  if (!options.overrides.empty() && !grid.runs.empty()) load_config(preset.base, grid.runs.front().overrides);
  if (!options.merge_from.empty()) merge_grid_from_sources(preset, grid, options);
  check_datasets_installed(preset, grid, options);
  std::filesystem::create_directories(options.out_dir + "/runs");
  // --reuse-from's copies, on rank 0 only: the other ranks get their runs from it afterwards.
  if (!options.reuse_from.empty() && grid_world().rank == 0)
    for (const ReusedRun& run : reuse_finished_runs(preset.base, grid, options.out_dir, options.reuse_from))
      if (options.log)
        options.log(grid.runs[run.index].folder + ": reused from " + run.source + " (the same experiment)");
  ReproduceReport report;
  report.cells.assign(preset.rows.size(), std::vector<CellResult>(preset.columns.size(), CellResult{kNaN, kNaN}));
  report.ranks = grid_world().size;
  report.provenance.resize(grid.runs.size());
  const GridTask task = [&](size_t i) {
    return run_grid_cell(preset.base, grid.runs[i], options.out_dir + "/runs/" + grid.runs[i].folder, options);
  };
  GridTally tally(preset, grid, options, seeds, report);
  const GridDone done = [&](size_t i, const GridOutcome& outcome) { tally.record(i, outcome); };
  report.rank = run_grid(grid.runs.size(), task, done).rank;
  if (report.rank != 0) return report;  // rank 0 writes the tables
  report.seconds = seconds_since(start);
  write_file_atomic(options.out_dir + "/table.md", table_markdown(preset, report, options));
  write_file_atomic(options.out_dir + "/table.csv", table_csv(preset, report));
  write_file_atomic(options.out_dir + "/table.svg", table_svg(preset, report));
  return report;
}

}  // namespace bastion
