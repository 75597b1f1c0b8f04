// mpirun -np K bastion run (fl/core/mpi_run.h, fl/core/spread_round.h): one experiment's clients spread
// over K ranks write the same rounds.csv as one process, for FedAvg + BadNets, Ditto + FoolsGold +
// BadNets with personalised evaluation (client state, server state), FedRep (a personal head) and
// FedSMOO (a method server, two seeds); a job stopped or killed resumes with the same or another K. The
// packing of what ranks exchange is checked in this process, without MPI. The mpirun cases are skipped
// when the build has no MPI or CMake found no mpiexec; they pass --oversubscribe --allow-run-as-root as
// the MpiGrid tests do (CI runs as root on 2 cores).
#include <gtest/gtest.h>

#include <filesystem>
#include <tuple>

#include "data/idx.h"
#include "fl/core/mpi_grid.h"
#include "fl/core/spread_round.h"
#include "tensor/error.h"
#include "test_support.h"

namespace bastion {
namespace {

using testing::run_shell;

const std::string kCrash = std::string(BASTION_SOURCE_DIR) + "/configs/ci/crash.toml";
const std::string kFedSmoo = std::string(BASTION_SOURCE_DIR) + "/configs/ci/crash-fedsmoo.toml";

// FedAvg (clients.rule = sgd) under BadNets, with checkpoints; FedRep by --set.
constexpr const char* kPlain = R"(name = "spread"
seed = 3
rounds = 6
[data]
dataset = "synthetic"
partition = "dirichlet:0.5"
clients = 12
min_size = 5
local_test = "like-train"
[model]
name = "mlp"
[clients]
rule = "sgd"
per_round = 5
[server]
rule = "fedavg"
[attack]
names = ["badnets"]
malicious_count = 2
malicious_per_round = 1
[attack.badnets]
per_batch = 4
[eval]
every = 1
batch = 256
[run]
checkpoint_every = 2
)";

class MpiRun : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    testing::write_text(dir_ / "plain.toml", kPlain);
  }
  bool mpi_available() const { return mpi_built() && std::string(BASTION_MPIEXEC).size() > 0; }
  // ranks = 0: no launcher at all.
  static std::string launcher(int ranks) {
    if (ranks == 0) return "";
    // As MpiGrid: no leak reports for MPI_Init's allocations, vader without the ptrace-based single copy.
    return "ASAN_OPTIONS=detect_leaks=0 OMPI_MCA_btl_vader_single_copy_mechanism=none " + std::string(BASTION_MPIEXEC) +
           " --oversubscribe --allow-run-as-root -np " + std::to_string(ranks) + " ";
  }
  std::string run_command(const std::string& config, const std::string& out, int ranks,
                          const std::string& extra) const {
    return launcher(ranks) + BASTION_BINARY + " run " + config + " --threads 1 --out " + path(out) + " " + extra;
  }
  testing::RunResult run(const std::string& config, const std::string& out, int ranks,
                         const std::string& extra = "") const {
    return run_shell(run_command(config, out, ranks, extra + " --overwrite") + " 2>&1");
  }
  std::string rounds(const std::string& out) const { return read_text_file(path(out + "/rounds.csv")); }
  // A 3-rank job of kCrash into "killed" (its output in killed.log), hit by `kill` (a shell command; $pid is
  // mpirun's) once its first checkpoint exists; prints "killed exit <mpirun's status>". Slow writes (fl
  // file_io's test hook) give the kill a window; the wait for the checkpoint is at most 60 s.
  testing::RunResult kill_once_checkpointed(const std::string& kill) const {
    return run_shell("BASTION_TEST_SLOW_WRITES=100 " + run_command(kCrash, "killed", 3, "--overwrite --quiet") + " >" +
                     path("killed.log") + " 2>&1 & pid=$!; for i in $(seq 600); do [ -f " +
                     path("killed/checkpoint.safetensors") + " ] && break; sleep 0.1; done; " + kill +
                     "; wait $pid; echo \"killed exit $?\"");
  }
  // One process, then 2 and 3 ranks: the same rounds.csv in every seed folder `seeds` ("" = the top).
  void expect_ranks_match_one_process(const std::string& config, const std::string& extra,
                                      const std::vector<std::string>& seeds = {""}) {
    const auto single = run(config, "one", 0, extra);
    ASSERT_EQ(single.exit_code, 0) << single.output;
    for (int ranks : {2, 3}) {
      const std::string out = "np" + std::to_string(ranks);
      const auto spread = run(config, out, ranks, extra);
      ASSERT_EQ(spread.exit_code, 0) << spread.output;
      EXPECT_NE(spread.output.find(" MB"), std::string::npos) << "bytes moved per round are logged";
      for (const std::string& seed : seeds)
        EXPECT_EQ(rounds(out + seed), rounds("one" + seed)) << ranks << " ranks, " << seed;
      EXPECT_TRUE(std::filesystem::exists(dir_ / out / "summary.json"));
    }
  }
};

