// The federated run loop end to end on the seeded synthetic set (no files, a few seconds in all):
// determinism across thread counts, kill + resume, upload validation, results files, CLI.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>

#include <nlohmann/json.hpp>
#include <limits>

#include "data/idx.h"
#include "fl/core/checkpoint.h"
#include "fl/core/config.h"
#include "fl/core/experiment.h"
#include "fl/core/run_setup.h"
#include "fl/defenses/server_rule.h"
#include "fl_test_support.h"
#include "test_support.h"

namespace bastion {
namespace {

using testing::expect_error;

// 20 clients on the 2000-sample 8x8 synthetic set, 5 per round, 2 attackers forced into every round.
std::string tiny_config(const std::string& extra_attack = "") {
  return R"(
name = "tiny"
seed = 7
rounds = 6
[data]
dataset = "synthetic"
partition = "dirichlet:0.5"
clients = 20
min_size = 5
[model]
name = "mlp"
[clients]
per_round = 5
[clients.sgd]
epochs = 1
batch = 16
lr = 0.05
[attack]
names = ["badnets"]
malicious_count = 4
malicious_per_round = 2
[attack.badnets]
per_batch = 4
[eval]
every = 2
batch = 128
[run]
checkpoint_every = 2
)" + extra_attack;
}

using FlRun = testing::FlRunTest;

TEST_F(FlRun, WritesEveryResultsFileWithOneRowPerEvaluatedRound) {
  const std::vector<RunSummary> summaries = run(tiny_config(), "a", 1);
  ASSERT_EQ(summaries.size(), 1u);
  for (const char* name :
       {"config.toml", "rounds.csv", "timing.csv", "summary.json", "curves.svg", "checkpoint.safetensors"})
    EXPECT_TRUE(std::filesystem::exists(dir_ / "a" / name)) << name;
  const std::vector<RoundRecord> records = parse_rounds_csv(file("a", "rounds.csv"));
  ASSERT_EQ(records.size(), 3u);  // rounds 2, 4, 6
  EXPECT_EQ(records[2].round, 6);
  for (const RoundRecord& r : records) {
    EXPECT_EQ(r.sampled, 5);
    EXPECT_EQ(r.malicious, 2);        // forced into every round
    EXPECT_FALSE(std::isnan(r.asr));  // badnets gives an ASR column
    EXPECT_GT(r.acc, 0.3);            // the synthetic set is easy: learning happened
  }
  // The resolved config parses back to itself.
  const std::string resolved = file("a", "config.toml");
  EXPECT_EQ(config_to_toml(parse_config(resolved, "config.toml")), resolved);
}

TEST_F(FlRun, RoundsCsvIsIdenticalWithOneAndTwoThreads) {
  // badnets (data) plus a collusion and an upload attack:
  const std::vector<std::string> overrides = {"attack.names=[\"badnets\", \"lie\", \"scale\"]",
                                              "attack.scale.factor=2"};
  run(tiny_config(), "t1", 1, overrides);
  run(tiny_config(), "t2", 2, overrides);
  EXPECT_EQ(file("t1", "rounds.csv"), file("t2", "rounds.csv"));
  EXPECT_FALSE(file("t1", "rounds.csv").empty());
}

TEST_F(FlRun, KilledAndResumedRunWritesIdenticalFiles) {
  run(tiny_config(), "whole", 2);
  // "Kill" after round 3: the last checkpoint is from round 2, so round 3 is computed again on resume.
  run(tiny_config(), "resumed", 1, {}, false, /*stop_after=*/3);
  EXPECT_EQ(parse_rounds_csv(file("resumed", "rounds.csv")).size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "resumed" / "summary.json"));
  run(tiny_config(), "resumed", 2, {}, /*resume=*/true);
  EXPECT_EQ(file("whole", "rounds.csv"), file("resumed", "rounds.csv"));
  EXPECT_EQ(file("whole", "config.toml"), file("resumed", "config.toml"));
}

TEST_F(FlRun, ResumeMayExtendRoundsButNotChangeTheExperiment) {
  run(tiny_config(), "r", 1, {"rounds=4"});
  run(tiny_config(), "r", 1, {"rounds=6"}, /*resume=*/true);
  run(tiny_config(), "whole", 1);
  EXPECT_EQ(file("whole", "rounds.csv"), file("r", "rounds.csv"));
  expect_error([&] { run(tiny_config(), "r", 1, {"clients.sgd.lr=0.1"}, true); },
               {"cannot resume", "different configuration", "[clients.sgd] 'lr = 0.05' there, 'lr = 0.1' here"});
}

