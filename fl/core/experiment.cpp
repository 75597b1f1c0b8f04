// run_experiment: load the data once, then run each seed (fl/core/seed_run.h) and write summary.json.
#include "fl/core/experiment.h"

#include <filesystem>
#include <optional>

#include "fl/core/checkpoint.h"
#include "fl/core/run_setup.h"
#include "fl/core/seed_run.h"
#include "kernels/cpu/gemm.h"
#include "tensor/file_io.h"

namespace bastion {

namespace {
// The seed of repeat r, and its folder in `out_dir`.
uint64_t seed_of(const ExperimentConfig& config, int64_t r) {
  return static_cast<uint64_t>(config.experiment.integer("seed") + r);
}
std::string seed_dir(const ExperimentConfig& config, const std::string& out_dir, int64_t r) {
  return seed_folder(out_dir, config.experiment.integer("repeat"), seed_of(config, r));
}

// --resume validates every seed's checkpoint (integrity, consistency, seed, round, configuration) before
// the run writes anything, so a refused resume leaves the folder as it was (config.toml included).
void check_checkpoints_before_resume(const ExperimentConfig& config, const std::string& out_dir,
                                     const std::string& config_toml) {
  const int64_t rounds = config.experiment.integer("rounds");
  for (int64_t r = 0; r < config.experiment.integer("repeat"); ++r) {
    const std::string path = seed_dir(config, out_dir, r) + "/checkpoint.safetensors";
    if (!std::filesystem::exists(path)) continue;
    const CheckpointState state = load_checkpoint(path);
    check_resumable(path, state.config_toml, config_toml);
    const uint64_t seed = seed_of(config, r);
    BASTION_CHECK(state.seed == seed, "checkpoint ", path, " is for seed ", state.seed, ", this run is seed ", seed);
    BASTION_CHECK(state.round <= rounds, "checkpoint ", path, " is from round ", state.round,
                  ", after this config's last round ", rounds, ": rounds may grow, not shrink");
  }
}
}  // namespace

std::string seed_folder(const std::string& out_dir, int64_t repeat, uint64_t seed) {
  return repeat == 1 ? out_dir : out_dir + "/seed-" + std::to_string(seed);
}

std::string run_title(const ExperimentConfig& config) {
  std::string title = config.experiment.text("name") + ": " + config.clients.text("rule") + " clients, " +
                      config.server.text("rule") + " server";
  const std::vector<std::string> attacks = config.attack.list("names");
  for (size_t i = 0; i < attacks.size(); ++i) title += (i == 0 ? ", attack " : " + ") + attacks[i];
  if (!config.experiment.text("description").empty()) title += " (" + config.experiment.text("description") + ")";
  return title;
}

int run_threads(const ExperimentConfig& config, const RunOptions& options) {
  return options.threads > 0 ? options.threads : static_cast<int>(config.run.integer("threads"));
}

std::vector<RunSummary> run_experiment(const ExperimentConfig& config, const RunOptions& options) {
  const int threads = run_threads(config, options);
  const std::unique_ptr<RunTransport> net =
      options.spread_over_ranks ? make_run_transport() : std::make_unique<LocalTransport>();
  const bool server = net->rank() == 0;  // under mpirun only rank 0 touches the output folder
  const std::string config_toml = config_to_toml(config);
  std::optional<ResultsFolderLock> lock;  // held until the run returns
  if (server) {
    lock.emplace(options.out_dir);
    prepare_out_dir(options.out_dir, options);
    if (options.resume) {
      check_resume_folder(options.out_dir, config_toml);
      check_checkpoints_before_resume(config, options.out_dir, config_toml);
    }
    write_file_atomic(options.out_dir + "/config.toml", config_toml);
  }
  set_num_threads(threads);
  const Device device = select_run_device(config, options.device);
  const SharedData shared = load_shared_data(config);
  const int64_t repeat = config.experiment.integer("repeat");
  std::vector<RunSummary> summaries;
  std::vector<std::vector<RoundRecord>> curves;
  for (int64_t r = 0; r < repeat; ++r) {
    const uint64_t seed = seed_of(config, r);
    const std::string dir = seed_dir(config, options.out_dir, r);
    if (repeat > 1 && server) prepare_out_dir(dir, options);
    SeedRun run(config, shared, seed, threads, device, dir, options, *net);
    if (options.resume && net->size() > 1)
      resume_seed_spread(run, config_toml, options);
    else if (options.resume)
      resume_seed(run, config_toml, options);
    RunOptions seed_options = options;  // the event file goes where this seed's results go
    if (!options.tensorboard_dir.empty()) seed_options.tensorboard_dir = seed_dir(config, options.tensorboard_dir, r);
    run.run(seed_options);
    if (options.stop_after_round > 0) return summaries;  // simulated kill: no summary
    if (options.save_model) run.save_models();
    if (!server) continue;
    summaries.push_back(run.summary());
    curves.push_back(run.records());
  }
  if (!server) return summaries;  // empty: rank 0 reports
  const std::string name = config.experiment.text("name");
  write_file_atomic(options.out_dir + "/summary.json", summary_json(name, config.eval.text("report"), summaries));
  write_file_atomic(options.out_dir + "/curves.svg", curves_svg(run_title(config), curves));
  return summaries;
}

}  // namespace bastion
