// `bastion plot`: one metric of several runs in one SVG (fl/metrics/svg.cpp overlay_svg), from run folders
// (rounds.csv or seed-*/rounds.csv) and reproduce folders (runs/*); unknown metrics and folders without
// results fail in one line. And `bastion run`'s closing lines name result files that exist.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data/idx.h"
#include "fl/metrics/results.h"
#include "tests/test_support.h"

namespace bastion {
namespace {

using testing::expect_error;
namespace fs = std::filesystem;

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

std::vector<RoundRecord> curve(double start, int64_t rounds = 5) {
  std::vector<RoundRecord> records;
  for (int64_t r = 1; r <= rounds; ++r) {
    RoundRecord record;
    record.round = r;
    record.acc = start + 0.05 * static_cast<double>(r);
    records.push_back(record);
  }
  return records;
}

TEST(PlotSvg, OneColourPerRunAndTheMeanOfASeveralSeedRun) {
  const std::string svg =
      overlay_svg("fedavg vs <median>", "acc", {{"fedavg", {curve(0.1)}}, {"median", {curve(0.2), curve(0.3)}}});
  EXPECT_EQ(count_of(svg, "<polyline"), 4u);  // fedavg; median's two seeds (thin) and their mean
  EXPECT_NE(svg.find("#1f77b4"), std::string::npos);
  EXPECT_NE(svg.find("#ff7f0e"), std::string::npos);
  EXPECT_NE(svg.find("median (mean of 2 seeds)"), std::string::npos);
  EXPECT_NE(svg.find("fedavg vs &lt;median&gt;"), std::string::npos);
  EXPECT_EQ(count_of(svg, "<"), count_of(svg, ">"));
  expect_error([] { overlay_svg("t", "accuracy", {{"a", {curve(0.1)}}}); }, {"no metric 'accuracy'", "p_acc_w"});
}

TEST(PlotSvg, AMetricARunNeverMeasuredDrawsNothingForIt) {
  const std::string svg = overlay_svg("t", "asr", {{"clean", {curve(0.1)}}});  // asr is NaN throughout
  EXPECT_EQ(count_of(svg, "<polyline"), 0u);
  EXPECT_EQ(count_of(svg, "<circle"), 0u);
}

// The y of the legend's white box (the only rect with fill-opacity 0.85).
double legend_y(const std::string& svg) {
  const size_t box = svg.find("fill-opacity=\"0.85\"");
  const size_t y = svg.rfind(" y=\"", box);
  return std::stod(svg.substr(y + 4));
}

// The legend hid curves that end near 100 % (issue 40's screenshots): it goes to the plot's bottom right
// when fewer points lie there, and stays at the top for curves that stay low.
TEST(PlotSvg, TheLegendSitsWhereTheCurvesAreNot) {
  const std::string high = overlay_svg("t", "acc", {{"a", {curve(0.75)}}, {"b", {curve(0.72)}}});  // ends at 1.0
  const std::string low = overlay_svg("t", "acc", {{"a", {curve(0.0)}}, {"b", {curve(0.02)}}});    // ends at 0.27
  EXPECT_GT(legend_y(high), 300.0) << "bottom";
  EXPECT_LT(legend_y(low), 70.0) << "top";
}

using CliPlot = testing::TempDirTest;

TEST_F(CliPlot, DrawsRunAndReproduceFoldersAndNamesWhatIsMissing) {
  testing::write_text(dir_ / "fedavg" / "rounds.csv", rounds_csv(curve(0.5)));
  testing::write_text(dir_ / "krum" / "seed-1" / "rounds.csv", rounds_csv(curve(0.4)));
  testing::write_text(dir_ / "krum" / "seed-2" / "rounds.csv", rounds_csv(curve(0.45)));
  testing::write_text(dir_ / "table" / "runs" / "median" / "rounds.csv", rounds_csv(curve(0.3)));
  const std::string out = (dir_ / "p.svg").string();
  const testing::RunResult ok =
      testing::run_bastion("plot " + (dir_ / "fedavg").string() + " " + (dir_ / "krum").string() + " " +
                           (dir_ / "table").string() + " --out " + out + " --title mine");
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("3 run(s)"), std::string::npos) << ok.output;
  const std::string svg = read_text_file(out);
  EXPECT_NE(svg.find(">fedavg</text>"), std::string::npos);
  EXPECT_NE(svg.find(">krum (mean of 2 seeds)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">median</text>"), std::string::npos);

  const testing::RunResult empty = testing::run_bastion("plot " + dir_.string() + " --out " + out);
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_NE(empty.output.find("bastion: error: plot: no rounds.csv in"), std::string::npos) << empty.output;
  const testing::RunResult metric =
      testing::run_bastion("plot " + (dir_ / "fedavg").string() + " --metric bogus --out " + out);
  EXPECT_EQ(metric.exit_code, 1);
  EXPECT_NE(metric.output.find("no metric 'bogus'"), std::string::npos) << metric.output;
}

// With several seeds rounds.csv lives in seed-<s>/: the closing line said OUT/rounds.csv, a file that does
// not exist (issue 41 item 7).
TEST_F(CliPlot, RunNamesTheSeedFoldersWhenThereAreSeveral) {
  testing::write_text(dir_ / "two.toml", R"(name = "two"
seed = 1
repeat = 2
rounds = 1
[data]
dataset = "synthetic"
clients = 4
[model]
name = "mlp"
[clients]
per_round = 2
)");
  const fs::path out = dir_ / "out";
  const testing::RunResult run =
      testing::run_bastion("run " + (dir_ / "two.toml").string() + " --quiet --out " + out.string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find(out.string() + "/seed-*/rounds.csv (one per seed)"), std::string::npos) << run.output;
  EXPECT_TRUE(fs::exists(out / "seed-1" / "rounds.csv"));
  EXPECT_FALSE(fs::exists(out / "rounds.csv"));
}

}  // namespace
}  // namespace bastion
