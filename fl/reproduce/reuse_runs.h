// `bastion reproduce --reuse-from DIR`: runs that another table already made, copied instead of trained
// again. Tables of one paper often share cells under other row names: SPMC Table 1's FedAvg and SPMC rows
// are SPMC Table 5's FedAvg and SPMC rows, the same resolved experiment. A run of this grid that the output
// folder does not have yet is copied from a finished run in DIR/runs/ (any folder name) whose config.toml
// is the same experiment as --resume compares it (finished_with: equal but for the [run] table); sources
// are searched in the order given, folders in name order, and only read.
//
// Copied: the run's record (config.toml, summary.json, rounds.csv, timing.csv, provenance.tsv, clients.csv,
// partition.csv, curves.svg, client_notes.csv, each seed-<s>/ the same), so table.md names the commits that
// made it and its Cost line counts its rounds. Not copied: checkpoints (the run is finished), files being
// written (*.tmp.<pid>), the folder's lock and symbolic links. The copy goes to a temporary folder renamed
// into place, so a kill never leaves a half-copied run that looks finished. A run folder that already exists
// in the output (finished, in progress, or left by a failure) is never replaced: --resume continues it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "fl/reproduce/preset.h"

namespace bastion {

struct ReusedRun {
  size_t index = 0;    // in grid.runs
  std::string source;  // the run folder it was copied from
};

// Copies into out_dir/runs/<folder> every run of `grid` (its configs from `base` and each run's overrides)
// that out_dir does not hold and a source holds finished. A source without a runs/ folder is an error.
std::vector<ReusedRun> reuse_finished_runs(const std::string& base, const PresetGrid& grid, const std::string& out_dir,
                                           const std::vector<std::string>& sources);

// The parts, also for `--status`: the finished runs of the sources in the order reuse looks at them, and the
// first of them that is the experiment `resolved_config` (config_to_toml of the run's config); "" if none.
std::vector<std::string> reusable_runs(const std::vector<std::string>& sources);
std::string find_reusable(const std::vector<std::string>& runs, const std::string& resolved_config);

}  // namespace bastion
