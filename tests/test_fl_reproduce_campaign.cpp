// bastion reproduce --merge-from: a table's seeds run by separate invocations, assembled into the folder
// one invocation of all the seeds would have written (fl/reproduce/merge_seeds.h); summary.json read
// back (parse_summary_runs), which the assembly's summary is written from; and --status, which reads a
// campaign spread over such folders (fl/reproduce/reproduce_status.h).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "data/idx.h"
#include "fl/metrics/results.h"
#include "fl/reproduce/preset.h"
#include "fl/reproduce/reproduce.h"
#include "fl/reproduce/reproduce_status.h"
#include "fl/reproduce/run_record.h"
#include "reproduce_test_support.h"
#include "test_support.h"

namespace bastion {
namespace {

using testing::expect_error;

TEST(SummaryParse, ReadsBackEveryFieldSoTheFileIsWrittenAgainTheSame) {
  RunSummary first;
  first.seed = 7;
  first.rounds = 20;
  first.acc = 0.8125;
  first.asr = 0.1;
  first.bfr = 1.0 / 3.0;  // no short decimal: the reals must round-trip exactly
  first.best_acc = 0.83;
  first.round_to_target = 12;
  first.detection = {0.9, 0.05, kNoValue};
  first.client_detection = {kNoValue, 0.0, 1.0};
  first.rejected = 3;
  first.bytes_up = 123456789012;
  first.bytes_down = 42;
  first.seconds_per_round = 1.25;
  first.malicious_clients = {2, 5};
  first.resolved = {{"server.krum.f", 2.0}};
  first.personal = {{"p_acc", 0.7}, {"p_acc_w", kNoValue}, {"p_tacc", 0.71}};
  RunSummary second = first;
  second.seed = 8;
  second.acc = 0.79;
  second.personal[1].second = 0.69;
  const std::string text = summary_json("grid", "last:5", {first, second});
  const std::vector<RunSummary> runs = parse_summary_runs(text, "summary.json");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1].seed, 8u);
  EXPECT_EQ(runs[0].malicious_clients, first.malicious_clients);
  EXPECT_EQ(summary_json("grid", "last:5", runs), text);
}

// A summary.json from before a field existed (here malicious_clients and client_detection): the entry reads
// with defaults, and a summary written over such entries keeps each as it was, with no invented field.
TEST(SummaryParse, AnOlderEntryReadsWithDefaultsAndIsKeptAsWritten) {
  const std::string older = R"({"name": "n", "report": "best", "runs": [{"seed": 23, "rounds": 250, "acc": 0.9,)"
                            R"( "personalized": {"p_acc": 0.93}}]})";
  const std::vector<SummaryEntry> entries = parse_summary_entries(older, "old/summary.json");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_TRUE(entries[0].run.malicious_clients.empty());
  EXPECT_TRUE(std::isnan(entries[0].run.client_detection.dacc));
  EXPECT_EQ(entries[0].run.personal_value("p_acc"), 0.93);
  const std::string merged = summary_json("n", "best", entries);
  EXPECT_EQ(merged.find("malicious_clients"), std::string::npos) << merged;
  EXPECT_NE(merged.find("\"mean\": {\n    \"acc\": 0.9,"), std::string::npos) << merged;
  RunSummary current;  // today's entries are written the same either way
  current.seed = 3;
  current.acc = 0.5;
  const std::string today = summary_json("n", "last", {current});
  EXPECT_EQ(summary_json("n", "last", parse_summary_entries(today, "s")), today);
}

TEST(SummaryParse, ADamagedFileIsNamed) {
  const std::string text = summary_json("grid", "last", {RunSummary{}});
  expect_error([&] { parse_summary_runs(text.substr(0, text.size() / 2), "x/summary.json"); },
               {"x/summary.json", "not a summary.json"});
  expect_error([&] { parse_summary_runs(R"({"runs": [{"rounds": 1}]})", "y/summary.json"); }, {"y/summary.json"});
}

