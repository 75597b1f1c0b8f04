// Preset parsing from text (parse_preset, no files): the seeds' range, the toml guard, and the [cost]
// table with bastion list presets' text for it. The presets that load a base and run are in
// test_fl_reproduce.cpp.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "fl/reproduce/preset.h"
#include "reproduce_test_support.h"
#include "test_support.h"

namespace bastion {
namespace {

using testing::expect_error;
using testing::kTwoRows;
using testing::preset_text;

// Found while writing fuzz_preset: seeds = 1e300 was cast to int64 before the range check (undefined
// behaviour); a fraction was truncated silently. The guard of fl/core/toml_guard.h covers presets too.
TEST(PresetParse, SeedsMustBeAnIntegerInRangeAndTextMustBeSafeForTomlpp) {
  const auto no_check = [](const std::string&, const std::vector<std::string>&) {};
  for (const char* seeds : {"1e300", "-1e300", "nan", "2.5", "0", "101"}) {
    std::string text = preset_text(kTwoRows);
    text.replace(text.find("seeds = 2"), 9, std::string("seeds = ") + seeds);
    expect_error([&] { parse_preset(text, "t.toml", no_check); }, {"t.toml", "seeds must be an integer in [1, 100]"});
  }
  expect_error([&] { parse_preset("title = \"x\"\xc2\xa7\n", "t.toml", no_check); }, {"t.toml:1", "non-ASCII"});
}

// [cost]: a measured or estimated cost in core-hours with its CPU; bastion list presets prints it, scaled to
// the preset's seeds when it was measured with fewer. The old estimated_minutes key is refused by name.
TEST(PresetParse, CostNamesCoreHoursSeedsAndCpu) {
  const auto no_check = [](const std::string&, const std::vector<std::string>&) {};
  const std::string cost = "[cost]\ncore_hours = 4.5\nseeds = 1\ncpu = \"Some CPU, 2 cores\"\ndate = \"2026-11-28\"\n";
  const Preset preset = parse_preset(preset_text(cost + kTwoRows), "t.toml", no_check);
  EXPECT_DOUBLE_EQ(preset.cost.core_hours, 4.5);
  EXPECT_EQ(preset.cost.seeds, 1);
  EXPECT_EQ(preset.cost.basis, "measured");  // the default
  EXPECT_EQ(preset_cost_text(preset.cost, preset.seeds),
            "4.5 core-hours for 1 seed (about 9.0 for 2), measured on Some CPU, 2 cores, 2026-11-28");
  EXPECT_EQ(preset_cost_text(preset.cost, 1), "4.5 core-hours for 1 seed, measured on Some CPU, 2 cores, 2026-11-28");
  EXPECT_EQ(preset_cost_text(PresetCost{}, 2), "cost not measured");
  const Preset default_seeds =
      parse_preset(preset_text("[cost]\ncore_hours = 12\ncpu = \"c\"\nbasis = \"estimated\"\n" + std::string(kTwoRows)),
                   "t.toml", no_check);
  EXPECT_EQ(default_seeds.cost.seeds, 2);  // the preset's seeds
  EXPECT_EQ(preset_cost_text(default_seeds.cost, 2), "12 core-hours for 2 seeds, estimated on c");

  const std::pair<std::string, std::string> bad[] = {
      {"[cost]\ncore_hours = 1\n", "[cost] needs 'cpu'"},
      {"[cost]\ncore_hours = 0\ncpu = \"c\"\n", "core_hours must be in (0, 1e6)"},
      {"[cost]\ncore_hours = nan\ncpu = \"c\"\n", "core_hours must be in (0, 1e6)"},
      {"[cost]\ncore_hours = 1\ncpu = \"c\"\nseeds = 0\n", "[cost] seeds must be an integer in [1, 100]"},
      {"[cost]\ncore_hours = 1\ncpu = \"c\"\nbasis = \"guess\"\n", "basis 'guess': valid: measured, estimated"},
      {"[cost]\ncore_hours = 1\ncpu = \"c\"\nminutes = 3\n", "unknown key 'minutes' in [cost]"},
      {"estimated_minutes = 25\n", "estimated_minutes was replaced by a [cost] table"},
  };
  for (const auto& [text, message] : bad) {
    // estimated_minutes is a top-level key: before any table
    const std::string full =
        text.rfind("estimated", 0) == 0 ? text + preset_text(kTwoRows) : preset_text(text + kTwoRows);
    expect_error([&] { parse_preset(full, "t.toml", no_check); }, {"t.toml", message});
  }
}

}  // namespace
}  // namespace bastion
