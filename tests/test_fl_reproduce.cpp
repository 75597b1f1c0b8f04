// bastion reproduce: presets as data (validation with line numbers), the grid runner (--resume skips
// finished runs), and the table writers. Runs on the synthetic set in a temporary folder.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "data/idx.h"
#include "fl/metrics/results.h"
#include "fl/reproduce/preset.h"
#include "fl/reproduce/reproduce.h"
#include "reproduce_test_support.h"
#include "test_support.h"

namespace bastion {
namespace {

using testing::expect_error;
using testing::kTwoRows;
using testing::preset_text;

constexpr const char* kBase = bastion::testing::kReproduceBase;

// A third row, for a preset that grows after its first rows ran.
constexpr const char* kDittoRow = R"(
[[rows]]
name = "Ditto"
set = ["clients.rule=ditto", "clients.ditto.batch=16"]
paper = [1, 2]
)";

class Reproduce : public testing::TempDirTest {
 protected:
  std::string write_preset(const std::string& rows) {
    testing::write_text(dir_ / "base.toml", kBase);
    testing::write_text(dir_ / "table.toml", preset_text(rows));
    return (dir_ / "table.toml").string();
  }
  // One seed into out/, with these overrides on every run.
  ReproduceOptions one_seed_with(std::vector<std::string> overrides) {
    ReproduceOptions options;
    options.out_dir = (dir_ / "out").string();
    options.seeds = 1;
    options.overrides = std::move(overrides);
    return options;
  }
  ReproduceReport run(const Preset& preset, bool resume) {
    ReproduceOptions options;
    options.out_dir = (dir_ / "out").string();
    options.resume = resume;
    options.command = "bastion reproduce table.toml";
    return reproduce(preset, options);
  }
};

TEST_F(Reproduce, PresetReadsColumnsRowsAndPaperNumbers) {
  const Preset preset = load_preset(write_preset(kTwoRows));
  EXPECT_EQ(preset.name, "table");
  ASSERT_EQ(preset.columns.size(), 2u);
  EXPECT_EQ(preset.columns[0].metric, "p_acc");
  EXPECT_DOUBLE_EQ(preset.columns[0].scale, 100.0);
  ASSERT_EQ(preset.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(preset.rows[0].paper[0], 50.0);
  EXPECT_TRUE(std::isnan(preset.rows[0].paper[1]));  // "-": the paper has no number
  EXPECT_DOUBLE_EQ(preset.rows[1].paper[0], 60.0);   // integers are numbers too
  // Both columns of a row come from one run.
  const PresetGrid grid = preset_grid(preset);
  EXPECT_EQ(grid.runs.size(), 2u);
  EXPECT_EQ(grid.cell_run[1][0], grid.cell_run[1][1]);
  EXPECT_EQ(grid.runs[1].folder, "fedrep");
}

// parse_preset is load_preset on text: `path` names it and is the folder the base resolves against, and
// the cell check sees each cell's overrides (load_preset's check reads the base with load_config).
TEST_F(Reproduce, ParsePresetChecksEveryCellThroughTheGivenCheck) {
  std::vector<std::vector<std::string>> checked;
  std::string base_seen;
  const Preset preset = parse_preset(preset_text(kTwoRows), "papers/table.toml",
                                     [&](const std::string& base, const std::vector<std::string>& overrides) {
                                       base_seen = base;
                                       checked.push_back(overrides);
                                     });
  EXPECT_EQ(preset.name, "table");
  EXPECT_EQ(base_seen, "papers/base.toml");
  ASSERT_EQ(checked.size(), 8u);  // 2 rows x 2 columns, each as set and with the quick overrides
  EXPECT_EQ(checked[4].front(), "clients.rule=fedrep");
  for (size_t i = 0; i < checked.size(); i += 2)  // the quick check adds the preset's quick overrides last
    EXPECT_EQ(std::vector<std::string>(checked[i + 1].begin(), checked[i + 1].begin() + checked[i].size()), checked[i]);
  EXPECT_EQ(preset.rows.size(), load_preset(write_preset(kTwoRows)).rows.size());
}

// A truncated summary.json of a finished cell stopped `reproduce --resume` with "unexpected error", naming
// no file (issue 42 item 9): the error names the file and says what to do.
TEST_F(Reproduce, ATruncatedSummaryIsNamed) {
  const Preset preset = load_preset(write_preset(kTwoRows));
  ReproduceOptions options = one_seed_with({"rounds=1"});
  ASSERT_EQ(reproduce(preset, options).runs, 2);
  const std::filesystem::path summary = dir_ / "out" / "runs" / "fedavg" / "summary.json";
  const std::string text = read_text_file(summary.string());
  testing::write_text(summary, text.substr(0, text.size() / 2));
  options.resume = true;
  std::string logged;
  options.log = [&](const std::string& line) { logged += line + "\n"; };
  EXPECT_EQ(reproduce(preset, options).failed, 1);  // that cell fails; the other is read as before
  EXPECT_NE(logged.find("fedavg/summary.json: not valid JSON"), std::string::npos) << logged;
  EXPECT_NE(logged.find("--overwrite"), std::string::npos) << logged;
  // A failed run's line is for users: no " [fl/reproduce/reproduce.cpp:46]" (issue 40), unless asked for.
  EXPECT_EQ(logged.find(".cpp:"), std::string::npos) << logged;
}

// Issue 42 item 9: rows whose names make one folder ('Run A', 'run-a') are refused at load; so is a quick
// override that no cell can load (it used to fail only when --quick ran).
TEST_F(Reproduce, RowFoldersMustDifferAndQuickOverridesMustLoad) {
  const auto no_check = [](const std::string&, const std::vector<std::string>&) {};
  std::string text = preset_text(kTwoRows) + "\n[[rows]]\nname = \"FEDAVG\"\nset = []\npaper = [1, 2]\n";
  expect_error([&] { parse_preset(text, "papers/table.toml", no_check); },
               {"both get the results folder", "rename one"});
  const std::string path = write_preset(kTwoRows);
  std::string bad_quick = preset_text(kTwoRows);
  bad_quick.replace(bad_quick.find("rounds=1"), 8, "rounds=0");
  testing::write_text(path, bad_quick);
  expect_error([&] { load_preset(path); }, {"rounds"});
}

TEST_F(Reproduce, AnUnknownMethodFailsNamingTheRowsLine) {
  const std::string rows = std::string(kTwoRows) + R"(
[[rows]]
name = "Mystery"
set = ["clients.rule=fedmystery"]
paper = [1, 2]
)";
  // The third [[rows]] header is on line 23 of the preset.
  expect_error([&] { load_preset(write_preset(rows)); }, {"table.toml:23", "row 'Mystery'", "fedmystery"});
}

TEST_F(Reproduce, AMalformedPaperTableFailsNamingTheLine) {
  expect_error([&] { load_preset(write_preset("[[rows]]\nname = \"A\"\nset = []\npaper = [1]\n")); },
               {"table.toml:16", "paper has 1 numbers for 2 columns"});
  expect_error([&] { load_preset(write_preset("[[rows]]\nname = \"A\"\nset = []\npaper = [1, \"n/a\"]\n")); },
               {"table.toml:16", "numbers or \"-\""});
  expect_error([&] { load_preset(write_preset("[[rows]]\nname = \"A\"\nset = []\n")); },
               {"table.toml:13", "needs 'paper'"});
  expect_error([&] { load_preset(write_preset("[[rows]]\nname = \"A\"\nset = [\"rounds\"]\npaper = [1, 2]\n")); },
               {"table.toml:15", "not key=value"});
  expect_error([&] { load_preset(write_preset("[[rows]]\nname = \"A\"\npaper = [1, 2]\nwhat = 1\n")); },
               {"table.toml:16", "unknown key 'what'"});
  testing::write_text(
      dir_ / "broken.toml",
      "title = \"x\"\nbase = \"base.toml\"\nseeds = 3\n[[columns]]\nname = \"A\"\nmetric = \"accuracy\"\n");
  expect_error([&] { load_preset((dir_ / "broken.toml").string()); }, {"broken.toml:4", "unknown metric 'accuracy'"});
}

TEST_F(Reproduce, ResumeSkipsFinishedRunsAndRunsOnlyTheNewOnes) {
  const Preset preset = load_preset(write_preset(kTwoRows));
  const ReproduceReport first = run(preset, false);
  EXPECT_EQ(first.runs, 2);
  EXPECT_EQ(first.failed, 0);
  ASSERT_EQ(first.cells.size(), 2u);
  EXPECT_EQ(first.cells[0][0].seeds, 2);
  EXPECT_GT(first.cells[1][0].mean, 0.0);
  const std::string table = read_text_file((dir_ / "out" / "table.md").string());
  EXPECT_NE(table.find("| FedRep |"), std::string::npos) << table;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "out" / "table.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "out" / "table.svg"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "out" / "runs" / "fedavg" / "seed-4" / "rounds.csv"));

  const ReproduceReport again = run(preset, true);
  EXPECT_EQ(again.runs, 0);
  EXPECT_EQ(again.skipped, 2);
  EXPECT_DOUBLE_EQ(again.cells[1][0].mean, first.cells[1][0].mean);  // read back from summary.json

  const Preset grown = load_preset(write_preset(std::string(kTwoRows) + kDittoRow));
  const ReproduceReport third = run(grown, true);
  EXPECT_EQ(third.runs, 1);
  EXPECT_EQ(third.skipped, 2);
  // Without --resume the finished results are not overwritten silently.
  const ReproduceReport refused = run(grown, false);
  EXPECT_EQ(refused.failed, 3);
  EXPECT_TRUE(refused.cells[0][0].failed);
}

// --row: a user with little time runs the rows that matter first; the whole preset resumes from them.
TEST_F(Reproduce, SelectedRowsKeepTheirFoldersAndTheWholePresetResumesFromThem) {
  const Preset preset = load_preset(write_preset(kTwoRows));
  const Preset fedrep = select_rows(preset, {"fedrep"});  // by folder slug
  ASSERT_EQ(fedrep.rows.size(), 1u);
  EXPECT_EQ(fedrep.rows[0].name, "FedRep");
  EXPECT_EQ(preset_grid(fedrep).runs[0].folder, "fedrep");
  EXPECT_EQ(select_rows(preset, {"FedRep", "FedAvg"}).rows[0].name, "FedAvg");  // the preset's order
  expect_error([&] { select_rows(preset, {"Krum"}); }, {"no row 'Krum'", "'FedAvg' (fedavg)", "'FedRep' (fedrep)"});
  EXPECT_EQ(run(fedrep, false).runs, 1);
  const ReproduceReport whole = run(preset, true);
  EXPECT_EQ(whole.runs, 1);     // FedAvg
  EXPECT_EQ(whole.skipped, 1);  // FedRep, from the --row run
}

TEST_F(Reproduce, OverridesReachEveryRunAndTheTableSaysItIsReduced) {
  const Preset preset = load_preset(write_preset(kTwoRows));
  ReproduceOptions options = one_seed_with({"rounds=1", "data.clients=6"});
  const ReproduceReport report = reproduce(preset, options);
  EXPECT_EQ(report.runs, 2);
  EXPECT_EQ(report.failed, 0);
  const std::string config = read_text_file((dir_ / "out" / "runs" / "fedrep" / "config.toml").string());
  EXPECT_NE(config.find("rounds = 1\n"), std::string::npos) << config;
  EXPECT_NE(config.find("clients = 6\n"), std::string::npos) << config;
  const std::string table = read_text_file((dir_ / "out" / "table.md").string());
  EXPECT_NE(table.find("**reduced** (`rounds=1` `data.clients=6`)"), std::string::npos) << table;
  // A key no config has fails once, before any run starts.
  options.overrides = {"roundz=1"};
  options.overwrite = true;
  EXPECT_THROW(reproduce(preset, options), Error);
}

// [run] keys change how the rounds are computed, not what they compute: the table stays "full" (or
// reduced by the other keys only) and lists them apart.
TEST_F(Reproduce, RunSettingsDoNotMarkTheTableReduced) {
  const Preset preset = load_preset(write_preset(kTwoRows));
  ReproduceOptions options = one_seed_with({"run.threads=2", "run.checkpoint_every=1"});
  ASSERT_EQ(reproduce(preset, options).failed, 0);
  std::string table = read_text_file((dir_ / "out" / "table.md").string());
  EXPECT_NE(table.find("at full (run settings, results unchanged: `run.threads=2` `run.checkpoint_every=1`) scale"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("reduced"), std::string::npos) << table;

  options.overrides = {"run.threads=2", "rounds=1"};
  options.overwrite = true;
  ASSERT_EQ(reproduce(preset, options).failed, 0);
  table = read_text_file((dir_ / "out" / "table.md").string());
  EXPECT_NE(table.find("**reduced** (`rounds=1`) (run settings, results unchanged: `run.threads=2`)"),
            std::string::npos)
      << table;
}

// An override that is not a scale key (here a data setting) is a variant of the paper's setting, and the
// table says so apart from the scale: `data.min_size=5` is not a smaller experiment.
TEST_F(Reproduce, OtherSettingsAreNamedAsChangedNotReduced) {
  const Preset preset = load_preset(write_preset(kTwoRows));
  ReproduceOptions options = one_seed_with({"data.min_size=5"});
  ASSERT_EQ(reproduce(preset, options).failed, 0);
  std::string table = read_text_file((dir_ / "out" / "table.md").string());
  EXPECT_NE(table.find("at full scale with **changed settings** (`data.min_size=5`), not the paper's;"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("reduced"), std::string::npos) << table;

  options.overrides = {"rounds=1", "data.min_size=5", "data.max_per_client=40"};
  options.overwrite = true;
  ASSERT_EQ(reproduce(preset, options).failed, 0);
  table = read_text_file((dir_ / "out" / "table.md").string());
  EXPECT_NE(table.find("at **reduced** (`rounds=1` `data.max_per_client=40`) scale with **changed settings** "
                       "(`data.min_size=5`)"),
            std::string::npos)
      << table;
}

// A finished run made with other [run] settings has the results a rerun would give: --resume keeps it.
// Any other difference (here `rounds`) is another experiment and runs again.
TEST_F(Reproduce, ResumeKeepsARunFinishedWithOtherRunSettingsOnly) {
  const Preset preset = load_preset(write_preset(kTwoRows));
  ReproduceOptions options = one_seed_with({"rounds=1"});
  ASSERT_EQ(reproduce(preset, options).runs, 2);

  options.resume = true;
  options.overrides = {"rounds=1", "run.threads=2", "run.checkpoint_every=1"};
  const ReproduceReport kept = reproduce(preset, options);
  EXPECT_EQ(kept.runs, 0);
  EXPECT_EQ(kept.skipped, 2);

  options.overrides = {"rounds=2", "run.threads=2"};
  const ReproduceReport extended = reproduce(preset, options);
  EXPECT_EQ(extended.runs, 2);
  EXPECT_EQ(extended.skipped, 0);
}

// A table assembled from runs made at other commits (finished earlier, or resumed) says which code made
// which runs; a refused run adds no line, and --overwrite starts a run's record anew.
TEST_F(Reproduce, TableNamesTheCommitsThatMadeRunsFinishedEarlier) {
  const Preset preset = load_preset(write_preset(kTwoRows));
  ReproduceOptions options = one_seed_with({"rounds=1"});
  options.commit = "aaaaaaa";
  ASSERT_EQ(reproduce(preset, options).runs, 2);
  const std::filesystem::path record = dir_ / "out" / "runs" / "fedavg" / "provenance.tsv";
  EXPECT_NE(read_text_file(record.string()).find("\taaaaaaa\t"), std::string::npos);
  std::string table = read_text_file((dir_ / "out" / "table.md").string());
  EXPECT_NE(table.find("Commit: aaaaaaa (this invocation; every cell's runs were made at this commit)"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("Runs made by"), std::string::npos) << table;  // all by this invocation

  options.commit = "bbbbbbb";
  EXPECT_EQ(reproduce(preset, options).failed, 2);  // refused: results exist, no --resume
  EXPECT_EQ(read_text_file(record.string()).find("bbbbbbb"), std::string::npos);

  const Preset grown = load_preset(write_preset(std::string(kTwoRows) + kDittoRow));
  options.resume = true;
  ASSERT_EQ(reproduce(grown, options).runs, 1);
  table = read_text_file((dir_ / "out" / "table.md").string());
  EXPECT_NE(table.find("Runs made by: `aaaaaaa`: fedavg, fedrep; `bbbbbbb`: ditto"), std::string::npos) << table;
  EXPECT_NE(table.find("Commit: bbbbbbb (this invocation)  \n"), std::string::npos) << table;  // not "every cell"

  options.resume = false;
  options.overwrite = true;
  ASSERT_EQ(reproduce(grown, options).runs, 3);
  EXPECT_EQ(read_text_file(record.string()).find("aaaaaaa"), std::string::npos);
  table = read_text_file((dir_ / "out" / "table.md").string());
  EXPECT_EQ(table.find("Runs made by"), std::string::npos) << table;
}

// table.md's Cost line: each round's CPU time (timing.csv's cpu_s) over every run. Rounds recorded without
// cpu_s (runs made before it) are charged their round time x the threads the run's provenance records, and a
// run recorded before thread counts (three fields) 1 thread, which the line says.
TEST_F(Reproduce, TableCostIsCpuTimeElseRoundTimeTimesThreads) {
  const Preset preset = load_preset(write_preset(kTwoRows));
  ReproduceOptions options = one_seed_with({"rounds=2"});
  options.threads = 2;
  ASSERT_EQ(reproduce(preset, options).runs, 2);
  double fedavg_cpu = 0.0, fedrep_cpu = 0.0;
  for (const char* run : {"fedavg", "fedrep"}) {
    const std::string folder = (dir_ / "out" / "runs" / run).string();
    EXPECT_TRUE(read_text_file(folder + "/provenance.tsv").ends_with("\t2\n")) << run;
    for (const RoundTiming& t : parse_timing_csv(read_text_file(folder + "/timing.csv"))) {
      ASSERT_TRUE(std::isfinite(t.cpu_seconds) && t.cpu_seconds > 0.0) << run << " round " << t.round;
      (std::string(run) == "fedavg" ? fedavg_cpu : fedrep_cpu) += t.cpu_seconds;
    }
  }
  auto cost_line = [&] {
    const std::string table = read_text_file((dir_ / "out" / "table.md").string());
    const size_t at = table.find("Cost: ");
    return at == std::string::npos ? std::string() : table.substr(at, table.find('\n', at) - at);
  };
  const std::string cpu = fixed_text((fedavg_cpu + fedrep_cpu) / 3600.0, 2);
  EXPECT_EQ(cost_line().rfind("Cost: " + cpu + " core-hours (the CPU time of every run's rounds", 0), 0u)
      << cost_line();
  EXPECT_EQ(cost_line().find("no thread count"), std::string::npos);

  // fedrep's timing.csv as written before cpu_s, two rounds of half an hour: 1 hour x its 2 threads.
  const std::string timing = (dir_ / "out" / "runs" / "fedrep" / "timing.csv").string();
  testing::write_text(timing, "round,train_s,aggregate_s,eval_s,round_s\n1,1800,0,0,1800\n2,1800,0,0,1800\n");
  options.resume = true;
  ASSERT_EQ(reproduce(preset, options).skipped, 2);
  EXPECT_EQ(cost_line().rfind("Cost: " + fixed_text(fedavg_cpu / 3600.0 + 2.0, 2) +
                                  " core-hours (the CPU time of 2 "
                                  "of the 4 rounds",
                              0),
            0u)
      << cost_line();

  // fedrep's record as written before the thread column: charged 1 thread, and said.
  const std::string record = (dir_ / "out" / "runs" / "fedrep" / "provenance.tsv").string();
  testing::write_text(record, "2026-11-20\tccccccc\tsome machine\n");
  ASSERT_EQ(reproduce(preset, options).skipped, 2);
  EXPECT_EQ(cost_line().rfind("Cost: " + fixed_text(fedavg_cpu / 3600.0 + 1.0, 2) + " core-hours (", 0), 0u)
      << cost_line();
  EXPECT_NE(cost_line().find("1 run(s) with no thread count recorded, counted as 1 thread"), std::string::npos)
      << cost_line();
}

TEST_F(Reproduce, TableMarksCellsBeyondTheColumnsTolerance) {
  const Preset preset = load_preset(write_preset(kTwoRows));
  ReproduceReport report;
  report.cells = {{{52.0, 1.0, 2, false}, {40.0, 0.5, 2, false}}, {{70.0, 2.0, 2, false}, {0, 0, 0, true}}};
  const std::string md = table_markdown(preset, report, {});
  EXPECT_NE(md.find("| FedAvg | 52.00 ± 1.00 | 50.00 | +2.00 | 40.00 ± 0.50 | – | – |"), std::string::npos) << md;
  EXPECT_NE(md.find("| FedRep | 70.00 ± 2.00 | 60.00 | +10.00 † | error | 10.50 | – |"), std::string::npos) << md;
  const std::string csv = table_csv(preset, report);
  EXPECT_NE(csv.find("\"FedRep\",\"ACC\",p_acc,70.0000,2.0000,2,60.0000,10.0000"), std::string::npos) << csv;
  EXPECT_NE(table_svg(preset, report).find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace bastion

namespace bastion {
namespace {

// A preset whose cells need a dataset that is not installed stops before anything runs, in one line naming
// the dataset, instead of failing every run one by one into a table of "error" cells (issue 40).
TEST_F(Reproduce, AMissingDatasetStopsBeforeAnyRunAndIsNamed) {
  const Preset preset = load_preset(write_preset(kTwoRows));
  const ReproduceOptions options =
      one_seed_with({"data.dataset=mnist", "data.data_dir=" + (dir_ / "no-datasets").string()});
  try {
    reproduce(preset, options);
    ADD_FAILURE() << "expected an error naming the missing dataset";
  } catch (const Error& e) {
    const std::string message = without_source_locations(e.what());
    EXPECT_NE(message.find("need dataset 'mnist'"), std::string::npos) << message;
    EXPECT_NE(message.find("nothing was run"), std::string::npos) << message;
    EXPECT_NE(message.find("`bastion data get mnist` downloads it"), std::string::npos) << message;
    EXPECT_EQ(message.find(".cpp:"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), message.rfind('\n')) << "at most the finder's list of folders";
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out" / "runs"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out" / "table.md"));
}

}  // namespace
}  // namespace bastion

namespace bastion {
namespace {

// A --quick table is a smoke test: it names its quick settings and marks nothing with †; a preset without
// paper numbers (a user's sweep) gets no paper and Δ columns and no "paper" legend (issue 41 item 4).
TEST_F(Reproduce, QuickTablesMarkNothingAndPaperlessTablesHaveNoPaperColumns) {
  const Preset preset = load_preset(write_preset(kTwoRows));
  ReproduceReport report;
  report.cells = {{{52.0, 1.0, 2, false}, {40.0, 0.5, 2, false}}, {{70.0, 2.0, 2, false}, {0, 0, 0, true}}};
  ReproduceOptions quick;
  quick.quick = true;
  const std::string md = table_markdown(preset, report, quick);
  EXPECT_EQ(md.find(" † |"), std::string::npos) << md;  // no marked cell
  EXPECT_NE(md.find("Quick settings: `rounds=1`"), std::string::npos) << md;
  EXPECT_NE(md.find("| FedRep | 70.00 ± 2.00 | 60.00 | +10.00 | error | 10.50 | – |"), std::string::npos) << md;

  const Preset sweep = load_preset(write_preset(R"(
[[rows]]
name = "FedAvg"
set = ["clients.rule=sgd"]
paper = ["-", "-"]
)"));
  ReproduceReport one;
  one.cells = {{{52.0, 1.0, 2, false}, {40.0, 0.5, 2, false}}};
  const std::string plain = table_markdown(sweep, one, {});
  EXPECT_NE(plain.find("| method | ACC | global |"), std::string::npos) << plain;
  EXPECT_NE(plain.find("| FedAvg | 52.00 ± 1.00 | 40.00 ± 0.50 |\n"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("Δ"), std::string::npos) << plain;
  EXPECT_EQ(table_svg(sweep, one).find("■ paper"), std::string::npos);
  EXPECT_NE(table_svg(preset, report).find("■ paper"), std::string::npos);
}

// table.svg had one tick and no values (issue 41 item 5): each bar is labelled with its value, the paper's
// too, the axis has quarter ticks, and the "± std" legend shows only when some cell has several seeds.
TEST_F(Reproduce, TableSvgLabelsItsBarsAndAxes) {
  const Preset preset = load_preset(write_preset(kTwoRows));
  ReproduceReport report;
  report.cells = {{{52.0, 0.0, 1, false}, {40.0, 0.0, 1, false}}, {{70.5, 0.0, 1, false}, {12.25, 0.0, 1, false}}};
  const std::string one_seed = table_svg(preset, report);
  EXPECT_NE(one_seed.find(">70.5</text>"), std::string::npos) << one_seed;
  EXPECT_NE(one_seed.find(">12.2</text>"), std::string::npos) << one_seed;  // ours, one decimal
  EXPECT_NE(one_seed.find(">60.0</text>"), std::string::npos) << one_seed;  // FedRep's paper number
  EXPECT_NE(one_seed.find(">50</text>"), std::string::npos) << one_seed;    // a quarter tick of 0..100
  EXPECT_NE(one_seed.find(">75</text>"), std::string::npos) << one_seed;
  EXPECT_EQ(one_seed.find("± std"), std::string::npos) << one_seed;
  report.cells[0][0] = {52.0, 1.5, 3, false};
  EXPECT_NE(table_svg(preset, report).find("± std"), std::string::npos);
}

}  // namespace
}  // namespace bastion

namespace bastion {
namespace {

// `--row fedavg` used to fail on a row named "FedAvg (no defense)" (slug fedavg-no-defense): a name that
// starts exactly one row's slug (up to a '-') selects it; one that starts several is refused as ambiguous.
TEST_F(Reproduce, ARowIsFoundByTheStartOfItsSlugWhenThatIsUnique) {
  const Preset preset = load_preset(write_preset(R"rows(
[[rows]]
name = "FedAvg (no defense)"
set = ["clients.rule=sgd"]
paper = [1, 2]
[[rows]]
name = "Krum (f = 1)"
set = ["server.rule=krum"]
paper = [1, 2]
[[rows]]
name = "Krum (f = 2)"
set = ["server.rule=krum"]
paper = [1, 2]
)rows"));
  const Preset fedavg = select_rows(preset, {"fedavg"});
  ASSERT_EQ(fedavg.rows.size(), 1u);
  EXPECT_EQ(fedavg.rows[0].name, "FedAvg (no defense)");
  EXPECT_EQ(select_rows(preset, {"krum-f-2"}).rows[0].name, "Krum (f = 2)");
  expect_error([&] { select_rows(preset, {"krum"}); }, {"could be any of 2 rows", "'Krum (f = 1)' (krum-f-1)"});
  expect_error([&] { select_rows(preset, {"fed"}); }, {"no row 'fed'"});  // a prefix must end at a '-'
}

}  // namespace
}  // namespace bastion
