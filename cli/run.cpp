// `bastion run CONFIG.toml [--set key=value ...] [--out DIR] [--threads N] [--resume] [--overwrite] [--data-dir DIR]`
// (or `bastion run --resume --out DIR`, which reads DIR/config.toml):
// one federated experiment (fl/core/experiment.h). Prints one progress line per round, then where the
// results and the plot are, and last the one-line summary `acc=.. asr=..`.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "fl/core/config.h"
#include "fl/core/experiment.h"
#include "fl/core/mpi_grid.h"

namespace bastion::cli {

namespace {

struct RunArgs {
  std::string config_path, out_dir, data_dir, tensorboard_dir;
  std::vector<std::string> overrides;
  int threads = 0;
  std::string device;
  bool resume = false, overwrite = false, quiet = false, save_model = false;
};

// Without a config file, `--resume --out DIR` continues the run in DIR from the config.toml it recorded.
std::string config_path(const RunArgs& args) {
  if (!args.config_path.empty()) return args.config_path;
  BASTION_CHECK(args.resume && !args.out_dir.empty(),
                "run: give a config file (e.g. configs/demo.toml), or --resume "
                "--out DIR to continue the run in DIR from its config.toml");
  return args.out_dir + "/config.toml";
}

int run_run(const RunArgs& args) {
  use_data_dir(args.data_dir);
  const ExperimentConfig config = load_config(config_path(args), args.overrides);
  RunOptions options;
  options.out_dir = args.out_dir.empty() ? "results/" + config.experiment.text("name") : args.out_dir;
  options.threads = args.threads;
  options.device = args.device;
  options.save_model = args.save_model;
  options.resume = args.resume;
  options.overwrite = args.overwrite;
  options.tensorboard_dir = args.tensorboard_dir;
  options.spread_over_ranks = true;
  // Under mpirun -np K (fl/core/mpi_run.h) rank 0 alone reports; the other ranks train and stay quiet.
  const bool reports = launcher_rank() == 0;
  if (!args.quiet && reports)
    options.log = [](const std::string& line) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    };
  if (reports)
    std::printf("run %s: %s on %s, %lld clients (%lld per round), %lld rounds, rule %s/%s, attacks %s, out %s\n",
                config.experiment.text("name").c_str(), config.model.text("name").c_str(),
                config.data.text("dataset").c_str(), static_cast<long long>(config.data.integer("clients")),
                static_cast<long long>(config.clients.integer("per_round")),
                static_cast<long long>(config.experiment.integer("rounds")), config.clients.text("rule").c_str(),
                config.server.text("rule").c_str(), param_value_to_toml(config.attack.list("names")).c_str(),
                options.out_dir.c_str());
  std::fflush(stdout);
  const std::vector<RunSummary> summaries = run_experiment(config, options);
  if (!reports) return 0;
  // With several seeds each has its own seed-<s>/ folder; the summary and the plot cover them all.
  const std::string rounds =
      config.experiment.integer("repeat") > 1 ? "seed-*/rounds.csv (one per seed)" : "rounds.csv";
  std::printf("results: %s/%s and %s/summary.json; plot: %s/curves.svg\n", options.out_dir.c_str(), rounds.c_str(),
              options.out_dir.c_str(), options.out_dir.c_str());
  std::printf("%s\n", summary_line(summaries).c_str());
  return 0;
}

}  // namespace

Command add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* sub = app.add_subcommand("run", "Run a federated experiment described by a TOML file (docs/config.md)");
  sub->add_option("config", args->config_path,
                  "Experiment file, e.g. configs/demo.toml (optional with --resume --out DIR: DIR/config.toml)");
  sub->add_option("--set", args->overrides, "Override a key: --set clients.sgd.lr=0.05 (repeatable)");
  sub->add_option("--out", args->out_dir, "Results folder (default results/<name>)");
  sub->add_option("--threads", args->threads, "Clients trained in parallel (default: run.threads)")
      ->check(CLI::Range(1, 256));
  sub->add_option("--device", args->device,
                  "cpu or cuda: where clients train and models are evaluated (default: "
                  "run.device; docs/cuda.md)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  sub->add_flag("--resume", args->resume, "Continue from the checkpoints in the results folder");
  sub->add_flag("--overwrite", args->overwrite, "Replace results already in the results folder");
  sub->add_flag("--quiet", args->quiet, "No per-round progress lines");
  sub->add_flag("--save-model", args->save_model,
                "Write the final global model to model.safetensors in each seed's folder (PyTorch names; loads with "
                "model.init or train --init), and the clients' personal models to personal-models.safetensors when the "
                "rule keeps them");
  sub->add_option("--tensorboard", args->tensorboard_dir,
                  "Also write every rounds.csv column as TensorBoard scalars to this folder (DIR/seed-<s> per seed "
                  "with repeat > 1): tensorboard --logdir DIR");
  add_data_dir_option(sub, args->data_dir);
  return [args]() { return run_run(*args); };
}

}  // namespace bastion::cli
