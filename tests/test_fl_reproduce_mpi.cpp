// mpirun -np K bastion reproduce (fl/core/mpi_grid.h): K ranks write the same table and the same rounds
// as one process; a failed run is reported and the others complete; --resume skips finished runs; a build
// without MPI refuses a launcher's K > 1; other commands refuse K > 1. The mpirun cases are skipped when
// the build has no MPI or CMake found no mpiexec. CI runs them as root on 2 cores, hence
// --allow-run-as-root and --oversubscribe (3 ranks > 2 cores).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "fl/core/mpi_grid.h"
#include "data/idx.h"
#include "reproduce_test_support.h"
#include "test_support.h"

namespace bastion {
namespace {

using testing::run_shell;

constexpr const char* kBase = bastion::testing::kReproduceBase;

// Four runs for three ranks, so some rank asks for a second one.
constexpr const char* kPreset = R"(title = "A tiny grid"
paper = "nobody 2026"
base = "base.toml"
seeds = 2
quick = ["rounds=1"]
[[columns]]
name = "ACC"
metric = "p_acc"
[[columns]]
name = "global"
metric = "acc"
[[rows]]
name = "FedAvg"
set = ["clients.rule=sgd", "clients.sgd.epochs=1", "clients.sgd.batch=16"]
paper = [50.0, "-"]
[[rows]]
name = "FedRep"
set = ["clients.rule=fedrep", "clients.fedrep.batch=16"]
paper = [60, 10.5]
[[rows]]
name = "Ditto"
set = ["clients.rule=ditto", "clients.ditto.batch=16"]
paper = [1, 2]
[[rows]]
name = "FedAvg 2 epochs"
set = ["clients.rule=sgd", "clients.sgd.epochs=2", "clients.sgd.batch=16"]
paper = [50.0, "-"]
)";

// table.md without the lines that name the output folder (Run:) and the date, wall time and rank count.
std::string table_without_run_lines(const std::string& path) {
  std::istringstream in(read_text_file(path));
  std::string line, kept;
  while (std::getline(in, line))
    if (line.rfind("Run:", 0) != 0 && line.rfind("Date:", 0) != 0) kept += line + "\n";
  return kept;
}

class MpiGrid : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    testing::write_text(dir_ / "base.toml", kBase);
    testing::write_text(dir_ / "grid.toml", kPreset);
  }
  // Whether mpirun can run the grid here (the callers skip otherwise).
  bool mpi_available() const { return mpi_built() && std::string(BASTION_MPIEXEC).size() > 0; }
  testing::RunResult reproduce(const std::string& out, int ranks, const std::string& extra = "") const {
    std::string command = std::string(BASTION_BINARY) + " reproduce " + path("grid.toml") +
                          " --quick --threads 1 --out " + path(out) + extra + " 2>&1";
    if (ranks == 0) return run_shell(command);
    // detect_leaks=0: a sanitizer build reports MPI_Init's allocations as leaks. vader's single-copy
    // mechanism needs ptrace rights that containers often lack; "none" keeps the shared-memory path.
    return run_shell("ASAN_OPTIONS=detect_leaks=0 OMPI_MCA_btl_vader_single_copy_mechanism=none " +
                     std::string(BASTION_MPIEXEC) + " --oversubscribe --allow-run-as-root -np " +
                     std::to_string(ranks) + " " + command);
  }
  void expect_same_results(const std::string& a, const std::string& b) const {
    EXPECT_EQ(table_without_run_lines(path(a + "/table.md")), table_without_run_lines(path(b + "/table.md")));
    EXPECT_EQ(read_text_file(path(a + "/table.csv")), read_text_file(path(b + "/table.csv")));
    // Every run's rounds (timing.csv and summary.json carry wall times, so they differ).
    int compared = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir_ / a / "runs")) {
      if (entry.path().filename() != "rounds.csv") continue;
      const auto relative = std::filesystem::relative(entry.path(), dir_ / a);
      EXPECT_EQ(read_text_file(entry.path().string()), read_text_file((dir_ / b / relative).string())) << relative;
      ++compared;
    }
    EXPECT_EQ(compared, 8);  // 4 runs x 2 seeds
  }
};

TEST_F(MpiGrid, ThreeRanksWriteTheSameTableAndRoundsAsOneProcess) {
  if (!mpi_available()) GTEST_SKIP() << "built without MPI (BASTION_MPI) or no mpiexec found";
  const auto single = reproduce("one", 0);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto spread = reproduce("three", 3);
  ASSERT_EQ(spread.exit_code, 0) << spread.output;
  // Rank 0 alone prints: one header, one line per run naming its rank, one closing line.
  EXPECT_EQ(spread.output.find("reproduce grid"), spread.output.rfind("reproduce grid")) << spread.output;
  EXPECT_NE(spread.output.find("(rank "), std::string::npos) << spread.output;
  EXPECT_NE(spread.output.find("4 run(s), 0 skipped, 0 failed"), std::string::npos) << spread.output;
  EXPECT_NE(read_text_file(path("three/table.md")).find("on 3 MPI ranks"), std::string::npos);
  expect_same_results("one", "three");
}

