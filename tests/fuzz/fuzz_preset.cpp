// libFuzzer target: the paper-table preset format (fl/reproduce/preset.h parse_preset) with every cell's
// experiment validated against a built-in base config (pFedSAM's MNIST setting, which admits the
// personalised rules the presets use), so overrides in `set`, `quick`, rows and columns reach the config
// validator. Input: the preset text. bastion::Error is a correct answer; anything else is a bug.
// Properties of a valid preset: at least one row and column, one paper number per column, seeds in
// [1, 100], unique row names, and a grid whose every cell names a run holding exactly
// set + row.set + column.set, each of which parses.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "fl/core/config.h"
#include "fl/reproduce/preset.h"
#include "tensor/error.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

constexpr const char* kBase = R"(name = "fuzz-base"
seed = 1
rounds = 100
[data]
dataset = "mnist"
partition = "dirichlet:0.5"
clients = 100
local_test = "like-train"
[model]
name = "mlp"
[clients]
rule = "sgd"
per_round = 10
[server]
rule = "fedavg"
[attack]
malicious_count = 10
malicious_per_round = 1
[eval]
every = 10
report = "last"
personalized = true
)";

void check_cell(const std::string&, const std::vector<std::string>& overrides) {
  bastion::parse_config(kBase, "papers/base.toml", overrides);
}

void check_preset(const bastion::Preset& p) {
  FUZZ_EXPECT(!p.rows.empty() && !p.columns.empty());
  FUZZ_EXPECT(p.seeds >= 1 && p.seeds <= 100);
  FUZZ_EXPECT(p.name == "table" && p.path == "papers/table.toml" && p.base.rfind("papers/", 0) == 0);
  std::set<std::string> names;
  for (const bastion::PresetRow& row : p.rows) {
    FUZZ_EXPECT(row.paper.size() == p.columns.size());
    FUZZ_EXPECT(names.insert(row.name).second);
    FUZZ_EXPECT(row.line >= 1);
  }
  const bastion::PresetGrid grid = bastion::preset_grid(p);
  FUZZ_EXPECT(grid.cell_run.size() == p.rows.size());
  for (size_t r = 0; r < p.rows.size(); ++r) {
    FUZZ_EXPECT(grid.cell_run[r].size() == p.columns.size());
    for (size_t c = 0; c < p.columns.size(); ++c) {
      FUZZ_EXPECT(grid.cell_run[r][c] < grid.runs.size());
      std::vector<std::string> expected = p.set;
      expected.insert(expected.end(), p.rows[r].set.begin(), p.rows[r].set.end());
      expected.insert(expected.end(), p.columns[c].set.begin(), p.columns[c].set.end());
      FUZZ_EXPECT(grid.runs[grid.cell_run[r][c]].overrides == expected);
    }
  }
  for (const bastion::PresetRun& run : grid.runs) FUZZ_EXPECT(!run.folder.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    check_preset(bastion::parse_preset(text, "papers/table.toml", check_cell));
  } catch (const bastion::Error&) {
  }
  return 0;
}
