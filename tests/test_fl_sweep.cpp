// bastion reproduce --grid: a sweep over an experiment config without a preset file (fl/reproduce/preset_sweep.h).
// Axis parsing, the table's shape (rows = every combination of all axes but the last, columns = the
// last axis x the metrics), no paper columns, and one tiny run end to end on the synthetic set.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data/idx.h"
#include "fl/core/config.h"
#include "fl/reproduce/preset_sweep.h"
#include "fl/reproduce/reproduce.h"
#include "reproduce_test_support.h"
#include "tensor/error.h"
#include "test_support.h"

namespace bastion {
namespace {

using testing::expect_error;

const PresetCellCheck kLoadConfig = [](const std::string& base, const std::vector<std::string>& overrides) {
  load_config(base, overrides);
};

class Sweep : public testing::TempDirTest {
 protected:
  std::string base() {
    testing::write_text(dir_ / "base.toml", testing::kReproduceBase);
    return (dir_ / "base.toml").string();
  }
};

TEST(SweepAxis, SplitsOnTopLevelCommasOnly) {
  const SweepAxis rule = parse_sweep_axis("server.rule=fedavg, krum ,median");
  EXPECT_EQ(rule.key, "server.rule");
  EXPECT_EQ(rule.values, (std::vector<std::string>{"fedavg", "krum", "median"}));
  const SweepAxis lists = parse_sweep_axis(R"(attack.names=["lie","ipm"],["ipm"],"a,b")");
  EXPECT_EQ(lists.values, (std::vector<std::string>{R"(["lie","ipm"])", R"(["ipm"])", R"("a,b")"}));
  expect_error([] { parse_sweep_axis("server.rule"); }, {"expected KEY=VALUE1,VALUE2"});
  expect_error([] { parse_sweep_axis("=fedavg"); }, {"the key before '=' is empty"});
  expect_error([] { parse_sweep_axis("server.rule=fedavg,,krum"); }, {"an empty value"});
}

TEST_F(Sweep, OneAxisGivesRowsAndOneColumnPerMetric) {
  const Preset preset =
      sweep_preset(base(), {parse_sweep_axis("server.rule=fedavg,median")}, {"acc", "p_acc"}, kLoadConfig);
  EXPECT_EQ(preset.name, "base-sweep");
  EXPECT_EQ(preset.seeds, 1);
  ASSERT_EQ(preset.rows.size(), 2u);
  EXPECT_EQ(preset.rows[1].name, "median");
  EXPECT_EQ(preset.rows[1].set, (std::vector<std::string>{"server.rule=median"}));
  ASSERT_EQ(preset.columns.size(), 2u);
  EXPECT_EQ(preset.columns[1].metric, "p_acc");
  EXPECT_TRUE(preset.columns[1].set.empty());
  EXPECT_EQ(preset_grid(preset).runs.size(), 2u);  // both metrics of a row come from one run
}

TEST_F(Sweep, TheLastAxisIsTheColumnsAndTheOthersCombineIntoRows) {
  const Preset preset =
      sweep_preset(base(),
                   {parse_sweep_axis("server.rule=fedavg,median"), parse_sweep_axis("attack.malicious_count=1,2"),
                    parse_sweep_axis("attack.names=sign-flip,ipm")},
                   {"acc"}, kLoadConfig);
  ASSERT_EQ(preset.rows.size(), 4u);  // the first axis varies slowest
  EXPECT_EQ(preset.rows[1].name, "fedavg, 2");
  EXPECT_EQ(preset.rows[2].set, (std::vector<std::string>{"server.rule=median", "attack.malicious_count=1"}));
  ASSERT_EQ(preset.columns.size(), 2u);
  EXPECT_EQ(preset.columns[1].name, "ipm");
  EXPECT_EQ(preset.columns[1].set, (std::vector<std::string>{"attack.names=ipm"}));
  EXPECT_EQ(preset_grid(preset).runs.size(), 8u);
  const Preset two_metrics = sweep_preset(
      base(), {parse_sweep_axis("attack.malicious_count=1"), parse_sweep_axis("attack.names=sign-flip,ipm")},
      {"acc", "p_acc"}, kLoadConfig);
  EXPECT_EQ(two_metrics.columns[3].name, "ipm p_acc");
}

TEST_F(Sweep, EveryCellIsCheckedBeforeAnythingRuns) {
  expect_error(
      [&] { sweep_preset(base(), {parse_sweep_axis("server.rule=fedavg,no-such-rule")}, {"acc"}, kLoadConfig); },
      {"the --grid sweep on", "row 'no-such-rule'", "no-such-rule"});
  try {  // the in-memory preset's "base-sweep.toml:LINE" names no file the user has
    sweep_preset(base(), {parse_sweep_axis("server.rule=no-such-rule")}, {"acc"}, kLoadConfig);
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("base-sweep.toml"), std::string::npos) << e.what();
  }
  expect_error([&] { sweep_preset(base(), {parse_sweep_axis("server.rule=fedavg")}, {"accuracy"}, kLoadConfig); },
               {"unknown metric 'accuracy'"});
  expect_error([&] { sweep_preset(base(), {parse_sweep_axis("server.rule=fedavg,FedAvg")}, {"acc"}, kLoadConfig); },
               {"results folder 'fedavg'"});
  expect_error([&] { sweep_preset(base(), {}, {"acc"}, kLoadConfig); }, {"at least one --grid"});
}

TEST_F(Sweep, RunsAndWritesATableWithoutPaperColumns) {
  const Preset preset = sweep_preset(base(), {parse_sweep_axis("server.rule=fedavg,median")}, {"acc"}, kLoadConfig);
  ReproduceOptions options;
  options.out_dir = (dir_ / "out").string();
  options.overrides = {"rounds=1", "clients.sgd.lr=0.02"};
  const ReproduceReport report = reproduce(preset, options);
  EXPECT_EQ(report.runs, 2);
  EXPECT_EQ(report.failed, 0);
  ASSERT_EQ(report.cells.size(), 2u);
  EXPECT_EQ(report.cells[1][0].seeds, 1);
  const std::string md = read_text_file((dir_ / "out" / "table.md").string());
  EXPECT_NE(md.find("| method | acc |"), std::string::npos) << md;
  EXPECT_EQ(md.find("Δ"), std::string::npos) << md;
  EXPECT_NE(md.find("with **changed settings** (`clients.sgd.lr=0.02`)"), std::string::npos) << md;
  EXPECT_EQ(md.find("paper"), std::string::npos) << md;  // nor "not the paper's": a sweep has no paper setting
  EXPECT_TRUE(std::filesystem::exists(dir_ / "out" / "runs" / "median" / "summary.json"));
}

// From the command line, each cell is checked with the invocation's --set after its own settings: a sweep
// over attacks on a base without attackers needs the --set that adds them, and was refused before it.
TEST_F(Sweep, TheCommandLineChecksCellsWithItsOverrides) {
  const std::string config = base();
  const std::string out = (dir_ / "cli").string();
  const testing::RunResult refused =
      testing::run_bastion("reproduce " + config + " --grid attack.names=sign-flip,ipm --set rounds=1 --out " + out);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.output.find("no client is malicious"), std::string::npos) << refused.output;
  const testing::RunResult ok = testing::run_bastion("reproduce " + config +
                                                     " --grid attack.names=sign-flip,ipm --set rounds=1 "
                                                     "--set attack.malicious_count=2 --out " +
                                                     out);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("2 run(s), 0 skipped, 0 failed"), std::string::npos) << ok.output;
}

}  // namespace
}  // namespace bastion
