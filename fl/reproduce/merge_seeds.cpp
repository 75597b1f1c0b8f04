#include "fl/reproduce/merge_seeds.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>

#include "data/idx.h"
#include "fl/core/experiment.h"
#include "fl/core/run_setup.h"
#include "tensor/error.h"
#include "tensor/file_io.h"

namespace bastion {

namespace {

namespace fs = std::filesystem;

// Files of a run folder that describe the whole run, not one seed: written anew for the target (or, for a
// checkpoint, left behind: it records the source's seed range), never copied into a seed's folder.
const std::set<std::string> kRunLevelFiles = {"config.toml",    "summary.json",           "curves.svg",
                                              "provenance.tsv", "checkpoint.safetensors", "report.html",
                                              ".bastion-lock"};

struct SourceRun {
  std::string dir;
  int64_t repeat = 1;
  std::vector<SummaryEntry> runs;  // summary.json's entries, one per seed
};

// The source's run when it is finished with the target's experiment; nullopt when it is absent or not
// finished. A finished run of another experiment is an error: the user named the wrong folder.
std::optional<SourceRun> read_source(const ExperimentConfig& target, const std::string& dir) {
  if (!fs::exists(dir + "/summary.json") || !fs::exists(dir + "/config.toml")) return std::nullopt;
  const std::string path = dir + "/config.toml";
  const std::string there = computed_part(config_to_toml(with_target_seeds(path, target)));
  const std::string here = computed_part(config_to_toml(target));
  BASTION_CHECK(there == here, "--merge-from: ", path, " is another experiment than this cell's (beyond seed and ",
                "repeat; first difference: ", first_config_difference(there, here), ")");
  return SourceRun{dir, parse_config(read_text_file(path), path).experiment.integer("repeat"),
                   parse_summary_entries(read_text_file(dir + "/summary.json"), dir + "/summary.json")};
}

// Copies one seed's files (every regular file but the run-level ones and temporaries) into `to`.
void copy_seed_files(const std::string& from, const std::string& to) {
  BASTION_CHECK(fs::is_regular_file(from + "/rounds.csv"), "--merge-from: ", from, " has no rounds.csv");
  fs::create_directories(to);
  for (const fs::directory_entry& entry : fs::directory_iterator(from)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || entry.is_symlink() || kRunLevelFiles.count(name) > 0 ||
        name.find(".tmp.") != std::string::npos)
      continue;
    fs::copy_file(entry.path(), to + "/" + name);
  }
}

}  // namespace

ExperimentConfig with_target_seeds(const std::string& config_path, const ExperimentConfig& target) {
  return parse_config(read_text_file(config_path), config_path,
                      {"seed=" + std::to_string(target.experiment.integer("seed")),
                       "repeat=" + std::to_string(target.experiment.integer("repeat"))});
}

SeedMergePlan plan_seed_merge(const ExperimentConfig& target, const std::vector<std::string>& source_runs) {
  std::vector<SourceRun> sources;
  std::string unfinished;  // named in `missing`: often the reason a seed is not found
  for (const std::string& dir : source_runs) {
    if (std::optional<SourceRun> source = read_source(target, dir))
      sources.push_back(std::move(*source));
    else if (fs::exists(dir))
      unfinished += (unfinished.empty() ? "" : ", ") + dir;
  }
  SeedMergePlan plan;
  const uint64_t first = static_cast<uint64_t>(target.experiment.integer("seed"));
  for (uint64_t seed = first; seed < first + static_cast<uint64_t>(target.experiment.integer("repeat")); ++seed) {
    bool found = false;
    for (const SourceRun& source : sources) {
      const auto run = std::find_if(source.runs.begin(), source.runs.end(),
                                    [seed](const SummaryEntry& e) { return e.run.seed == seed; });
      if (run == source.runs.end()) continue;
      plan.seeds.push_back({seed, source.dir, seed_folder(source.dir, source.repeat, seed), *run});
      found = true;
      break;
    }
    if (!found && plan.missing.empty()) plan.missing = "seed " + std::to_string(seed) + " is in none of the sources";
  }
  if (!plan.missing.empty() && !unfinished.empty()) plan.missing += " (not finished: " + unfinished + ")";
  return plan;
}

void write_seed_merge(const ExperimentConfig& target, const SeedMergePlan& plan, const std::string& out_dir) {
  BASTION_ASSERT(plan.missing.empty());
  BASTION_CHECK(!fs::exists(out_dir), "--merge-from: ", out_dir, " exists and is not this cell's finished run; ",
                "move it away, or merge into another --out");
  const std::string staging = out_dir + ".merging." + std::to_string(::getpid());
  fs::remove_all(staging);
  fs::create_directories(staging);
  const int64_t repeat = target.experiment.integer("repeat");
  std::vector<SummaryEntry> runs;
  std::vector<std::vector<RoundRecord>> curves;
  std::string provenance;
  std::set<std::string> provenance_read;
  for (const SeedMergePlan::Seed& seed : plan.seeds) {
    const std::string to = seed_folder(staging, repeat, seed.seed);
    copy_seed_files(seed.files, to);
    runs.push_back(seed.entry);
    curves.push_back(parse_rounds_csv(read_text_file(to + "/rounds.csv")));
    const std::string lines = seed.source_run + "/provenance.tsv";
    if (provenance_read.insert(seed.source_run).second && fs::exists(lines)) provenance += read_text_file(lines);
  }
  write_file_atomic(staging + "/config.toml", config_to_toml(target));
  write_file_atomic(staging + "/summary.json",
                    summary_json(target.experiment.text("name"), target.eval.text("report"), runs));
  write_file_atomic(staging + "/curves.svg", curves_svg(run_title(target), curves));
  if (!provenance.empty()) write_file_atomic(staging + "/provenance.tsv", provenance);
  fs::create_directories(fs::path(out_dir).parent_path());
  fs::rename(staging, out_dir);
}

}  // namespace bastion
