// Every TOML file under configs/ loads and validates with today's rules: a change of meaning (a renamed
// option, a report mode that is now refused) must be mended in the configs in the same commit, not found
// by a user. Presets (files with [[rows]]) are checked cell by cell through load_preset.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "fl/core/config.h"
#include "fl/core/preset.h"

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

}  // namespace
}  // namespace bastion