class MergeSeeds : public testing::TempDirTest {
 protected:
  Preset preset() {
    testing::write_text(dir_ / "base.toml", testing::kReproduceBase);
    testing::write_text(dir_ / "table.toml", testing::preset_text(testing::kTwoRows));
    return load_preset((dir_ / "table.toml").string());
  }
  // `seeds` seeds from the base's seed 3 + `skip` into dir_/out.
  ReproduceReport run(const std::string& out, int64_t seeds, int64_t skip = 0, std::vector<std::string> merge = {},
                      std::vector<std::string> more = {}) {
    ReproduceOptions options;
    options.out_dir = path(out);
    options.seeds = seeds;
    if (skip > 0) options.overrides.push_back("seed=" + std::to_string(3 + skip));
    options.overrides.insert(options.overrides.end(), more.begin(), more.end());
    for (const std::string& source : merge) options.merge_from.push_back(path(source));
    return reproduce(preset(), options);
  }
  std::string text(const std::string& file) { return read_text_file(path(file)); }
};

// Seed 3 in one folder, seeds 4 and 5 in another: the assembly is the folder of seeds 3..5 run at once,
// file for file (timing aside: wall times are not deterministic).
TEST_F(MergeSeeds, AssembledSeedsAreTheRunOfAllTheSeedsAtOnce) {
  ASSERT_EQ(run("whole", 3).failed, 0);
  ASSERT_EQ(run("first", 1).failed, 0);
  ASSERT_EQ(run("next", 2, 1).failed, 0);
  const ReproduceReport merged = run("merged", 3, 0, {"first", "next"});
  EXPECT_EQ(merged.runs, 0);  // nothing trained
  EXPECT_EQ(merged.skipped, 2);
  EXPECT_EQ(merged.failed, 0);
  for (const std::string cell : {"fedavg", "fedrep"}) {
    const std::string whole = "whole/runs/" + cell, ours = "merged/runs/" + cell;
    EXPECT_EQ(text(ours + "/config.toml"), text(whole + "/config.toml"));
    EXPECT_EQ(text(ours + "/curves.svg"), text(whole + "/curves.svg"));
    for (const std::string seed : {"/seed-3", "/seed-4", "/seed-5"})
      for (const std::string file : {"/rounds.csv", "/clients.csv", "/partition.csv"})
        EXPECT_EQ(text(ours + seed + file), text(whole + seed + file)) << cell << seed << file;
    EXPECT_FALSE(std::filesystem::exists(path(ours + "/seed-3/checkpoint.safetensors")));
    const std::vector<RunSummary> a = parse_summary_runs(text(ours + "/summary.json"), "merged");
    const std::vector<RunSummary> b = parse_summary_runs(text(whole + "/summary.json"), "whole");
    ASSERT_EQ(a.size(), 3u);
    for (size_t s = 0; s < 3; ++s) {
      EXPECT_EQ(a[s].seed, b[s].seed);
      EXPECT_EQ(a[s].acc, b[s].acc);
      EXPECT_EQ(a[s].personal_value("p_acc"), b[s].personal_value("p_acc"));
    }
  }
  EXPECT_EQ(text("merged/table.csv"), text("whole/table.csv"));  // means, stds and seed counts
  // provenance.tsv: the invocation that ran seed 3, then the one that ran seeds 4 and 5.
  EXPECT_EQ(text("merged/runs/fedavg/provenance.tsv"),
            text("first/runs/fedavg/provenance.tsv") + text("next/runs/fedavg/provenance.tsv"));
  EXPECT_EQ(run("merged", 3, 0, {"first", "next"}).skipped, 2);  // again: already assembled
}

TEST_F(MergeSeeds, AMissingSeedWritesNothingAndNamesTheRunAndTheSeed) {
  ASSERT_EQ(run("first", 1).failed, 0);
  expect_error([&] { run("merged", 3, 0, {"first"}); },
               {"cannot be assembled", "fedavg: seed 4 is in none of the sources", "fedrep: seed 4", "nothing"});
  EXPECT_FALSE(std::filesystem::exists(path("merged/runs/fedavg")));
  // A run the output folder already holds unfinished is never merged over, and stops every other run's merge.
  ASSERT_EQ(run("next", 2, 1).failed, 0);
  std::filesystem::create_directories(path("merged/runs/fedrep"));
  testing::write_text(dir_ / "merged/runs/fedrep/rounds.csv", "a run in progress\n");
  expect_error(
      [&] {
        run("merged", 3, 0, {"first", "next"});
      },
      {"fedrep: the output folder holds it unfinished", "nothing was written"});
  EXPECT_FALSE(std::filesystem::exists(path("merged/runs/fedavg")));
  EXPECT_EQ(read_text_file(path("merged/runs/fedrep/rounds.csv")), "a run in progress\n");
}

