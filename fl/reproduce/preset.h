// Paper-table presets (DESIGN.md "Reproduction: paper tables as data"): one TOML file per table,
// configs/papers/<paper>-table<N>.toml:
//
//   title = "pFedSAM Table I: black-box BadNets, MNIST"
//   paper = "pFedSAM (ICC 2025), Table I, MNIST column"
//   base = "pfedsam-mnist.toml"        # the experiment every cell starts from (relative to this file)
//   set = ["eval.every=10"]            # overrides for every cell (optional)
//   seeds = 3                          # seeds per cell (repeat); bastion reproduce --seeds overrides
//   quick = ["rounds=3", ...]          # the --quick scale (smoke tests, CI)
//   [cost]                             # optional: what the full-scale grid cost (bastion list presets)
//   core_hours = 9.3                   # CPU time of the runs' rounds (table.md's Cost line)
//   seeds = 1                          # the seeds that figure covers (default: the preset's seeds)
//   cpu = "Intel Xeon, 2 cores"        # the CPU it was measured on (required with core_hours)
//   basis = "measured"                 # measured (the grid ran) | estimated (from timed rounds, see note)
//   date = "2026-11-28"                # optional, as are note = "..." and wall_hours (on how many ranks: note)
//   [[columns]]                        # one per table column
//   name = "ACC"                       # header
//   metric = "p_acc"                   # a summary.json figure: acc, asr, bfr, v, local_acc, p_acc, p_asr, ...
//   scale = 100                        # shown as metric x scale (percent)
//   tolerance = 3                      # |ours - paper| beyond this is marked in table.md
//   set = []                           # overrides of this column (an attack, a ratio), optional
//   [[rows]]                           # one per table row (a method with its settings)
//   name = "FedRep"
//   set = ["clients.rule=fedrep"]
//   paper = [90.44, 35.86]             # the paper's number per column; "-" where the paper has none
//
// A cell is (row, column); its experiment is base + set + row.set + column.set. Cells with the same
// overrides share one run (the ACC and ASR columns of a row come from one run). Every cell's config is
// validated when the preset loads, so a bad method name or key fails before anything runs; errors name
// the preset file and line.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace bastion {

struct PresetColumn {
  std::string name, metric;
  double scale = 100.0, tolerance = 0.0;  // tolerance 0 = no marks
  std::vector<std::string> set;
};

struct PresetRow {
  std::string name;
  std::vector<std::string> set;
  std::vector<double> paper;  // one per column; NaN where the paper gives none
  int64_t line = 0;           // in the preset file
};

// A preset's measured cost ([cost]): core-hours of rounds for `seeds` seeds on `cpu`. core_hours 0 = not
// measured (no [cost] table).
struct PresetCost {
  double core_hours = 0.0, wall_hours = 0.0;  // wall_hours 0 = not given
  int64_t seeds = 0;
  std::string cpu, basis, date, note;
};

struct Preset {
  std::string path, name;          // file, and its stem (the results folder's default name)
  std::string title, paper, base;  // base: resolved path of the base experiment
  std::vector<std::string> set, quick;
  int64_t seeds = 3;
  PresetCost cost;
  std::vector<PresetColumn> columns;
  std::vector<PresetRow> rows;
};

// One experiment of the grid: its results folder name and the overrides on top of the base.
struct PresetRun {
  std::string folder;
  std::vector<std::string> overrides;
};

struct PresetGrid {
  std::vector<PresetRun> runs;
  std::vector<std::vector<size_t>> cell_run;  // [row][column] -> index into runs
};

// Reads and validates a preset (see above). Throws bastion::Error naming the file and line.
Preset load_preset(const std::string& path);
// Checks one cell's experiment: the resolved base path and the cell's overrides; throws bastion::Error
// when the experiment is invalid. load_preset's check is load_config(base, overrides).
using PresetCellCheck = std::function<void(const std::string& base, const std::vector<std::string>& overrides)>;
// load_preset on text in memory (tests, the fuzz target): `path` names the preset in errors and is the
// folder the base is resolved against; check_cell validates every cell instead of reading the base file.
Preset parse_preset(std::string_view text, const std::string& path, const PresetCellCheck& check_cell);
// "9.3 core-hours for 1 seed (≈ 27.9 for 3), measured on CPU, DATE" or "cost not measured": bastion list
// presets' cost text for a preset whose grid runs `seeds` seeds.
std::string preset_cost_text(const PresetCost& cost, int64_t seeds);
// The runs of the grid with `extra` overrides (quick scale, seeds) appended to every run.
PresetGrid preset_grid(const Preset& preset, const std::vector<std::string>& extra = {});
// A row's or column's results folder name: lower case, every run of other characters one '-' ("NC (c =
// 0.5)" -> "nc-c-0-5"; "cell" when nothing is left). A run's folder is the row's, or row--column when the
// column changes settings (bastion report links a table's rows to their runs with it).
std::string results_folder_slug(const std::string& text);

// The preset cut to the rows named in `names` (a row's exact name or its results folder's slug), in the
// preset's order; throws naming every row when a name matches none. Run folders keep their names, so a
// later run of the whole preset with --resume reuses the cells run this way.
Preset select_rows(const Preset& preset, const std::vector<std::string>& names);
// Presets in a folder: the *.toml files that have [[rows]] (configs/papers/), sorted by name.
std::vector<std::string> find_presets(const std::string& folder);
// The figures a column may show (summary.json names).
const std::vector<std::string>& preset_metrics();

}  // namespace bastion
