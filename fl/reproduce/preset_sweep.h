// One-line sweeps without a preset file: `bastion reproduce BASE.toml --grid KEY=V1,V2 [--grid KEY=...]
// [--metric NAME ...]` builds a preset in memory (fl/reproduce/preset.h) and runs it like any other.
//   one axis:    rows = its values, columns = the metrics
//   two or more: rows = every combination of all axes but the last (in the order given, the first axis
//                varying slowest), columns = the last axis's values (x the metrics, when more than one)
// A cell's overrides are "KEY=VALUE" for each axis, exactly as --set takes them (so `attack.names=lie`
// is the list ["lie"]). The table has no paper numbers, so it gets no paper, Δ or † columns; one seed
// unless --seeds says otherwise. Every cell's config is checked before anything runs, as for a preset.
#pragma once

#include <string>
#include <vector>

#include "fl/reproduce/preset.h"

namespace bastion {

struct SweepAxis {
  std::string key;
  std::vector<std::string> values;
};

// "KEY=V1,V2,...": commas inside [...], {...} or "..." do not split (attack.names=["lie","ipm"],["ipm"]).
// Throws bastion::Error on a missing '=', an empty key or an empty value.
SweepAxis parse_sweep_axis(const std::string& text);

// The preset of a sweep over `axes` on the experiment `base_path`, showing `metrics` (summary.json
// names, preset_metrics()); `check_cell` validates every cell (load_preset's check is load_config).
// Its name (the default results folder) is the base file's stem + "-sweep".
Preset sweep_preset(const std::string& base_path, const std::vector<SweepAxis>& axes,
                    const std::vector<std::string>& metrics, const PresetCellCheck& check_cell);

}  // namespace bastion