TEST_F(MergeSeeds, ASourceOfAnotherExperimentIsRefusedNamingTheDifference) {
  ASSERT_EQ(run("first", 1, 0, {}, {"rounds=1"}).failed, 0);
  ASSERT_EQ(run("next", 2, 1).failed, 0);
  expect_error(
      [&] {
        run("merged", 3, 0, {"first", "next"});
      },
      {"first/runs/fedavg/config.toml", "another experiment", "rounds = 1"});
}

// A seed that two sources hold is taken from the first given; an unfinished source (no summary.json) is
// named when a seed is missing.
TEST_F(MergeSeeds, TheFirstSourceWinsAndAnUnfinishedOneIsNamed) {
  ASSERT_EQ(run("one", 1).failed, 0);
  ASSERT_EQ(run("two", 2).failed, 0);  // seeds 3 and 4
  ASSERT_EQ(run("merged", 2, 0, {"one", "two"}).failed, 0);
  EXPECT_EQ(text("merged/runs/fedavg/provenance.tsv"),
            text("one/runs/fedavg/provenance.tsv") + text("two/runs/fedavg/provenance.tsv"));
  std::filesystem::remove(path("two/runs/fedrep/summary.json"));
  expect_error([&] { run("again", 2, 0, {"one", "two"}); }, {"fedrep: seed 4", "not finished: ", "two/runs/fedrep"});
}

// --reuse-from: a table whose rows another table already ran under other names (SPMC Table 1's FedAvg and
// SPMC rows are Table 5's) copies those runs instead of training them, and trains the rest. A row whose
// experiment differs (2 local epochs) is trained, so the copy follows the config, not the row.
TEST_F(MergeSeeds, ReuseCopiesFinishedRunsOfTheSameExperimentFromAnotherTable) {
  ASSERT_EQ(run("first", 1).failed, 0);  // FedAvg and FedRep, seed 3
  testing::write_text(dir_ / "other.toml", testing::preset_text(R"(
[[rows]]
name = "Plain FedAvg"
set = ["clients.rule=sgd", "clients.sgd.epochs=1", "clients.sgd.batch=16"]
paper = [50.0, "-"]
[[rows]]
name = "FedAvg, 2 epochs"
set = ["clients.rule=sgd", "clients.sgd.epochs=2", "clients.sgd.batch=16"]
paper = [50.0, "-"]
)"));
  const Preset other = load_preset(path("other.toml"));
  ReproduceOptions options;
  options.out_dir = path("second");
  options.seeds = 1;
  options.reuse_from = {path("first")};
  std::vector<std::string> log;
  options.log = [&](const std::string& line) { log.push_back(line); };
  const std::string reused = "second/runs/" + reproduce_grid(other, options).runs[0].folder;
  const std::string status = reproduce_status(other, options);  // before: what the copy would take
  EXPECT_NE(status.find("finished 1 of 2 runs, 0 in progress, 1 not started"), std::string::npos) << status;
  EXPECT_NE(status.find(path("first/runs/fedavg") + " (--reuse-from)"), std::string::npos) << status;
  // A copy that a kill interrupted (its temporary folder) is never a source, even with the files that make
  // a run look finished.
  std::filesystem::copy(path("first/runs/fedrep"), path("first/runs/a-copy.tmp.1"));
  testing::write_text(dir_ / "first/runs/a-copy.tmp.1/config.toml",
                      read_text_file(path("first/runs/fedavg/config.toml")));
  const ReproduceReport report = reproduce(other, options);
  EXPECT_EQ(report.runs, 1);  // the 2-epoch row
  EXPECT_EQ(report.skipped, 1);
  EXPECT_EQ(report.failed, 0);
  for (const std::string file : {"/rounds.csv", "/clients.csv", "/summary.json", "/timing.csv", "/provenance.tsv"})
    EXPECT_EQ(text(reused + file), text("first/runs/fedavg" + file)) << file;
  EXPECT_FALSE(std::filesystem::exists(path(reused + "/checkpoint.safetensors")));
  ASSERT_TRUE(std::filesystem::exists(path("first/runs/fedavg/.bastion-lock")));
  EXPECT_FALSE(std::filesystem::exists(path(reused + "/.bastion-lock"))) << "the lock is the folder's own";
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.front().find("reused from " + path("first/runs/fedavg")), std::string::npos) << log.front();
  // A run the output folder holds is never replaced, finished or not.
  testing::write_text(dir_ / reused / "rounds.csv", "kept\n");
  EXPECT_EQ(reproduce(other, options).skipped, 2);
  EXPECT_EQ(text(reused + "/rounds.csv"), "kept\n");
  options.reuse_from = {path("nowhere")};
  expect_error([&] { reproduce(other, options); }, {"--reuse-from", "nowhere", "no runs/ folder"});
}