// More seeds over a finished folder are refused like any other change, and the message says how to add them.
TEST_F(FlRun, ResumeWithMoreSeedsSaysHowToAddThem) {
  run(tiny_config(), "r", 1, {"rounds=2"});
  expect_error(
      [&] {
        run(tiny_config(), "r", 1, {"rounds=2", "repeat=2"}, true);
      },
      {"cannot resume", "'repeat = 1' there, 'repeat = 2' here", "to add seeds", "--set seed="});
  try {  // the hint belongs to a change of seeds only
    run(tiny_config(), "r", 1, {"rounds=2", "clients.sgd.lr=0.1"}, true);
    ADD_FAILURE() << "a resume with another lr was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot resume"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("to add seeds"), std::string::npos) << e.what();
  }
}

// A run made before a rule gained an option has no line for it in config.toml: resuming it reads the
// missing key as its default (the behaviour before the option), so the run continues. Dropping a line
// whose value differs from the default is still a different experiment.
TEST_F(FlRun, ResumeReadsAKeyMissingFromAnOlderConfigAsItsDefault) {
  run(tiny_config(), "r", 1, {"rounds=4"});
  const std::string recorded = file("r", "config.toml");
  const std::string default_line = "\nmomentum = 0.9\n";  // [clients.sgd], not set by tiny_config
  ASSERT_NE(recorded.find(default_line), std::string::npos) << recorded;
  std::string older = recorded;
  older.erase(older.find(default_line) + 1, default_line.size() - 1);  // keep the newline before it
  testing::write_text(dir_ / "r" / "config.toml", older);
  run(tiny_config(), "r", 1, {"rounds=6"}, /*resume=*/true);
  run(tiny_config(), "whole", 1);
  EXPECT_EQ(file("whole", "rounds.csv"), file("r", "rounds.csv"));

  const std::string set_line = "\nlr = 0.05\n";  // set by tiny_config: its default is another value
  std::string missing_a_set_value = file("r", "config.toml");
  ASSERT_NE(missing_a_set_value.find(set_line), std::string::npos);
  missing_a_set_value.erase(missing_a_set_value.find(set_line) + 1, set_line.size() - 1);
  testing::write_text(dir_ / "r" / "config.toml", missing_a_set_value);
  expect_error([&] { run(tiny_config(), "r", 1, {"rounds=8"}, true); }, {"cannot resume", "different configuration"});
}

// A refused resume used to rewrite config.toml first, so the folder's config no longer described its results.
TEST_F(FlRun, RefusedResumeLeavesTheFolderAsItWas) {
  run(tiny_config(), "r", 1, {"rounds=2"});
  const std::string config = file("r", "config.toml");
  expect_error([&] { run(tiny_config(), "r", 1, {"rounds=4", "clients.sgd.lr=0.1"}, true); }, {"cannot resume"});
  EXPECT_EQ(file("r", "config.toml"), config);
}

// [run] only says how the rounds are computed: a resume may change the threads and the checkpoints.
TEST_F(FlRun, ResumeMayChangeThreadsAndCheckpointFrequency) {
  run(tiny_config(), "r", 1, {"rounds=4", "run.threads=1"});
  run(tiny_config(), "r", 0, {"rounds=6", "run.threads=2", "run.checkpoint_every=1"}, /*resume=*/true);
  run(tiny_config(), "whole", 1);
  EXPECT_EQ(file("whole", "rounds.csv"), file("r", "rounds.csv"));
  EXPECT_NE(file("r", "config.toml").find("threads = 2"), std::string::npos);
}

// run.checkpoint_every = -1, the default: a checkpoint at most once per auto_checkpoint_seconds (a minute),
// so a run of a few seconds writes none; with the clock at 0 every round writes one, and a run killed after
// round 3 resumes to the same rounds.csv as the uninterrupted one (issue 41 item 7).
TEST_F(FlRun, AutomaticCheckpointsFollowTheClock) {
  const ExperimentConfig config = parse_config(tiny_config(), "tiny.toml", {"run.checkpoint_every=-1"});
  EXPECT_EQ(parse_config("name = \"x\"\n[data]\ndataset = \"synthetic\"\n", "x.toml").run.integer("checkpoint_every"),
            -1);
  RunOptions options;
  options.out_dir = (dir_ / "whole").string();
  options.threads = 1;
  run_experiment(config, options);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "whole" / "checkpoint.safetensors"));
  options.out_dir = (dir_ / "killed").string();
  options.auto_checkpoint_seconds = 0;
  options.stop_after_round = 3;
  run_experiment(config, options);
  ASSERT_TRUE(std::filesystem::exists(dir_ / "killed" / "checkpoint.safetensors"));
  options.stop_after_round = 0;
  options.resume = true;
  run_experiment(config, options);
  EXPECT_EQ(file("whole", "rounds.csv"), file("killed", "rounds.csv"));
}

