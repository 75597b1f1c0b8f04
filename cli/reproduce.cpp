// `bastion reproduce PRESET [--quick] [--seeds N] [--set KEY=VALUE ...] [--row NAME ...] [--out DIR] [--resume]
// [--overwrite] [--merge-from DIR ...] [--reuse-from DIR ...] [--status] [--threads N] [--data-dir DIR]`:
// runs a paper table's grid (fl/reproduce/preset.h, fl/reproduce/reproduce.h) and writes table.md, table.csv and
// table.svg. PRESET is a file, or a name looked up as <presets_folder()>/<name>.toml (configs/papers). With `--grid KEY=V1,V2`
// (repeatable) and `--metric NAME` (repeatable, default acc), PRESET is an experiment config instead and
// the table is the sweep fl/reproduce/preset_sweep.h builds from it. One progress line per
// run with its time and the ETA; the last line says where the table is. `mpirun -np K bastion reproduce ...`
// (an MPI build) spreads the runs over K processes; see docs/scale-out.md.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli/commands.h"
#include "kernels/cuda/cuda.h"
#include "fl/core/mpi_grid.h"
#include "fl/core/config.h"
#include "fl/reproduce/preset.h"
#include "fl/reproduce/preset_sweep.h"
#include "fl/reproduce/reproduce.h"
#include "fl/reproduce/reproduce_status.h"
#include "tensor/error.h"

namespace bastion::cli {

namespace {

struct ReproduceArgs {
  std::string preset, out_dir, data_dir, tensorboard_dir;
  std::vector<std::string> overrides, rows, grid, metrics, merge_from, reuse_from;
  int64_t seeds = 0;
  int threads = 0;
  std::string device;
  bool quick = false, resume = false, overwrite = false, status = false;
};

std::string resolve_preset(const std::string& name) {
  if (std::filesystem::is_regular_file(name)) return name;
  const std::string candidate = presets_folder() + "/" + name + ".toml";
  BASTION_CHECK(std::filesystem::is_regular_file(candidate), "no preset '", name, "': not a file, and no ", candidate,
                " (bastion list presets shows them; run from the repository root, or install the package)");
  return candidate;
}

std::string machine_description() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    model = line.substr(line.find(':') + 2);
    break;
  }
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " hardware threads";
}

// The preset file, or with --grid the sweep over the experiment config args.preset.
Preset preset_of(const ReproduceArgs& args) {
  if (args.grid.empty()) {
    BASTION_CHECK(args.metrics.empty(),
                  "--metric chooses a --grid sweep's columns; a preset's columns are in its file");
    return load_preset(resolve_preset(args.preset));
  }
  BASTION_CHECK(!args.quick, "--quick runs a preset's own small scale; a --grid sweep has none (use --set rounds=N)");
  BASTION_CHECK(std::filesystem::is_regular_file(args.preset), "--grid sweeps an experiment config: no file '",
                args.preset, "'");
  std::vector<SweepAxis> axes;
  for (const std::string& text : args.grid) axes.push_back(parse_sweep_axis(text));
  const std::vector<std::string> metrics = args.metrics.empty() ? std::vector<std::string>{"acc"} : args.metrics;
  // Each cell is checked as it will run: with this invocation's --set after the cell's own settings (a sweep
  // over attack.names needs the --set attack.malicious_fraction that goes with it).
  return sweep_preset(args.preset, axes, metrics, [&args](const std::string& base, std::vector<std::string> overrides) {
    overrides.insert(overrides.end(), args.overrides.begin(), args.overrides.end());
    load_config(base, overrides);
  });
}

int run_reproduce(const ReproduceArgs& args, const std::string& command_line) {
  use_data_dir(args.data_dir);
  Preset preset = preset_of(args);
  if (!args.rows.empty()) preset = select_rows(preset, args.rows);
  ReproduceOptions options;
  options.out_dir =
      args.out_dir.empty() ? "results/reproduce/" + preset.name + (args.quick ? "-quick" : "") : args.out_dir;
  options.quick = args.quick;
  options.overrides = args.overrides;
  options.seeds = args.seeds;
  options.resume = args.resume;
  options.overwrite = args.overwrite;
  options.tensorboard_dir = args.tensorboard_dir;
  options.merge_from = args.merge_from;
  options.reuse_from = args.reuse_from;
  options.threads = args.threads;
  options.device = args.device;
  options.command = command_line;
  options.commit = build_commit();
  options.machine = machine_description();
  if (args.device == "cuda") options.machine += ", " + std::string(cuda_device_description());
  options.log = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  if (args.status) {  // reads the folders only
    std::printf("%s", reproduce_status(preset, options).c_str());
    return 0;
  }
  // Under mpirun every rank runs this; rank 0 prints and writes the table (fl/core/mpi_grid.h).
  const GridWorld world = grid_world();
  const PresetGrid grid = preset_grid(preset);
  if (world.rank == 0)
    std::printf("reproduce %s: %s; %zu runs x %lld seeds%s, out %s\n", preset.name.c_str(), preset.title.c_str(),
                grid.runs.size(), static_cast<long long>(args.seeds > 0 ? args.seeds : preset.seeds),
                args.quick ? " (quick scale)" : "", options.out_dir.c_str());
  std::fflush(stdout);
  const ReproduceReport report = reproduce(preset, options);
  if (report.rank != 0) return 0;
  std::printf("table: %s/table.md (and table.csv, table.svg); %lld run(s), %lld skipped, %lld failed\n",
              options.out_dir.c_str(), static_cast<long long>(report.runs), static_cast<long long>(report.skipped),
              static_cast<long long>(report.failed));
  return report.failed > 0 ? 1 : 0;
}

}  // namespace