TEST_F(MpiRun, FedAvgWithBadNetsMatchesOneProcess) {
  if (!mpi_available()) GTEST_SKIP() << "built without MPI (BASTION_MPI) or no mpiexec found";
  expect_ranks_match_one_process(path("plain.toml"), "");
}

// Ditto's personal models live on their owners; FoolsGold's histories on rank 0; personalised
// evaluation is spread over the ranks.
TEST_F(MpiRun, DittoFoolsGoldBadNetsWithPersonalEvaluationMatchesOneProcess) {
  if (!mpi_available()) GTEST_SKIP() << "built without MPI (BASTION_MPI) or no mpiexec found";
  expect_ranks_match_one_process(kCrash, "");
}

TEST_F(MpiRun, FedRepPersonalHeadsMatchOneProcess) {
  if (!mpi_available()) GTEST_SKIP() << "built without MPI (BASTION_MPI) or no mpiexec found";
  expect_ranks_match_one_process(path("plain.toml"), "--set clients.rule=fedrep --set eval.personalized=true");
}

// FedSMOO's method server (duals per client, a global correction) sends messages down and reads extra
// uploads; two seeds in seed-<s> folders.
TEST_F(MpiRun, FedSmooMethodServerMatchesOneProcess) {
  if (!mpi_available()) GTEST_SKIP() << "built without MPI (BASTION_MPI) or no mpiexec found";
  expect_ranks_match_one_process(kFedSmoo, "", {"/seed-11", "/seed-12"});
}

// Rank 0's checkpoint holds every client's state: 4 rounds on 2 ranks, resumed to 8 on 3 ranks and on
// one process, equal one uninterrupted run.
TEST_F(MpiRun, AStoppedRunResumesWithAnotherRankCount) {
  if (!mpi_available()) GTEST_SKIP() << "built without MPI (BASTION_MPI) or no mpiexec found";
  const auto whole = run(kCrash, "whole", 0);
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  for (const auto& [name, first, second] : {std::tuple{"a", 2, 3}, std::tuple{"b", 3, 0}}) {
    const auto part = run(kCrash, name, first, "--set rounds=4");
    ASSERT_EQ(part.exit_code, 0) << part.output;
    const auto rest = run_shell(run_command(kCrash, name, second, "--resume") + " 2>&1");
    ASSERT_EQ(rest.exit_code, 0) << rest.output;
    EXPECT_NE(rest.output.find("resumed seed 3 after round 4"), std::string::npos) << rest.output;
    EXPECT_EQ(rounds(name), rounds("whole")) << first << " then " << second << " ranks";
  }
}

// The job killed (SIGTERM to mpirun, which ends every rank) once a checkpoint exists, then resumed on
// another number of ranks: the same rounds as an uninterrupted run, wherever the kill fell.
TEST_F(MpiRun, AKilledJobResumesWithAnotherRankCount) {
  if (!mpi_available()) GTEST_SKIP() << "built without MPI (BASTION_MPI) or no mpiexec found";
  const auto whole = run(kCrash, "whole", 0);
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const auto kill = kill_once_checkpointed("kill -TERM $pid");
  ASSERT_NE(kill.output.find("killed"), std::string::npos) << kill.output;
  ASSERT_TRUE(std::filesystem::exists(dir_ / "killed" / "checkpoint.safetensors"))
      << read_text_file(path("killed.log"));
  const auto rest = run_shell(run_command(kCrash, "killed", 2, "--resume") + " 2>&1");
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  EXPECT_EQ(rounds("killed"), rounds("whole"));
}

// One rank dies (SIGKILL to a rank, not to mpirun) once a checkpoint exists: mpirun stops the others and
// says which rank died, the job exits non-zero, and the run resumes from its last checkpoint to the rounds
// of an uninterrupted run (issue 42).
TEST_F(MpiRun, ARankThatDiesStopsTheJobAndTheRunResumes) {
  if (!mpi_available()) GTEST_SKIP() << "built without MPI (BASTION_MPI) or no mpiexec found";
  const auto whole = run(kCrash, "whole", 0);
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  // mpirun's children are the ranks; the last one started is not rank 0 (the server).
  const auto kill = kill_once_checkpointed("kill -KILL $(pgrep -P $pid | sort -n | tail -1)");
  ASSERT_NE(kill.output.find("exit "), std::string::npos) << kill.output;
  EXPECT_EQ(kill.output.find("exit 0"), std::string::npos) << kill.output << read_text_file(path("killed.log"));
  EXPECT_NE(read_text_file(path("killed.log")).find("signal 9"), std::string::npos)
      << read_text_file(path("killed.log"));
  ASSERT_TRUE(std::filesystem::exists(dir_ / "killed" / "checkpoint.safetensors"));
  const auto rest = run_shell(run_command(kCrash, "killed", 2, "--resume") + " 2>&1");
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  EXPECT_EQ(rounds("killed"), rounds("whole"));
}