// The results files are rewritten at most every results_write_seconds (issue 42: every round was O(rounds^2)
// bytes over a run). A server rule that peeks at rounds.csv when it aggregates sees it follow the rounds
// with the clock at 0, and not yet written with the clock at "never" (no checkpoint either); both runs
// end with the same file.
class PeekingRule final : public ServerRule {
 public:
  PeekingRule(std::unique_ptr<ServerRule> inner, std::string file, std::vector<bool>& seen)
      : inner_(std::move(inner)), file_(std::move(file)), seen_(seen) {}
  AggregationOutput aggregate(const AggregationInput& in) override {
    seen_.push_back(std::filesystem::exists(file_));
    return inner_->aggregate(in);
  }

 private:
  std::unique_ptr<ServerRule> inner_;
  std::string file_;
  std::vector<bool>& seen_;
};

TEST_F(FlRun, ResultsFilesAreRewrittenAtMostAsOftenAsTheClockSays) {
  const ExperimentConfig config = parse_config(tiny_config(), "tiny.toml", {"run.checkpoint_every=0", "eval.every=1"});
  auto run_with = [&](const std::string& out, double seconds, std::vector<bool>& seen) {
    RunOptions options;
    options.out_dir = (dir_ / out).string();
    options.threads = 1;
    options.results_write_seconds = seconds;
    const std::string file = (dir_ / out / "rounds.csv").string();
    options.wrap_server_rule = [&seen, file](std::unique_ptr<ServerRule> rule) -> std::unique_ptr<ServerRule> {
      return std::make_unique<PeekingRule>(std::move(rule), file, seen);
    };
    run_experiment(config, options);
  };
  std::vector<bool> every_round, never;
  run_with("every", 0.0, every_round);
  run_with("never", 1e9, never);
  ASSERT_EQ(every_round.size(), 6u);
  EXPECT_FALSE(every_round[0]);                   // round 1 aggregates before anything was written
  EXPECT_TRUE(every_round[1]);                    // round 2 sees round 1's row
  EXPECT_EQ(never, std::vector<bool>(6, false));  // written once, after the last round
  EXPECT_EQ(file("every", "rounds.csv"), file("never", "rounds.csv"));
}

// Killed after the last checkpoint, before summary.json: the resume rebuilds it from the checkpoint,
// to the last digit of seconds_per_round (the checkpoint's timings were float32 once, 7 digits).
TEST_F(FlRun, SummaryRebuiltFromTheLastCheckpointIsIdentical) {
  run(tiny_config(), "r", 2);
  const std::string summary = file("r", "summary.json"), curves = file("r", "curves.svg");
  std::filesystem::remove(dir_ / "r" / "summary.json");
  std::filesystem::remove(dir_ / "r" / "curves.svg");
  run(tiny_config(), "r", 1, {}, /*resume=*/true);
  EXPECT_EQ(file("r", "summary.json"), summary);
  EXPECT_EQ(file("r", "curves.svg"), curves);
}

TEST_F(FlRun, CheckpointKeepsTimingsExactly) {
  CheckpointState state;
  state.round = 2;
  state.global = {1.0f, 2.0f};
  state.timings = {{1, 0.1, 1e-9, 0.3, 0.056022875010967255, 0.1234567890123},
                   {2, 1.0 / 3.0, 0, 2.5, 12345.678901234567, 24690.0 / 7.0}};
  const std::string path = (dir_ / "c.safetensors").string();
  save_checkpoint(path, state);
  const CheckpointState back = load_checkpoint(path);
  ASSERT_EQ(back.timings.size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(back.timings[r].round, state.timings[r].round);
    EXPECT_EQ(back.timings[r].train_seconds, state.timings[r].train_seconds);
    EXPECT_EQ(back.timings[r].aggregate_seconds, state.timings[r].aggregate_seconds);
    EXPECT_EQ(back.timings[r].eval_seconds, state.timings[r].eval_seconds);
    EXPECT_EQ(back.timings[r].round_seconds, state.timings[r].round_seconds);
    EXPECT_EQ(back.timings[r].cpu_seconds, state.timings[r].cpu_seconds);
  }
}