// A timing.csv of `rounds` rounds of `seconds` each: costs large enough to show in --status's 2 decimals.
void write_timing(const std::filesystem::path& file, int64_t rounds, double seconds) {
  std::ostringstream text;  // not string + string: GCC 12's -Wrestrict false positive
  text << "round,train_s,aggregate_s,eval_s,round_s\n";
  for (int64_t r = 1; r <= rounds; ++r) text << r << "," << seconds << ",0,0," << seconds << "\n";
  testing::write_text(file, text.str());
}

// run_cost: a round's measured CPU time where timing.csv has it, else its round time x the threads the
// provenance records; the seeds' files count too. A run resumed by a binary that measures cpu_s has both.
class RunCostTest : public testing::TempDirTest {};
TEST_F(RunCostTest, ChargesCpuTimeWhereMeasuredElseRoundTimeTimesThreads) {
  testing::write_text(dir_ / "run/provenance.tsv", "2026-11-29\taaaaaaa\tsome machine\t4\n");
  testing::write_text(dir_ / "run/timing.csv",
                      "round,train_s,aggregate_s,eval_s,round_s,cpu_s\n1,9,0,1,10,\n2,9,0,1,10,3.5\n");
  RunCost cost = run_cost((dir_ / "run").string());
  EXPECT_EQ(cost.rounds, 2);
  EXPECT_EQ(cost.cpu_rounds, 1);
  EXPECT_DOUBLE_EQ(cost.core_seconds, 10 * 4 + 3.5);
  testing::write_text(dir_ / "run/seed-2/timing.csv", "round,train_s,aggregate_s,eval_s,round_s\n1,1,0,0,2\n");
  cost = run_cost((dir_ / "run").string());
  EXPECT_EQ(cost.rounds, 3);
  EXPECT_DOUBLE_EQ(cost.core_seconds, 10 * 4 + 3.5 + 2 * 4);
  const TimingTotals totals = timing_totals((dir_ / "run/timing.csv").string());
  EXPECT_DOUBLE_EQ(totals.seconds_without_cpu, 10.0);  // round 1's wall time; round 2 has its CPU time
  EXPECT_DOUBLE_EQ(totals.cpu_seconds, 3.5);
  EXPECT_DOUBLE_EQ(totals.core_seconds(0), 10 + 3.5);  // no thread count recorded: 1 thread
}

