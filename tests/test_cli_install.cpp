// An installed binary (<prefix>/bin/bastion with <prefix>/share/bastion/configs, as the Debian package of
// scripts/package.sh lays it out) finds the presets without a checkout: `bastion list presets` and
// `bastion reproduce NAME` from a folder with no configs/ (cli/presets_folder.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "reproduce_test_support.h"
#include "test_support.h"

namespace bastion {
namespace {

namespace fs = std::filesystem;
using CliInstall = testing::TempDirTest;

TEST_F(CliInstall, AnInstalledBinaryFindsThePresetsBesideIt) {
  const fs::path prefix = dir_ / "usr", papers = prefix / "share" / "bastion" / "configs" / "papers";
  fs::create_directories(prefix / "bin");
  fs::copy_file(BASTION_BINARY, prefix / "bin" / "bastion");
  fs::permissions(prefix / "bin" / "bastion", fs::perms::owner_exec, fs::perm_options::add);
  testing::write_text(papers / "base.toml", testing::kReproduceBase);
  testing::write_text(papers / "tiny-table.toml", R"(title = "Tiny"
base = "base.toml"
seeds = 1
[[columns]]
name = "acc"
metric = "acc"
[[rows]]
name = "FedAvg"
set = ["rounds=1"]
paper = ["-"]
)");
  fs::create_directories(dir_ / "elsewhere");
  const std::string in_elsewhere =
      "cd " + (dir_ / "elsewhere").string() + " && " + (prefix / "bin" / "bastion").string();
  const testing::RunResult list = testing::run_shell(in_elsewhere + " list presets 2>&1");
  EXPECT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find("tiny-table"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("share/bastion/configs/papers"), std::string::npos) << list.output;
  const testing::RunResult run = testing::run_shell(in_elsewhere + " reproduce tiny-table --out out 2>&1");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(fs::exists(dir_ / "elsewhere" / "out" / "table.md"));
}

}  // namespace
}  // namespace bastion
