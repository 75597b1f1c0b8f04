// `bastion plot PATH... [--metric NAME] [--out FILE.svg] [--title TEXT]`: one metric of several runs on
// the same axes (fl/metrics/results.h overlay_svg), so runs of different rules or settings can be set side
// by side without a preset. Each PATH is a run folder (its rounds.csv, or its seed-<s>/rounds.csv files,
// drawn as their mean) or a `reproduce` output folder (each of its runs/<cell>/ folders is one run).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "data/idx.h"
#include "fl/metrics/results.h"
#include "tensor/error.h"
#include "tensor/file_io.h"

namespace bastion::cli {

namespace {

namespace fs = std::filesystem;

struct PlotArgs {
  std::vector<std::string> paths;
  std::string metric = "acc", out, title;
};

std::vector<RoundRecord> read_rounds(const fs::path& file) {
  try {
    return parse_rounds_csv(read_text_file(file.string()));
  } catch (const Error& e) {
    BASTION_FAIL(file.string(), ": ", e.what());
  }
}

// The seeds of one run folder: its rounds.csv, else every seed-<s>/rounds.csv in seed order.
std::vector<std::vector<RoundRecord>> run_seeds(const fs::path& dir) {
  if (fs::is_regular_file(dir / "rounds.csv")) return {read_rounds(dir / "rounds.csv")};
  std::vector<fs::path> seeds;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_directory() && entry.path().filename().string().rfind("seed-", 0) == 0 &&
        fs::is_regular_file(entry.path() / "rounds.csv"))
      seeds.push_back(entry.path());
  std::sort(seeds.begin(), seeds.end());
  std::vector<std::vector<RoundRecord>> records;
  for (const fs::path& seed : seeds) records.push_back(read_rounds(seed / "rounds.csv"));
  return records;
}

void add_path(const fs::path& path, std::vector<LabelledRuns>& runs) {
  BASTION_CHECK(fs::is_directory(path), "plot: '", path.string(), "' is not a folder (give a run or reproduce folder)");
  std::vector<std::vector<RoundRecord>> seeds = run_seeds(path);
  if (!seeds.empty()) {
    runs.push_back({fs::weakly_canonical(path).filename().string(), std::move(seeds)});
    return;
  }
  BASTION_CHECK(fs::is_directory(path / "runs"), "plot: no rounds.csv in '", path.string(),
                "' (a run folder, its seed-<s> folders, or a reproduce folder's runs/)");
  std::vector<fs::path> cells;
  for (const auto& entry : fs::directory_iterator(path / "runs"))
    if (entry.is_directory()) cells.push_back(entry.path());
  std::sort(cells.begin(), cells.end());
  for (const fs::path& cell : cells) {
    seeds = run_seeds(cell);
    if (!seeds.empty()) runs.push_back({cell.filename().string(), std::move(seeds)});
  }
  BASTION_CHECK(!cells.empty(), "plot: '", (path / "runs").string(), "' holds no run folders");
}

int run_plot(const PlotArgs& args) {
  std::vector<LabelledRuns> runs;
  for (const std::string& path : args.paths) add_path(path, runs);
  const std::string out = args.out.empty() ? "plot-" + args.metric + ".svg" : args.out;
  const std::string title = args.title.empty() ? std::to_string(runs.size()) + " runs" : args.title;
  write_file_atomic(out, overlay_svg(title, args.metric, runs));
  std::printf("plot: %zu run(s), %s over rounds -> %s\n", runs.size(), args.metric.c_str(), out.c_str());
  return 0;
}

}  // namespace

Command add_plot_command(CLI::App& app) {
  auto args = std::make_shared<PlotArgs>();
  auto* sub = app.add_subcommand("plot", "Draw one metric of several runs over rounds in one SVG (runs side by side)");
  sub->add_option("paths", args->paths, "Run folders (rounds.csv or seed-*/rounds.csv) or reproduce folders (runs/*)")
      ->required();
  sub->add_option(
      "--metric", args->metric, "What to draw: " + [] {
        std::string names;
        for (const std::string& name : overlay_metrics()) names += (names.empty() ? "" : ", ") + name;
        return names;
      }() + " (default acc)");
  sub->add_option("--out", args->out, "The SVG file (default plot-<metric>.svg)");
  sub->add_option("--title", args->title, "The plot's title (default: the number of runs)");
  return [args]() { return run_plot(*args); };
}

}  // namespace bastion::cli