// --status: each run's state and rounds, found in --out or a --merge-from folder, and the core-hours left
// at the cost per round of the rounds run so far (the row's own, else the mean of all runs).
TEST_F(MergeSeeds, StatusSaysWhereEachRunIsAndWhatIsLeft) {
  const Preset whole = preset();
  ReproduceOptions options;
  options.seeds = 2;
  options.out_dir = path("elsewhere");
  const std::string before = reproduce_status(whole, options);
  EXPECT_NE(before.find("finished 0 of 2 runs, 0 in progress, 2 not started"), std::string::npos) << before;
  EXPECT_NE(before.find("left unknown"), std::string::npos) << before;

  ASSERT_EQ(reproduce(select_rows(whole, {"fedavg"}), options).failed, 0);
  options.out_dir = path("out");
  options.merge_from = {path("elsewhere")};
  for (const char* seed : {"seed-3", "seed-4"})
    write_timing(dir_ / "elsewhere/runs/fedavg" / seed / "timing.csv", 2, 3600);
  const double fedavg_hours = run_cost(path("elsewhere/runs/fedavg")).core_seconds / 3600.0;
  ASSERT_GE(fedavg_hours, 4.0);
  const std::string one = reproduce_status(whole, options);
  EXPECT_NE(one.find("fedavg  finished     4/4"), std::string::npos) << one;
  EXPECT_NE(one.find(path("elsewhere/runs/fedavg")), std::string::npos) << one;
  EXPECT_NE(one.find("fedrep  not started  0/4"), std::string::npos) << one;
  EXPECT_NE(one.find("finished 1 of 2 runs, 0 in progress, 1 not started"), std::string::npos) << one;
  EXPECT_NE(one.find("about " + fixed_text(fedavg_hours, 2) + " left"), std::string::npos) << one;  // 4 x mean

  // FedRep stopped after 3 of its 4 rounds (2 seeds x 2 rounds): its own rate, times the 1 round left.
  options.merge_from.clear();
  ASSERT_EQ(reproduce(select_rows(whole, {"fedrep"}), options).failed, 0);
  options.merge_from = {path("elsewhere")};
  std::filesystem::remove(path("out/runs/fedrep/summary.json"));
  write_timing(dir_ / "out/runs/fedrep/seed-3/timing.csv", 2, 7200);
  write_timing(dir_ / "out/runs/fedrep/seed-4/timing.csv", 1, 7200);
  const RunCost fedrep = run_cost(path("out/runs/fedrep"));
  ASSERT_EQ(fedrep.rounds, 3);
  const std::string two = reproduce_status(whole, options);
  EXPECT_NE(two.find("fedrep  in progress  3/4"), std::string::npos) << two;
  EXPECT_NE(two.find("finished 1 of 2 runs, 1 in progress, 0 not started"), std::string::npos) << two;
  EXPECT_NE(two.find("about " + fixed_text(fedrep.core_seconds / 3 / 3600.0, 2) + " left"), std::string::npos) << two;

  // A damaged file of one run is named with that run; the others are still reported.
  testing::write_text(dir_ / "out/runs/fedrep/seed-3/timing.csv", "not a timing file\n");
  const std::string three = reproduce_status(whole, options);
  EXPECT_NE(three.find("fedrep  unreadable"), std::string::npos) << three;
  EXPECT_NE(three.find("0 not started, 1 unreadable:\n  fedrep: timing.csv"), std::string::npos) << three;
  EXPECT_NE(three.find("fedavg  finished"), std::string::npos) << three;
}

// --status over seeds run by separate invocations (seed 3 in one folder, 4 and 5 in another): each run's seeds
// are counted where they are, and the run is finished when --merge-from could assemble it.
TEST_F(MergeSeeds, StatusCountsSeedsThatOtherSeedRangesHold) {
  ASSERT_EQ(run("first", 1).failed, 0);
  ReproduceOptions options;
  options.out_dir = path("merged");
  options.seeds = 3;
  options.merge_from = {path("first")};
  const std::string part = reproduce_status(preset(), options);
  EXPECT_NE(part.find("fedavg  in progress  2/6"), std::string::npos) << part;  // seed 3's 2 rounds of 3 x 2
  EXPECT_NE(part.find("0 of 2 runs, 2 in progress"), std::string::npos) << part;

  ASSERT_EQ(run("next", 2, 1).failed, 0);
  options.merge_from = {path("first"), path("next")};
  const std::string whole = reproduce_status(preset(), options);
  EXPECT_NE(whole.find("fedavg  finished     6/6"), std::string::npos) << whole;
  EXPECT_NE(whole.find(path("first/runs/fedavg") + " + " + path("next/runs/fedavg")), std::string::npos) << whole;
  EXPECT_NE(whole.find("finished 2 of 2 runs"), std::string::npos) << whole;
  EXPECT_EQ(run("merged", 3, 0, {"first", "next"}).failed, 0);  // which --merge-from then assembles
}

}  // namespace
}  // namespace bastion
