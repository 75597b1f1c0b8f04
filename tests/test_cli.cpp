// The `bastion` binary end to end: determinism across thread counts, saved weights, clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "data/dataset.h"
#include "fl/evaluate.h"
#include "nn/models.h"
#include "tensor/safetensors.h"
#include "tests/test_support.h"

using namespace bastion;
using namespace bastion::testing;

namespace {

// The value after "key=" on its own line, or "" when absent.
std::string line_value(const std::string& output, const std::string& key) {
  const size_t at = output.find("\n" + key + "=");
  if (at == std::string::npos) return "";
  const size_t begin = at + key.size() + 2;
  return output.substr(begin, output.find('\n', begin) - begin);
}

bool have_fmnist() { return bastion::testing::dataset_installed("fmnist"); }

const char* kShortRun = "train --dataset fmnist --model lenet --epochs 2 --limit-train 640 --batch 64 --seed 5";

}  // namespace

TEST(Cli, TrainIsBitIdenticalWithOneAndTwoThreads) {
  if (!have_fmnist()) GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const RunResult one = run_bastion(std::string(kShortRun) + " --threads 1");
  const RunResult two = run_bastion(std::string(kShortRun) + " --threads 2");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_FALSE(line_value(one.output, "weights_fnv1a").empty()) << one.output;
  EXPECT_EQ(line_value(one.output, "weights_fnv1a"), line_value(two.output, "weights_fnv1a"));
  EXPECT_EQ(line_value(one.output, "test_acc"), line_value(two.output, "test_acc"));
  // The last line is the one-line result.
  EXPECT_EQ(one.output.rfind("test_acc="), one.output.rfind('\n', one.output.size() - 2) + 1) << one.output;
}

TEST(Cli, DifferentSeedsGiveDifferentWeights) {
  if (!have_fmnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const RunResult a = run_bastion("train --dataset fmnist --model mlp --epochs 1 --limit-train 256 --seed 1");
  const RunResult b = run_bastion("train --dataset fmnist --model mlp --epochs 1 --limit-train 256 --seed 2");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(line_value(a.output, "weights_fnv1a"), line_value(b.output, "weights_fnv1a"));
}

TEST(Cli, SavedWeightsReloadToTheSameAccuracy) {
  if (!have_fmnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string path = (std::filesystem::temp_directory_path() / "bastion_cli_lenet.safetensors").string();
  const RunResult run = run_bastion(std::string(kShortRun) + " --save " + path);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const SafetensorsFile file = load_safetensors(path);
  EXPECT_EQ(file.metadata.at("model"), "lenet");
  EXPECT_EQ(file.metadata.at("dataset"), "fmnist");
  EXPECT_EQ(file.metadata.at("num_classes"), "10");
  EXPECT_EQ(file.metadata.at("mean"), "[0.2860]");
  EXPECT_EQ(file.metadata.at("std"), "[0.3530]");
  ASSERT_NE(file.find("conv1.weight"), nullptr);
  EXPECT_EQ(file.find("conv1.weight")->shape(), (Shape{6, 1, 5, 5}));
  EXPECT_EQ(file.find("fc1.weight")->shape(), (Shape{120, 256}));

  auto model = make_model("lenet", {1, 28, 28}, 10, 999);  // different init, overwritten by the file
  std::map<std::string, Tensor> values;
  for (const auto& [name, tensor] : file.f32) values[name] = tensor;
  model->load_state(values);
  const DatasetSplit split = load_dataset("fmnist", "");
  char expected[16];
  std::snprintf(expected, sizeof expected, "%.4f", evaluate(*model, split.test).accuracy);
  EXPECT_EQ(line_value(run.output, "test_acc"), expected);
  std::filesystem::remove(path);
}

TEST(Cli, ErrorsAreOneClearLineAndExitCodeOne) {
  const RunResult unknown = run_bastion("train --dataset fmnist --model nope --data-dir /nonexistent");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.output.find("bastion: error:"), std::string::npos) << unknown.output;

  const RunResult no_data = run_bastion("train --dataset mnist --data-dir /nonexistent-bastion-dir");
  EXPECT_EQ(no_data.exit_code, 1);
  EXPECT_NE(no_data.output.find("/nonexistent-bastion-dir"), std::string::npos) << no_data.output;

  // The parser's own errors too: exit 1 and the prefix (they exited 104-109 without it, issue 42 item 10).
  const RunResult bad_option = run_bastion("train --epochs 100001");  // above the range
  EXPECT_EQ(bad_option.exit_code, 1);
  EXPECT_NE(bad_option.output.find("bastion: error:"), std::string::npos) << bad_option.output;
  EXPECT_NE(bad_option.output.find("epochs"), std::string::npos) << bad_option.output;
  const RunResult unknown_flag = run_bastion("run --bogus");
  EXPECT_EQ(unknown_flag.exit_code, 1);
  EXPECT_NE(unknown_flag.output.find("bastion: error:"), std::string::npos) << unknown_flag.output;
  EXPECT_EQ(run_bastion("run --help").exit_code, 0);
  EXPECT_EQ(run_bastion("--version").exit_code, 0);
  const RunResult no_config = run_bastion("run");
  EXPECT_EQ(no_config.exit_code, 1);
  EXPECT_NE(no_config.output.find("--resume --out DIR"), std::string::npos) << no_config.output;

  // --save is checked before training (issue 42 item 10): an empty path, or a folder that is not there.
  const RunResult empty_save = run_bastion("train --save '' --data-dir /nonexistent-bastion-dir");
  EXPECT_EQ(empty_save.exit_code, 1);
  EXPECT_NE(empty_save.output.find("--save: the path is empty"), std::string::npos) << empty_save.output;
  const RunResult missing_folder = run_bastion("train --save /nonexistent-bastion-dir/w.safetensors");
  EXPECT_EQ(missing_folder.exit_code, 1);
  EXPECT_NE(missing_folder.output.find("checked before training"), std::string::npos) << missing_folder.output;
  EXPECT_EQ(missing_folder.output.find("epoch 1"), std::string::npos) << missing_folder.output;

  const RunResult bad_dataset = run_bastion("train --dataset imagenet22k");
  EXPECT_EQ(bad_dataset.exit_code, 1);
  EXPECT_NE(bad_dataset.output.find("fmnist"), std::string::npos) << bad_dataset.output;
}

// --version names the commit the binary was built from: in this checkout (a git repository) a short
// hash, flagged when the build had uncommitted changes. reproduce records the same text.
TEST(Cli, VersionNamesTheBuildCommit) {
  const RunResult version = run_bastion("--version");
  ASSERT_EQ(version.exit_code, 0) << version.output;
  const std::string prefix = "bastion, built from ";
  ASSERT_EQ(version.output.rfind(prefix, 0), 0u) << version.output;
  std::string commit = version.output.substr(prefix.size());
  commit = commit.substr(0, commit.find_first_of(" \n"));
  // The build asked git too; where git cannot read the checkout (none, or not a repository git trusts),
  // the binary says "an unknown commit" and there is nothing to compare.
  const RunResult head = run_shell("git -C '" + std::string(BASTION_SOURCE_DIR) + "' rev-parse --short HEAD 2>&1");
  if (head.exit_code != 0) GTEST_SKIP() << "git cannot read the checkout: " << head.output;
  EXPECT_GE(commit.size(), 7u) << version.output;
  EXPECT_EQ(commit.find_first_not_of("0123456789abcdef"), std::string::npos) << version.output;
}

// run and reproduce take --data-dir like train and data: the loader looks there (the error lists it) and
// the folder stays out of the run's config.
// `bastion run --resume --out DIR` without a config file continues the run from DIR/config.toml (it failed
// with "config is required", issue 41 item 7); --set still applies (rounds may grow).
TEST(Cli, ResumeWithoutAConfigReadsTheFoldersConfig) {
  const std::string out = (std::filesystem::temp_directory_path() / "bastion-cli-resume-no-config").string();
  std::filesystem::remove_all(out);
  const std::string config = std::string(BASTION_SOURCE_DIR) + "/configs/ci/crash.toml";
  ASSERT_EQ(run_bastion("run " + config + " --set rounds=2 --quiet --threads 1 --out " + out).exit_code, 0);
  const RunResult resumed = run_bastion("run --resume --out " + out + " --set rounds=4 --quiet --threads 1");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("4 rounds"), std::string::npos) << resumed.output;
  std::filesystem::remove_all(out);
}

