// The federated run loop (DESIGN.md "Run-time shape of an experiment"):
//   load data once (read-only, shared) -> partition -> malicious set
//   per round t = 1..rounds:
//     sample clients -> train them on the thread pool (one Model replica per worker, kernels
//     single-threaded, seeds from (seed, t, client)) -> uploads = trained state - global state
//     -> attacks (collusion, then upload attacks) -> validate uploads (NaN/Inf rejected and counted)
//     -> server rule -> global += update -> evaluate every eval.every rounds and at the last round
//     -> rounds.csv / timing.csv rewritten atomically (at most every 2 s, and at checkpoints and the end)
//     -> checkpoint per run.checkpoint_every
// Output folder (per seed; with repeat > 1 one subfolder seed-<s> per seed):
//   rounds.csv, timing.csv, checkpoint.safetensors (when enabled)
// and at the top: config.toml (resolved), summary.json, curves.svg.
// Determinism: every random choice is drawn from Generator(seed) forked by purpose, round and client
// (never from a shared stream advanced in thread order), and uploads are aggregated in client-id order,
// so rounds.csv is byte-identical for any --threads and for a resumed run.
// Spread over K ranks (RunOptions::spread_over_ranks, fl/core/spread_round.h): client c trains on rank
// c mod K, whose uploads rank 0 places in the same client order, so rounds.csv is also byte-identical
// for any K; the checkpoint (written by rank 0 with every client's state) resumes with any K.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fl/core/config.h"
#include "fl/defenses/server_rule.h"
#include "fl/metrics/results.h"

namespace bastion {

struct RunOptions {
  std::string out_dir;                          // required
  int threads = 0;                              // 0 = run.threads from the config
  std::string device;                           // "cpu" | "cuda"; empty = run.device from the config
  bool save_model = false;                      // write each seed's model.safetensors (SeedRun::save_models)
  bool resume = false;                          // continue from out_dir's checkpoints
  bool overwrite = false;                       // replace results already in out_dir
  std::function<void(const std::string&)> log;  // progress lines; null = silent
  int64_t stop_after_round = 0;                 // tests: return after this round (a "kill"), 0 = off
  double auto_checkpoint_seconds = 60.0;        // run.checkpoint_every = -1: at most one checkpoint this often
  double results_write_seconds = 2.0;           // rounds.csv & co. rewritten at most this often (and at
                                                // checkpoints and the last round)
  // `--tensorboard DIR`: each seed's TensorBoard event file goes to DIR (DIR/seed-<s> with repeat > 1, as
  // the results), rewritten with rounds.csv (fl/metrics/tensorboard.h); empty = none.
  std::string tensorboard_dir;
  // `bastion run` under mpirun -np K: spread the clients over the K ranks (fl/core/mpi_run.h; rank 0 is
  // the server and alone writes files and logs). false: this process runs everything (the grid mode's
  // runs, tests).
  bool spread_over_ranks = false;
  // Tests and tools: wraps the server rule built from the config (once per seed), e.g. to observe what
  // the rule is given or to hand clients start states; null = the rule as configured.
  std::function<std::unique_ptr<ServerRule>(std::unique_ptr<ServerRule>)> wrap_server_rule;
};

// Where one seed's files go in a run's output folder: the folder itself with repeat = 1, else
// <out_dir>/seed-<seed> (what --merge-from and reproduce --status read back).
std::string seed_folder(const std::string& out_dir, int64_t repeat, uint64_t seed);

// A plot's title that tells runs of one preset apart: "<name>: <client rule> clients, <server rule> server,
// attack a + b (<description>)".
std::string run_title(const ExperimentConfig& config);

// Runs every seed of the config (seed .. seed + repeat - 1), writes the files above and returns one
// summary per seed. Throws bastion::Error on bad data, a partition that cannot be made, a resume that
// does not match, or (server.on_invalid = fail) an invalid upload.
std::vector<RunSummary> run_experiment(const ExperimentConfig& config, const RunOptions& options);
// The clients trained in parallel by a run: --threads (RunOptions::threads) when given, else run.threads.
int run_threads(const ExperimentConfig& config, const RunOptions& options);

}  // namespace bastion
