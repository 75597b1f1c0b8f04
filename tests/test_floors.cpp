// scripts/check_floors.sh: fl/ includes only from its own floor or below (fl/README.md "Floors"), on the
// repository itself and on constructed trees with an upward include and a file in no floor.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_support.h"

namespace bastion {
namespace {

namespace fs = std::filesystem;
using Floors = testing::TempDirTest;

const std::string kScript = std::string(BASTION_SOURCE_DIR) + "/scripts/check_floors.sh";

void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

TEST_F(Floors, FlIncludesOnlyDownward) {
  const testing::RunResult result = testing::run_shell(kScript + " " + BASTION_SOURCE_DIR + " 2>&1");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("none upward"), std::string::npos) << result.output;
}

TEST_F(Floors, AnIncludeUpwardFailsAndNamesBothFiles) {
  write_file(dir_ / "fl/core/loop.h", "#pragma once\n");
  write_file(dir_ / "fl/clients/rule.h", "#include \"fl/base/params.h\"\n#include \"fl/core/loop.h\"\n");
  write_file(dir_ / "fl/base/params.h", "#pragma once\n");
  const testing::RunResult result = testing::run_shell(kScript + " " + dir_.string() + " 2>&1");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("fl/clients/rule.h (floor 1) includes fl/core/loop.h (floor 3)"), std::string::npos)
      << result.output;
  EXPECT_EQ(result.output.find("fl/base/params.h (floor"), std::string::npos) << result.output;  // downward: fine
}

TEST_F(Floors, AFileInNoFloorFails) {
  write_file(dir_ / "fl/newfolder/unit.h", "#pragma once\n");
  const testing::RunResult result = testing::run_shell(kScript + " " + dir_.string() + " 2>&1");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("fl/newfolder/unit.h is in no floor"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace bastion