Command add_reproduce_command(CLI::App& app, int argc, char** argv) {
  auto args = std::make_shared<ReproduceArgs>();
  auto* sub =
      app.add_subcommand("reproduce", "Run a paper table's preset and write table.md beside the paper's numbers");
  sub->add_option("preset", args->preset,
                  "Preset file, or a name in configs/papers (bastion list presets); with --grid, an experiment config")
      ->required();
  sub->add_flag("--quick", args->quick, "The preset's small scale (smoke test)");
  sub->add_option("--seeds", args->seeds, "Seeds per cell (default: the preset's)")->check(CLI::Range(1, 100));
  sub->add_option("--set", args->overrides,
                  "Override a key on every run, after the preset's settings (reduced scale: --set rounds=20); "
                  "table.md names the overrides")
      ->allow_extra_args(false);  // one KEY=VALUE per --set: the preset positional is never taken for one
  sub->add_option("--row", args->rows,
                  "Run only this row (repeatable; its name or folder slug, e.g. --row fedavg); the cells keep their "
                  "folders, so the whole preset can --resume from them later")
      ->allow_extra_args(false);
  sub->add_option("--grid", args->grid,
                  "Sweep instead of a preset: KEY=V1,V2,... (repeatable); rows = every combination of the axes but the "
                  "last, columns = the last axis's values (docs/presets.md)")
      ->allow_extra_args(false);
  sub->add_option("--metric", args->metrics,
                  "With --grid: the summary.json figure each cell shows (repeatable; default acc; e.g. asr, p_acc)")
      ->allow_extra_args(false);
  sub->add_option("--out", args->out_dir, "Output folder (default results/reproduce/<preset>)");
  sub->add_option("--threads", args->threads,
                  "Clients trained in parallel (default: each config's run.threads); under mpirun per rank "
                  "(keep ranks x threads <= cores)")
      ->check(CLI::Range(1, 256));
  sub->add_option("--device", args->device,
                  "cpu or cuda: where clients train and models are evaluated (default: each "
                  "config's run.device; docs/cuda.md)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  sub->add_flag("--resume", args->resume, "Skip finished runs and continue the others from their checkpoints");
  sub->add_flag("--overwrite", args->overwrite, "Replace results already in the output folder");
  sub->add_option("--tensorboard", args->tensorboard_dir,
                  "Also write each run's rounds.csv columns as TensorBoard scalars to DIR/<run folder>: tensorboard "
                  "--logdir DIR");
  sub->add_option("--merge-from", args->merge_from,
                  "Assemble each run from the seeds that earlier invocations of this preset ran into DIR (repeatable; "
                  "e.g. seed 1 in one folder, --set seed=2 --seeds 2 in another); trains nothing (docs/presets.md)")
      ->allow_extra_args(false);
  sub->add_option("--reuse-from", args->reuse_from,
                  "Copy each run that --out lacks from a finished run of the same experiment in DIR/runs/ (the --out "
                  "of another preset's reproduce, repeatable; e.g. cells two tables share), instead of training it; "
                  "implies --resume (docs/presets.md)")
      ->allow_extra_args(false);
  sub->add_flag(
      "--status", args->status,
      "Print where each run stands in --out and the --merge-from (and --reuse-from) folders (finished, rounds run, "
      "not started), the core-hours spent and an estimate of those left; trains and writes nothing");
  add_data_dir_option(sub, args->data_dir);
  std::string command_line = "bastion";
  for (int i = 1; i < argc; ++i) command_line += std::string(" ") + argv[i];
  return [args, command_line]() { return run_reproduce(*args, command_line); };
}

}  // namespace bastion::cli
