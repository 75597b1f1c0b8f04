// `bastion reproduce PRESET`: runs a paper-table preset's grid (fl/reproduce/preset.h) and writes, in the
// output folder:
//   runs/<cell>/    one ordinary experiment folder per run of the grid (config.toml, seed-<s>/rounds.csv,
//                   summary.json, curves.svg, checkpoints), plus provenance.tsv: date, commit, machine and
//                   threads of each invocation that ran rounds of it
//   table.md        ours (mean ± std over seeds) | paper | difference, per cell, with the scale, seeds,
//                   commit, machine, wall time and cost in core-hours (and the commits of runs made by other
//                   code, e.g. finished earlier); differences beyond a column's tolerance are marked
//   table.csv       row,column,metric,mean,std,seeds,paper,diff (numbers as shown in table.md)
//   table.svg       ours (with ± std) beside the paper's number, one panel per column
// --resume skips runs whose summary.json exists and whose config.toml matches, and continues the others
// from their checkpoints. --merge-from assembles each run from the seeds earlier invocations ran. A run that fails is reported with its error; the other runs still complete, its
// cells show "error", and reproduce() reports the failure count.
// Under `mpirun -np K` (an MPI build, fl/core/mpi_grid.h) the runs are handed to idle ranks one at a time;
// every rank calls reproduce(), rank 0 logs each run as it finishes and writes the tables, the others
// return a report with only rank and ranks set. K = 1 is the single-process loop, in the grid's order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "fl/reproduce/preset.h"

namespace bastion {

struct ReproduceOptions {
  std::string out_dir;                 // required
  bool quick = false;                  // the preset's quick overrides
  std::vector<std::string> overrides;  // KEY=VALUE on every run after the preset's (reduced scale)
  int64_t seeds = 0;                   // 0 = the preset's
  bool resume = false, overwrite = false;
  int threads = 0;                              // 0 = each config's run.threads
  std::string device;                           // "cpu" | "cuda"; empty = each config's run.device
  std::string command;                          // the command line, for table.md
  std::string commit, machine;                  // for table.md ("unknown" when empty)
  std::function<void(const std::string&)> log;  // progress lines; null = silent
  std::string tensorboard_dir;                  // each run's event files in DIR/<run folder>; empty = none
  // Folders of earlier `reproduce` invocations of this preset: each run not yet finished in out_dir is
  // assembled from their runs' seeds (fl/reproduce/merge_seeds.h) before the grid, which then trains
  // nothing; every run must be complete, or nothing is written.
  std::vector<std::string> merge_from;
  // Folders of earlier `reproduce` invocations of any preset: each run out_dir does not hold is copied from
  // a finished run of the same experiment there instead of being trained (fl/reproduce/reuse_runs.h).
  std::vector<std::string> reuse_from;
};

struct CellResult {
  double mean = 0.0, std = 0.0;  // in the column's scale; NaN when missing
  int64_t seeds = 0;
  bool failed = false;
};

struct ReproduceReport {
  std::vector<std::vector<CellResult>> cells;  // [row][column]
  int64_t runs = 0, skipped = 0, failed = 0;
  double seconds = 0.0;  // wall time of this invocation
  // The table's cost over every run it reads (ran now or earlier): each round's CPU time, or its round time
  // x threads where timing.csv has no cpu_s (run_cost, run_record.h); runs whose provenance has no thread
  // count are charged 1 thread and counted here. rounds: every round read; cpu_rounds: those with cpu_s.
  double core_hours = 0.0;
  int64_t runs_without_threads = 0;
  int64_t rounds = 0, cpu_rounds = 0;
  int rank = 0, ranks = 1;  // this process's place under mpirun (rank 0 has the cells)
  // per run of the grid, in its order: (run folder, the commits that made it: "`abc1234`", "`a` then `b`"
  // when resumed, or "unrecorded"), from its provenance.tsv; empty for a run whose cells were not read
  std::vector<std::pair<std::string, std::string>> provenance;
};

ReproduceReport reproduce(const Preset& preset, const ReproduceOptions& options);
// The runs reproduce() makes: the preset's grid with --quick's, --set's and --seeds' overrides.
PresetGrid reproduce_grid(const Preset& preset, const ReproduceOptions& options);

// The writers, separate for tests.
std::string table_markdown(const Preset& preset, const ReproduceReport& report, const ReproduceOptions& options);
std::string table_csv(const Preset& preset, const ReproduceReport& report);
std::string table_svg(const Preset& preset, const ReproduceReport& report);

}  // namespace bastion
