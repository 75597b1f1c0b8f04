// `bastion reproduce PRESET --status`: where a campaign stands, read from its folders; nothing is trained
// or written. For every run of the grid (as reproduce() would make it: --quick, --set, --seeds apply), the
// folder that holds it, looked for in the output folder and then in each --merge-from folder: finished
// (summary.json, same experiment), in progress (config.toml of the same experiment, its rounds so far from
// timing.csv), or not started; where no folder holds the run's seed range, its seeds as runs of other seed
// ranges hold them (what --merge-from assembles: finished when every seed's run is); its core-hours so far
// (CPU time of the rounds, or round time x threads where timing.csv has no cpu_s, as table.md's Cost line
// counts them). Then the counts, the core-hours spent, and an estimate of those left: each unfinished run's
// rounds left x the cost per round of its row's runs so far (the mean over all runs when its row has none).
#pragma once

#include <string>

#include "fl/reproduce/preset.h"
#include "fl/reproduce/reproduce.h"

namespace bastion {

std::string reproduce_status(const Preset& preset, const ReproduceOptions& options);

}  // namespace bastion
