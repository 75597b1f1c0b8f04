// Every TOML file under configs/ loads and validates with today's rules: a change of meaning (a renamed
// option, a report mode that is now refused) must be mended in the configs in the same commit, not found
// by a user. Presets (files with [[rows]]) are checked cell by cell through load_preset.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "fl/core/config.h"
#include "fl/reproduce/preset.h"

namespace bastion {
namespace {

bool is_preset(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str().find("[[rows]]") != std::string::npos;
}

TEST(CommittedConfigs, EveryConfigAndPresetLoads) {
  const std::filesystem::path root = std::filesystem::path(BASTION_SOURCE_DIR) / "configs";
  int checked = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".toml") continue;
    const std::string path = entry.path().string();
    try {
      if (is_preset(entry.path()))
        load_preset(path);
      else
        load_config(path);
    } catch (const std::exception& e) {
      ADD_FAILURE() << path << ": " << e.what();
    }
    ++checked;
  }
  EXPECT_GT(checked, 20) << "configs/ should hold the committed experiments";
}

// The papers' presets measure what the papers' code measures (issue 34): every averaging rule of pFedSAM's
// Tables I-III takes the plain mean (Algorithm 1 line 20); FedFSA's Table 1 judges each client's own last
// model every round at the code's batch-mean accuracy, with the code's sensitivity for FedFSA; every FedCAP
// table row reads its samples unshuffled; SPMC's attackers keep one crop per image.
std::vector<ExperimentConfig> preset_cells(const std::string& name) {
  const Preset preset = load_preset(std::string(BASTION_SOURCE_DIR) + "/configs/papers/" + name + ".toml");
  std::vector<ExperimentConfig> cells;
  for (const PresetRun& run : preset_grid(preset).runs) cells.push_back(load_config(preset.base, run.overrides));
  return cells;
}

TEST(CommittedConfigs, PaperPresetsUseTheirCodesForms) {
  for (const char* table : {"pfedsam-table1", "pfedsam-table2", "pfedsam-table3", "pfedsam-rho-ablation",
                            "pfedsam-table1-cifar10", "pfedsam-table2-cifar10", "pfedsam-table3-cifar10"})
    for (const ExperimentConfig& c : preset_cells(table)) {
      const std::string rule = c.server.text("rule");
      if (rule == "fedavg" || rule == "norm-clip" || rule == "add-noise" || rule == "multi-krum")
        EXPECT_EQ(c.server_rule.text("weighting"), "uniform") << table << ": " << rule;
    }
  for (const ExperimentConfig& c : preset_cells("fedfsa-table1")) {
    EXPECT_EQ(c.eval.text("personal_model"), "own-last");
    EXPECT_EQ(c.eval.text("client_accuracy"), "batch-mean");
    EXPECT_EQ(c.eval.integer("batch"), 128);
    EXPECT_EQ(c.eval.integer("every"), 1);
    if (c.clients.text("rule") == "fedfsa") EXPECT_EQ(c.client_rule.text("sensitivity"), "code");
    if (c.clients.text("rule") == "fedspeed" || c.clients.text("rule") == "fedsmoo") {
      EXPECT_EQ(c.client_rule.text("tune_lr_from"), "client");
      EXPECT_DOUBLE_EQ(c.client_rule.real("tune_clip"), 10.0);
    }
  }
  for (const char* table : {"fedcap-table1-wisdm", "fedcap-table1-emnist", "fedcap-table3-emnist", "fedcap-table4"})
    for (const ExperimentConfig& c : preset_cells(table)) EXPECT_FALSE(c.client_rule.boolean("shuffle")) << table;
  // SPMC's code trains its attackers on one frozen crop per image (docs/decisions.md, "SPMC attackers'
  // augmentation"): every cell of its tables, baselines included, has BadNets with augment_once.
  for (const char* table : {"spmc-table1", "spmc-table2", "spmc-table5", "spmc-table1-cifar10", "spmc-table2-cifar10"})
    for (const ExperimentConfig& c : preset_cells(table)) {
      ASSERT_EQ(c.attacks.size(), 1u) << table;
      EXPECT_EQ(c.attacks[0].first, "badnets") << table;
      EXPECT_TRUE(c.attacks[0].second.boolean("augment_once")) << table;
    }
  // pFedSAM's CIFAR-10 column: FedRep's CNNCifar and CIFAR-10 pipeline (docs/decisions.md "pFedSAM tables:
  // CIFAR-10"), 300 rounds, the last round reported.
  for (const char* table : {"pfedsam-table1-cifar10", "pfedsam-table2-cifar10", "pfedsam-table3-cifar10"})
    for (const ExperimentConfig& c : preset_cells(table)) {
      EXPECT_EQ(c.data.text("dataset"), "cifar10") << table;
      EXPECT_EQ(c.model.text("name"), "cnn-fedrep") << table;
      EXPECT_EQ(c.data.text("normalization"), "imagenet") << table;
      EXPECT_EQ(c.experiment.integer("rounds"), 300) << table;
      EXPECT_EQ(c.experiment.integer("rounds") % c.eval.integer("every"), 0) << table;
    }
  // SPMC's CIFAR-10 column: the code's model and CIFAR-10 pipeline (docs/decisions.md "SPMC CIFAR-10 model").
  for (const char* table : {"spmc-table1-cifar10", "spmc-table2-cifar10"})
    for (const ExperimentConfig& c : preset_cells(table)) {
      EXPECT_EQ(c.data.text("dataset"), "cifar10") << table;
      EXPECT_EQ(c.model.text("name"), "resnet10") << table;
      EXPECT_EQ(c.data.text("normalization"), "dataset") << table;
      EXPECT_EQ(c.data.text("augment"), "default") << table;
      EXPECT_EQ(c.experiment.integer("rounds"), 50) << table;
    }
}

}  // namespace
}  // namespace bastion