// A run whose folder already holds results fails (no --resume, no --overwrite); the others complete, the
// table shows "error" in its row, the exit code is 1. --resume then skips every finished run.
TEST_F(MpiGrid, AFailedRunIsReportedAndTheOthersCompleteThenResumeSkipsThem) {
  if (!mpi_available()) GTEST_SKIP() << "built without MPI (BASTION_MPI) or no mpiexec found";
  ASSERT_EQ(reproduce("one", 0).exit_code, 0);
  std::filesystem::create_directories(dir_ / "three" / "runs");
  std::filesystem::copy(dir_ / "one" / "runs" / "fedrep", dir_ / "three" / "runs" / "fedrep",
                        std::filesystem::copy_options::recursive);
  const auto failed = reproduce("three", 3);
  EXPECT_NE(failed.exit_code, 0) << failed.output;
  EXPECT_NE(failed.output.find("fedrep (rank "), std::string::npos) << failed.output;
  EXPECT_NE(failed.output.find("FAILED: '"), std::string::npos) << failed.output;
  EXPECT_NE(failed.output.find("already holds results"), std::string::npos) << failed.output;
  EXPECT_EQ(failed.output.find(".cpp:"), std::string::npos) << "a run's failure line names no source file";
  EXPECT_NE(failed.output.find("3 run(s), 0 skipped, 1 failed"), std::string::npos) << failed.output;
  const std::string table = read_text_file(path("three/table.md"));
  EXPECT_NE(table.find("| FedRep | error |"), std::string::npos) << table;
  EXPECT_EQ(table.find("| Ditto | error |"), std::string::npos) << table;

  const auto resumed = reproduce("three", 3, " --resume");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("0 run(s), 4 skipped, 0 failed"), std::string::npos) << resumed.output;
  expect_same_results("one", "three");
}

TEST_F(MpiGrid, ABuildWithoutMpiRefusesALaunchersSeveralProcesses) {
  if (mpi_built()) GTEST_SKIP() << "this build has MPI; the refusal is the no-MPI stub's";
  // What mpirun -np 2 sets, without mpirun.
  const auto result = run_shell("OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 " + std::string(BASTION_BINARY) +
                                " reproduce " + path("grid.toml") + " --quick --out " + path("out") + " 2>&1");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("built without MPI"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("-DBASTION_MPI=ON"), std::string::npos) << result.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out" / "runs")) << "nothing may run";
}

// Any build: only reproduce and run divide their work, so `bastion train` under a launcher with K > 1
// refuses before it reads anything (the dataset named here does not exist).
TEST_F(MpiGrid, OtherCommandsRefuseSeveralProcesses) {
  const auto result = run_shell("PMI_SIZE=2 " + std::string(BASTION_BINARY) + " train --dataset none 2>&1");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("only `bastion reproduce`"), std::string::npos) << result.output;
  const auto alone = run_shell("PMI_SIZE=1 " + std::string(BASTION_BINARY) + " train --dataset none 2>&1");
  EXPECT_EQ(alone.output.find("only `bastion reproduce`"), std::string::npos) << alone.output;
}

// In the test process (no launcher) the grid runs in order on this thread, done right after each task.
TEST_F(MpiGrid, WithoutALauncherTasksRunInOrderEachFollowedByItsDone) {
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("PMI_SIZE");
  unsetenv("PMIX_SIZE");
  std::string trace;
  const GridWorld world = run_grid(
      3,
      [&](size_t i) {  // appended: GCC 12's -Wrestrict false positive on "t" + std::string
        trace.append("t").append(std::to_string(i));
        return GridOutcome{};
      },
      [&](size_t i, const GridOutcome&) { trace.append("d").append(std::to_string(i)); });
  EXPECT_EQ(trace, "t0d0t1d1t2d2");
  EXPECT_EQ(world.rank, 0);
  EXPECT_EQ(world.size, 1);
}

TEST_F(MpiGrid, LauncherSizeReadsOpenMpiThenPmiAndIgnoresGarbage) {
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("PMIX_SIZE");
  setenv("PMI_SIZE", "4", 1);
  EXPECT_EQ(launcher_size(), 4);
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  EXPECT_EQ(launcher_size(), 3);  // Open MPI's own variable first
  setenv("OMPI_COMM_WORLD_SIZE", "3x", 1);
  EXPECT_EQ(launcher_size(), 4);  // not a number: the next variable
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("PMI_SIZE");
  EXPECT_EQ(launcher_size(), 1);
}

// A device run takes GPU (node-local rank) mod (devices): the local rank comes from the launcher.
TEST_F(MpiGrid, LauncherLocalRankReadsOpenMpiThenMpichAndDefaultsToZero) {
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  unsetenv("PMI_LOCAL_RANK");
  setenv("MPI_LOCALRANKID", "2", 1);
  EXPECT_EQ(launcher_local_rank(), 2);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  EXPECT_EQ(launcher_local_rank(), 1);  // Open MPI's own variable first
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  unsetenv("MPI_LOCALRANKID");
  EXPECT_EQ(launcher_local_rank(), 0);
}

}  // namespace
}  // namespace bastion