TEST_F(MpiRun, ABuildWithoutMpiRefusesALaunchersSeveralProcesses) {
  if (mpi_built()) GTEST_SKIP() << "this build has MPI; the refusal is the no-MPI stub's";
  const auto result =
      run_shell("OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 " + run_command(kCrash, "out", 0, "") + " 2>&1");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("built without MPI"), std::string::npos) << result.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out" / "rounds.csv")) << "nothing may run";
}

// Packing, in this process: 3 ranks, 5 sampled clients (rank 0 owns 3 and 6, rank 1 owns 1 and 4, rank 2
// owns 5); what rank 0 scatters reaches each owner's rows, what owners gather lands in the sampled rows.
TEST(SpreadRound, InputsAndOutputsReachTheirRows) {
  const std::vector<int64_t> sampled = {3, 1, 5, 4, 6};
  EXPECT_EQ(owned_rows(sampled, 0, 3), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(owned_rows(sampled, 1, 3), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(owned_rows(sampled, 2, 3), (std::vector<int64_t>{2}));
  const int64_t D = 2, W = 1, m = 5;
  const std::vector<float> starts = {0, 0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f, 4, 4.5f};  // row i: i, i + 0.5
  std::vector<ClientMessage> messages(5);
  for (size_t i = 0; i < 5; ++i) messages[i]["h"] = {static_cast<float>(10 * i)};
  const std::vector<Bytes> parts = pack_client_inputs(sampled, 3, starts, D, messages);
  ASSERT_EQ(parts.size(), 3u);
  std::vector<float> got_starts;
  std::vector<ClientMessage> got_messages;
  unpack_client_inputs(parts[1], owned_rows(sampled, 1, 3), m, D, got_starts, got_messages);
  ASSERT_EQ(got_starts.size(), 10u);
  EXPECT_EQ(got_starts[2], 1.0f);  // row 1
  EXPECT_EQ(got_starts[7], 3.5f);  // row 3
  EXPECT_EQ(got_starts[4], 0.0f);  // row 2 is rank 2's
  EXPECT_EQ(got_messages[3].at("h"), std::vector<float>{30.0f});
  EXPECT_TRUE(got_messages[2].empty());
  // A rank that reads another rank's part is told the ranks disagree.
  EXPECT_THROW(unpack_client_inputs(parts[2], owned_rows(sampled, 1, 3), m, D, got_starts, got_messages), Error);

  std::vector<float> uploads = {0, 1, 2, 3, 4};
  std::vector<ClientResult> results(5);
  results[3].train_loss = 0.25;
  results[3].extra_upload = {7.0f};
  const Bytes up = pack_client_outputs(owned_rows(sampled, 1, 3), uploads, W, results);
  std::vector<float> server_uploads(5, -1.0f);
  std::vector<ClientResult> server_results(5);
  unpack_client_outputs({Bytes{}, up}, W, server_uploads, server_results);
  EXPECT_EQ(server_uploads, (std::vector<float>{-1, 1, -1, 3, -1}));
  EXPECT_EQ(server_results[3].train_loss, 0.25);
  EXPECT_EQ(server_results[3].extra_upload, std::vector<float>{7.0f});
}

TEST(SpreadRound, ClientStatesOfEveryOwnerReachRankZero) {
  std::vector<ClientState> states(4);  // rank 1 of 2 owns clients 1 and 3
  states[1].vectors["head"] = {1, 2};
  states[1].scalars["layer"] = 2.0;
  states[2].vectors["head"] = {9};  // rank 0's: not sent
  const Bytes part = pack_client_states(states, 1, 2);
  EXPECT_TRUE(pack_client_states(states, 0, 2).empty());
  std::vector<ClientState> server(4);
  unpack_client_states({Bytes{}, part}, server);
  EXPECT_EQ(server[1].vectors.at("head"), (std::vector<float>{1, 2}));
  EXPECT_EQ(server[1].scalars.at("layer"), 2.0);
  EXPECT_TRUE(server[2].vectors.empty());
  EXPECT_TRUE(server[3].vectors.empty());
}

}  // namespace
}  // namespace bastion