// An old run's checkpoint in the folder used to survive --overwrite: a resume after a kill before the
// new run's first checkpoint then continued the old run.
TEST_F(FlRun, OverwriteForgetsThePreviousCheckpoint) {
  run(tiny_config(), "r", 1, {"rounds=4"});
  RunOptions options;
  options.out_dir = (dir_ / "r").string();
  options.overwrite = true;
  run_experiment(parse_config(tiny_config(), "tiny.toml", {"rounds=2", "repeat=2"}), options);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "r" / "checkpoint.safetensors"));  // repeat 2: in seed-<s>/ only
  EXPECT_FALSE(std::filesystem::exists(dir_ / "r" / "rounds.csv"));
  ASSERT_TRUE(std::filesystem::exists(dir_ / "r" / "seed-7" / "checkpoint.safetensors"));
  options.stop_after_round = 1;  // "killed" before the first checkpoint (every 2 rounds)
  run_experiment(parse_config(tiny_config(), "tiny.toml", {"rounds=3"}), options);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "r" / "seed-7"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "r" / "checkpoint.safetensors"));
  run(tiny_config(), "r", 1, {"rounds=3"}, /*resume=*/true);
  run(tiny_config(), "whole", 1, {"rounds=3"});
  EXPECT_EQ(file("whole", "rounds.csv"), file("r", "rounds.csv"));
}

// Refused before anything is written: config.toml keeps rounds = 4 (it used to be rewritten first).
TEST_F(FlRun, ResumeRefusesFewerRoundsThanTheCheckpoint) {
  run(tiny_config(), "r", 1, {"rounds=4"});
  const std::string config = file("r", "config.toml");
  expect_error([&] { run(tiny_config(), "r", 1, {"rounds=2"}, /*resume=*/true); },
               {"checkpoint.safetensors is from round 4", "last round 2", "rounds may grow, not shrink"});
  EXPECT_EQ(file("r", "config.toml"), config);
}

// A checkpoint that contradicts itself (its round against its rows) or holds a non-finite weight is refused
// by --resume, naming the file, before anything is written (issue 42 item 5).
TEST_F(FlRun, ResumeRefusesAnInconsistentOrNonFiniteCheckpoint) {
  run(tiny_config(), "r", 1, {"rounds=3", "run.checkpoint_every=1"});
  const std::string path = (dir_ / "r" / "checkpoint.safetensors").string();
  const std::string rounds = file("r", "rounds.csv"), config = file("r", "config.toml");
  CheckpointState state = load_checkpoint(path);
  CheckpointState behind = state;
  behind.round = 2;  // but it still holds round 3's row
  save_checkpoint(path, behind);
  expect_error([&] { run(tiny_config(), "r", 1, {"rounds=5"}, /*resume=*/true); },
               {"checkpoint.safetensors", "from round 2", "row for round 3"});
  EXPECT_EQ(file("r", "rounds.csv"), rounds);
  EXPECT_EQ(file("r", "config.toml"), config);
  CheckpointState poisoned = state;
  poisoned.global[5] = std::numeric_limits<float>::quiet_NaN();
  save_checkpoint(path, poisoned);
  expect_error([&] { run(tiny_config(), "r", 1, {"rounds=5"}, /*resume=*/true); }, {"non-finite", "at 5"});
  save_checkpoint(path, state);  // the good one back: the resume continues without a duplicated row
  run(tiny_config(), "r", 1, {"rounds=5", "run.checkpoint_every=1"}, /*resume=*/true);
  std::vector<int64_t> evaluated;
  for (const RoundRecord& r : parse_rounds_csv(file("r", "rounds.csv"))) evaluated.push_back(r.round);
  EXPECT_EQ(evaluated, (std::vector<int64_t>{2, 3, 4, 5}));  // every 2 rounds, and each run's last round
}

// What a killed writer leaves (a temporary) is swept when the folder is used again.
TEST_F(FlRun, ResumeRemovesTheTemporariesOfAKilledRun) {
  run(tiny_config(), "r", 1, {"rounds=2"});
  testing::write_text(dir_ / "r" / "checkpoint.safetensors.tmp.99999", "half");
  run(tiny_config(), "r", 1, {"rounds=4"}, /*resume=*/true);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "r" / "checkpoint.safetensors.tmp.99999"));
}

