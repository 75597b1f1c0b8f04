// Helpers shared by the FL test files.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "data/idx.h"
#include "fl/core/config.h"
#include "fl/core/experiment.h"
#include "fl/registry.h"
#include "test_support.h"

namespace bastion::testing {

// The registered attack `name` with its defaults, overridden by `given` (validated like a config table).
inline std::unique_ptr<Attack> build_attack(const std::string& name, const std::map<std::string, ParamValue>& given = {}) {
  const AttackEntry& entry = find_attack(name);
  return entry.make(Params("attack." + name, *entry.info.params, given));
}

// Runs FL experiments from TOML text into folders of a temporary directory.
class FlRunTest : public TempDirTest {
 protected:
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
  std::string file(const std::string& out, const std::string& name) { return read_text_file((dir_ / out / name).string()); }
};

}  // namespace bastion::testing