TEST(Cli, RunAndReproduceTakeADataDir) {
  const std::string out = (std::filesystem::temp_directory_path() / "bastion-cli-data-dir").string();
  const std::string demo = std::string(BASTION_SOURCE_DIR) + "/configs/demo.toml";
  const RunResult run = run_bastion("run " + demo +
                                    " --set data.dataset=mnist --set rounds=1 --overwrite --quiet "
                                    "--out " +
                                    out + " --data-dir /nonexistent-bastion-run-dir");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.output.find("/nonexistent-bastion-run-dir"), std::string::npos) << run.output;
  const RunResult reproduce = run_bastion("reproduce " + std::string(BASTION_SOURCE_DIR) +
                                          "/configs/papers/pfedsam-table1.toml --quick --overwrite --out " + out +
                                          " --data-dir /nonexistent-bastion-reproduce-dir");
  EXPECT_NE(reproduce.exit_code, 0);
  EXPECT_NE(reproduce.output.find("/nonexistent-bastion-reproduce-dir"), std::string::npos) << reproduce.output;
  std::filesystem::remove_all(out);
}

TEST(Cli, ErrorsShowSourceLocationsOnlyWhenAsked) {
  const RunResult plain = run_bastion("reproduce no-such-preset");
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_NE(plain.output.find("bastion: error: no preset 'no-such-preset'"), std::string::npos) << plain.output;
  EXPECT_EQ(plain.output.find(".cpp:"), std::string::npos) << plain.output;
  EXPECT_EQ(std::count(plain.output.begin(), plain.output.end(), '\n'), 1) << plain.output;
  const RunResult verbose = run_bastion("--verbose reproduce no-such-preset");
  EXPECT_NE(verbose.output.find("reproduce.cpp:"), std::string::npos) << verbose.output;
  const RunResult debug = run_bastion("reproduce no-such-preset 2>&1; BASTION_DEBUG=1 " + std::string(BASTION_BINARY) +
                                      " reproduce no-such-preset");
  EXPECT_NE(debug.output.find("reproduce.cpp:"), std::string::npos) << debug.output;
}

TEST(Cli, SourceLocationsAreStrippedButOtherBracketsStay) {
  EXPECT_EQ(without_source_locations(
                "[attack.badnets] is given [/work/fl/core/config.cpp:270] [fl/reproduce/preset.cpp:132]"),
            "[attack.badnets] is given");
  EXPECT_EQ(without_source_locations("x [a.cu:3] y [b.h:12]"), "x y");
  EXPECT_EQ(without_source_locations("keep [x:1] and [file.cpp:] and [c.cpp:1a]"),
            "keep [x:1] and [file.cpp:] and [c.cpp:1a]");
  EXPECT_EQ(without_source_locations("--index 9 is outside [0, 9) [cli/data.cpp:99]"), "--index 9 is outside [0, 9)");
  EXPECT_EQ(without_source_locations(""), "");
}