// summary.json names the malicious clients each seed really had (issue 41 item 1): with SPMC's "last"
// selection, the highest ids.
TEST_F(FlRun, SummaryNamesTheMaliciousClients) {
  run(tiny_config(), "m", 1, {"rounds=1", "attack.selection=last"});
  const nlohmann::json summary = nlohmann::json::parse(file("m", "summary.json"));
  const std::vector<int64_t> ids = summary["runs"][0]["malicious_clients"].get<std::vector<int64_t>>();
  const ExperimentConfig config = parse_config(tiny_config(), "tiny.toml", {});
  const int64_t clients = config.data.integer("clients");
  ASSERT_FALSE(ids.empty());
  for (size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(ids[i], clients - static_cast<int64_t>(ids.size()) + static_cast<int64_t>(i));
}

TEST_F(FlRun, RefusesToOverwriteResults) {
  run(tiny_config(), "x", 1, {"rounds=2"});
  expect_error([&] { run(tiny_config(), "x", 1, {"rounds=2"}); }, {"already holds results", "--resume"});
}

// Issue 42's data-loss cases: --overwrite never deletes through a seed-<s> symlink (it refuses, and the
// linked folder keeps its files); a folder holding files a run does not write is refused without
// --overwrite and keeps them with it; a run file that is a symlink (config.toml -> /dev/zero) is refused.
TEST_F(FlRun, OverwriteNeverFollowsLinksAndForeignFoldersAreRefused) {
  run(tiny_config(), "other", 1, {"repeat=2", "rounds=1"});
  std::filesystem::create_directories(dir_ / "linked");
  std::filesystem::create_directory_symlink(dir_ / "other" / "seed-7", dir_ / "linked" / "seed-7");
  RunOptions overwrite;
  overwrite.out_dir = (dir_ / "linked").string();
  overwrite.overwrite = true;
  expect_error(
      [&] {
        run_experiment(parse_config(tiny_config(), "tiny.toml", {"repeat=2", "rounds=1"}), overwrite);
      },
      {"seed-7", "symbolic link"});
  EXPECT_TRUE(std::filesystem::exists(dir_ / "other" / "seed-7" / "rounds.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "other" / "seed-7" / "checkpoint.safetensors") ||
              std::filesystem::exists(dir_ / "other" / "seed-7" / "timing.csv"));

  testing::write_text(dir_ / "mine" / "notes.txt", "a researcher's notes");
  expect_error([&] { run(tiny_config(), "mine", 1, {"rounds=1"}); }, {"notes.txt", "--overwrite"});
  EXPECT_FALSE(std::filesystem::exists(dir_ / "mine" / "config.toml"));  // refused before writing
  overwrite.out_dir = (dir_ / "mine").string();
  run_experiment(parse_config(tiny_config(), "tiny.toml", {"rounds=1"}), overwrite);
  EXPECT_EQ(read_text_file((dir_ / "mine" / "notes.txt").string()), "a researcher's notes");
  EXPECT_TRUE(std::filesystem::exists(dir_ / "mine" / "rounds.csv"));

  std::filesystem::create_directories(dir_ / "zero");
  std::filesystem::create_symlink("/dev/zero", dir_ / "zero" / "config.toml");
  expect_error([&] { run(tiny_config(), "zero", 1, {"rounds=1"}, /*resume=*/true); }, {"config.toml", "symbolic link"});
}

// A FIFO in place of a results file used to hang --resume (a read blocks until a writer comes); only
// regular files are read now, each refusal naming the file (issue 42 item 6).
TEST_F(FlRun, ResumeRefusesFifosInsteadOfHanging) {
  run(tiny_config(), "f", 1, {"rounds=2", "run.checkpoint_every=1"});
  for (const char* name : {"config.toml", "checkpoint.safetensors"}) {
    const std::filesystem::path path = dir_ / "f" / name, saved = dir_ / (std::string(name) + ".saved");
    std::filesystem::rename(path, saved);
    ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
    expect_error([&] { run(tiny_config(), "f", 1, {"rounds=3"}, /*resume=*/true); }, {name, "regular file"});
    std::filesystem::remove(path);
    std::filesystem::rename(saved, path);
  }
  run(tiny_config(), "f", 1, {"rounds=3"}, /*resume=*/true);
}

// A results folder is one process's: while a run (here: a held lock) owns it, another refuses in one line
// before touching it; once released, the folder can be used again.
TEST_F(FlRun, ASecondProcessOnTheSameFolderIsRefused) {
  run(tiny_config(), "busy", 1, {"rounds=1"});
  {
    const ResultsFolderLock held((dir_ / "busy").string());
    // flock locks are per open file description: a second open in this process contends like another process.
    expect_error([&] { run(tiny_config(), "busy", 1, {"rounds=2"}, /*resume=*/true); },
                 {"in use by another bastion process"});
    testing::write_text(dir_ / "busy" / "checkpoint.safetensors.tmp.123", "another run's half-written file");
    expect_error([&] { run(tiny_config(), "busy", 1, {"rounds=2"}, /*resume=*/true); }, {"in use"});
    EXPECT_TRUE(std::filesystem::exists(dir_ / "busy" / "checkpoint.safetensors.tmp.123"));  // not swept
  }
  run(tiny_config(), "busy", 1, {"rounds=2"}, /*resume=*/true);
  EXPECT_EQ(parse_rounds_csv(file("busy", "rounds.csv")).size(), 2u);
}

// A learning rate of 100 (the maximum) makes the MLP's weights overflow to Inf/NaN within the first steps.
TEST_F(FlRun, NonFiniteUploadsAreRejectedAndCounted) {
  const std::vector<std::string> diverge = {"clients.sgd.lr=100", "clients.sgd.momentum=0", "rounds=2", "eval.every=1"};
  run(tiny_config(), "nan", 1, diverge);
  const std::vector<RoundRecord> records = parse_rounds_csv(file("nan", "rounds.csv"));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_GT(records[0].rejected + records[1].rejected, 0);
  for (const RoundRecord& r : records) EXPECT_TRUE(std::isfinite(r.loss)) << "a rejected upload reached the model";
  expect_error(
      [&] {
        run(tiny_config(), "fail", 1, {diverge[0], diverge[1], diverge[2], "server.on_invalid=fail"});
      },
      {"NaN or Inf", "on_invalid"});
}

TEST_F(FlRun, RepeatRunsEverySeedInItsOwnFolder) {
  const std::vector<RunSummary> summaries = run(tiny_config(), "rep", 1, {"repeat=2", "rounds=2"});
  ASSERT_EQ(summaries.size(), 2u);
  EXPECT_EQ(summaries[0].seed, 7u);
  EXPECT_EQ(summaries[1].seed, 8u);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "rep" / "seed-7" / "rounds.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "rep" / "seed-8" / "rounds.csv"));
  EXPECT_NE(file("rep/seed-7", "rounds.csv"), file("rep/seed-8", "rounds.csv"));
}

TEST_F(FlRun, CliPrintsProgressAndTheSummaryLineLast) {
  testing::write_text(dir_ / "tiny.toml", tiny_config());
  const testing::RunResult result = testing::run_bastion("run " + (dir_ / "tiny.toml").string() + " --out " +
                                                         (dir_ / "cli").string() + " --set rounds=2");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("round 2/2"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("curves.svg"), std::string::npos);
  const std::string last = result.output.substr(result.output.rfind("acc="));
  EXPECT_EQ(last.find('\n'), last.size() - 1) << "the summary must be the last line: " << last;
  EXPECT_NE(last.find("asr="), std::string::npos);
  const testing::RunResult bad =
      testing::run_bastion("run " + (dir_ / "tiny.toml").string() + " --set clients.sgd.lrr=1");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("clients.sgd.lrr"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace bastion

namespace bastion {
namespace {

// Plots of one preset's runs used to share the base config's name as their title (issue 41 item 5).
TEST(RunTitle, NamesTheRulesTheAttacksAndTheDescription) {
  const ExperimentConfig plain = testing::TinyRun{}.config();
  EXPECT_EQ(run_title(plain), "tiny: sgd clients, fedavg server");
  const ExperimentConfig attacked = testing::TinyRun{
      {"clients.rule=fedrep", "server.rule=median", "attack.names=[\"badnets\", \"scale\"]", "attack.malicious_count=2",
       "description=\"row A\""}}.config();
  EXPECT_EQ(run_title(attacked), "tiny: fedrep clients, median server, attack badnets + scale (row A)");
}

}  // namespace
}  // namespace bastion
