// `bastion reproduce --merge-from DIR`: a run folder assembled from the seeds that other folders' runs of
// the same experiment hold, so that a table's seeds can be run by separate invocations (a campaign adds
// seeds 2 and 3 to a finished seed 1: `--set seed=<next> --seeds 2` into a folder of its own) and still be
// reported as one cell. Nothing is trained and the sources are only read.
//
// A source run counts when it is finished (summary.json) and its config.toml is the target's experiment:
// equal to it but for the top-level `seed` and `repeat` and the [run] table. Each of the target's seeds
// (seed .. seed + repeat - 1) is taken from the first source, in the order given, that holds it: its files
// (rounds.csv, timing.csv, clients.csv, partition.csv, ...; not its checkpoint, which records the source's
// configuration) go to seed-<s>/ as a single invocation would have written them (seed-<s>/ even for one
// seed when repeat > 1), with config.toml, summary.json and curves.svg written as `bastion run` writes
// them for the target's configuration, and the sources' provenance.tsv lines (so table.md names the
// commits that ran each seed, and the cost counts their rounds).
#pragma once

#include <string>
#include <vector>

#include "fl/core/config.h"
#include "fl/metrics/results.h"

namespace bastion {

// A recorded config.toml parsed with the target's seed range (`seed`, `repeat`): equal to the target in
// its computed part when the two runs are one experiment whose seeds --merge-from can put together (also
// reproduce --status, which compares resumable parts: rounds may differ there). Throws on a config that
// no longer parses.
ExperimentConfig with_target_seeds(const std::string& config_path, const ExperimentConfig& target);

// Where each seed of one target run comes from; `missing` says why the run cannot be assembled ("" when
// it can).
struct SeedMergePlan {
  struct Seed {
    uint64_t seed = 0;
    std::string source_run;  // the source's run folder
    std::string files;       // the folder holding this seed's files: source_run, or source_run/seed-<s>
    SummaryEntry entry;      // its entry in the source's summary.json
  };
  std::vector<Seed> seeds;  // ascending
  std::string missing;
};

// Reads the candidate runs (folders that do not exist are skipped); throws when one of them is finished
// with a different experiment (naming the first difference) or has a damaged summary.json.
SeedMergePlan plan_seed_merge(const ExperimentConfig& target, const std::vector<std::string>& source_runs);

// Writes the target run folder `out_dir` from a complete plan, atomically: into a sibling temporary folder
// first, renamed into place; refuses when `out_dir` exists.
void write_seed_merge(const ExperimentConfig& target, const SeedMergePlan& plan, const std::string& out_dir);

}  // namespace bastion
