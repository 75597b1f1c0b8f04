// Helpers shared by the FL test files.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/idx.h"
#include "fl/core/config.h"
#include "fl/core/experiment.h"
#include "fl/registry.h"
#include "test_support.h"

namespace bastion::testing {

// The registered attack `name` with its defaults, overridden by `given` (validated like a config table).
inline std::unique_ptr<Attack> build_attack(const std::string& name,
                                            const std::map<std::string, ParamValue>& given = {}) {
  const AttackEntry& entry = find_attack(name);
  return entry.make(Params("attack." + name, *entry.info.params, given));
}

// The base of the whole-run tests: a tiny synthetic federation (Dirichlet(0.5) label skew, 12 clients of at
// least 5 samples, an MLP, 4 clients a round, 4 rounds, every round evaluated, a checkpoint every 2).
inline constexpr const char* kTinyRun = R"(
name = "tiny"
seed = 3
rounds = 4
[data]
dataset = "synthetic"
partition = "dirichlet:0.5"
clients = 12
min_size = 5
[model]
name = "mlp"
[clients]
per_round = 4
[eval]
every = 1
batch = 128
[run]
checkpoint_every = 2
)";

// One whole-run test's experiment: kTinyRun with "key=value" settings applied in order (as `bastion run
// --set` applies them), so that each test states only what it is about.
struct TinyRun {
  std::vector<std::string> settings;
  TinyRun with(const std::vector<std::string>& more) const {
    TinyRun out = *this;
    out.settings.insert(out.settings.end(), more.begin(), more.end());
    return out;
  }
  ExperimentConfig config() const { return parse_config(kTinyRun, "tiny.toml", settings); }
};

// Runs FL experiments from TOML text into folders of a temporary directory.
class FlRunTest : public TempDirTest {
 protected:
  std::vector<RunSummary> run(const TinyRun& spec, const std::string& out, int threads,
                              const std::vector<std::string>& overrides = {}, bool resume = false,
                              int64_t stop_after = 0) {
    return run(kTinyRun, out, threads, spec.with(overrides).settings, resume, stop_after);
  }
  // What every stateful rule's test checks: "one" (1 thread), "two" (2 threads) and "resumed" (killed after
  // `stop_after` rounds on 1 thread, resumed on 2) write the same rounds.csv byte for byte. Returns "one"'s.
  std::vector<RunSummary> expect_same_on_threads_and_resume(const TinyRun& spec, int64_t stop_after) {
    const std::vector<RunSummary> one = run(spec, "one", 1);
    run(spec, "two", 2);
    run(spec, "resumed", 1, {}, false, stop_after);
    run(spec, "resumed", 2, {}, /*resume=*/true);
    EXPECT_EQ(file("one", "rounds.csv"), file("two", "rounds.csv")) << "1 vs 2 threads";
    EXPECT_EQ(file("one", "rounds.csv"), file("resumed", "rounds.csv")) << "killed after round " << stop_after;
    return one;
  }
  std::vector<RunSummary> run(const std::string& toml, const std::string& out, int threads,
                              const std::vector<std::string>& overrides = {}, bool resume = false,
                              int64_t stop_after = 0) {
    const ExperimentConfig config = parse_config(toml, "tiny.toml", overrides);
    RunOptions options;
    options.out_dir = (dir_ / out).string();
    options.threads = threads;
    options.resume = resume;
    options.stop_after_round = stop_after;
    return run_experiment(config, options);
  }
  std::string file(const std::string& out, const std::string& name) {
    return read_text_file((dir_ / out / name).string());
  }
};

}  // namespace bastion::testing
