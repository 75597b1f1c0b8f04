// `bastion run` when its files cannot be written: a read-only output folder, a file-size limit
// (ulimit -f: writes fail with EFBIG once SIGXFSZ is ignored) and a full disk (a small tmpfs, where a
// private mount namespace can be made). Each must exit 1 with one clear error line, leave the files of
// the previous run byte for byte as they were (no half-written file, no temporary left), and a later
// resume without the obstacle must finish the run as if nothing had happened.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <string>

#include "data/idx.h"
#include "fl/metrics/results.h"
#include "tests/test_support.h"

using namespace bastion;
using namespace bastion::testing;

namespace {

// 20 clients on the synthetic set, a checkpoint every round: about 0.4 MB of checkpoint (the MLP's
// ~106k floats) against a few kB for every other file, so a 100 kB limit stops the checkpoint only.
constexpr const char* kConfig = R"(name = "write-failures"
seed = 4
rounds = 2
[data]
dataset = "synthetic"
clients = 20
[model]
name = "mlp"
[clients]
per_round = 4
[clients.sgd]
batch = 16
lr = 0.05
[eval]
every = 1
batch = 256
[run]
checkpoint_every = 1
)";

// 200 blocks: 100 kB where /bin/sh counts 512-byte blocks (dash), 200 kB where it counts kB (bash).
constexpr const char* kFileSizeLimit = "ulimit -f 200;";

class CliWriteFailures : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    write_text(dir_ / "run.toml", kConfig);
  }
  // `bastion run` of the test config into folder `out`, the command line starting with `wrapper`
  // ("ulimit -f 200;", "setpriv ..." or "").
  RunResult run(const std::string& out, const std::string& extra, const std::string& wrapper = "") {
    return run_shell(wrapper + " " + BASTION_BINARY + " run " + path("run.toml") + " --out " + path(out) + " --quiet " +
                     extra + " 2>&1");
  }
  // Every regular file of a folder with its bytes.
  static std::map<std::string, Bytes> files(const fs::path& dir) {
    std::map<std::string, Bytes> out;
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_regular_file()) out[entry.path().filename().string()] = read_raw(entry.path());
    return out;
  }
  static int temporaries(const fs::path& dir) {
    int count = 0;
    for (const auto& entry : fs::directory_iterator(dir))
      count += entry.path().filename().string().find(".tmp.") != std::string::npos;
    return count;
  }
  // After a failed 4-round resume: the run finishes when resumed again and equals an uninterrupted one.
  void expect_resume_finishes_the_run(const std::string& out) {
    ASSERT_EQ(run(out, "--resume --set rounds=4").exit_code, 0);
    ASSERT_EQ(run("whole", "--set rounds=4").exit_code, 0);
    EXPECT_EQ(read_text_file(path(out + "/rounds.csv")), read_text_file(path("whole/rounds.csv")));
  }
};

// Root ignores directory permissions: the test then runs the binary as user nobody (setpriv), or skips.
std::string unprivileged_prefix() {
  if (geteuid() != 0) return "";
  const std::string prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups";
  const bool works = run_shell(prefix + " " + BASTION_BINARY + " --help >/dev/null 2>&1").exit_code == 0;
  return works ? prefix : "skip";
}

}  // namespace

TEST_F(CliWriteFailures, ReadOnlyFolderIsAClearErrorAndChangesNothing) {
  const std::string prefix = unprivileged_prefix();
  if (prefix == "skip") GTEST_SKIP() << "running as root without a working setpriv: permissions do not apply";
  ASSERT_EQ(run("out", "").exit_code, 0);
  fs::create_directories(dir_ / "empty");
  const std::map<std::string, Bytes> before = files(dir_ / "out");
  fs::permissions(dir_ / "out", fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::remove);
  fs::permissions(dir_ / "empty", fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::remove);
  const RunResult resumed = run("out", "--resume --set rounds=4", prefix);
  const RunResult fresh = run("empty", "", prefix);
  fs::permissions(dir_ / "out", fs::perms::owner_write, fs::perm_options::add);
  fs::permissions(dir_ / "empty", fs::perms::owner_write, fs::perm_options::add);
  for (const RunResult& result : {resumed, fresh}) {
    EXPECT_EQ(result.exit_code, 1) << result.output;
    EXPECT_NE(result.output.find("bastion: error: cannot write"), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("config.toml"), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("Permission denied (the folder is not writable)"), std::string::npos) << result.output;
  }
  EXPECT_EQ(files(dir_ / "out"), before);
  EXPECT_TRUE(fs::is_empty(dir_ / "empty"));
  expect_resume_finishes_the_run("out");
}

// Without SIGXFSZ ignored the kernel kills the process mid-write (the shell says 153; a temporary is left).
TEST_F(CliWriteFailures, FileSizeLimitStopsAtTheCheckpointAndKeepsThePreviousOne) {
  ASSERT_EQ(run("out", "").exit_code, 0);
  const std::map<std::string, Bytes> before = files(dir_ / "out");
  const RunResult limited = run("out", "--resume --set rounds=4", kFileSizeLimit);
  EXPECT_EQ(limited.exit_code, 1) << limited.output;
  EXPECT_NE(limited.output.find("bastion: error: cannot write '" + path("out/checkpoint.safetensors") + "'"),
            std::string::npos)
      << limited.output;
  EXPECT_NE(limited.output.find("File too large (over the file-size limit: see ulimit -f)"), std::string::npos)
      << limited.output;
  EXPECT_NE(limited.output.find("is unchanged"), std::string::npos) << limited.output;
  EXPECT_EQ(temporaries(dir_ / "out"), 0);
  EXPECT_EQ(files(dir_ / "out").at("checkpoint.safetensors"), before.at("checkpoint.safetensors"));
  // rounds.csv was rewritten whole for round 3 before the checkpoint failed: it parses.
  EXPECT_GE(parse_rounds_csv(read_text_file(path("out/rounds.csv"))).size(), 2u);
  expect_resume_finishes_the_run("out");
}

TEST_F(CliWriteFailures, FullDiskStopsAtTheCheckpointAndKeepsThePreviousOne) {
  fs::create_directories(dir_ / "mnt");
  if (run_shell("unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs " + path("mnt") + "' 2>&1").exit_code != 0)
    GTEST_SKIP() << "cannot mount a tmpfs in a private mount namespace here (needs CAP_SYS_ADMIN)";
  ASSERT_EQ(run("out", "").exit_code, 0);
  const std::map<std::string, Bytes> before = files(dir_ / "out");
  uintmax_t used = 0;
  for (const auto& [name, bytes] : before) used += bytes.size();
  // Room for the previous files and 64 kB more: the small files can be rewritten, a new checkpoint cannot.
  const std::string size = std::to_string(used / 1024 + 64 + 4 * before.size()) + "k";
  fs::create_directories(dir_ / "after");
  const std::string inside = "mount -t tmpfs -o size=" + size + " tmpfs " + path("mnt") + " && cp -a " + path("out") +
                             "/. " + path("mnt") + " && " + BASTION_BINARY + " run " + path("run.toml") + " --out " +
                             path("mnt") + " --quiet --resume --set rounds=4; status=$?; cp -a " + path("mnt") + "/. " +
                             path("after") + "; exit $status";
  const RunResult full = run_shell("unshare -m sh -c '" + inside + "' 2>&1");
  EXPECT_EQ(full.exit_code, 1) << full.output;
  EXPECT_NE(full.output.find("bastion: error: cannot write '" + path("mnt/checkpoint.safetensors") + "'"),
            std::string::npos)
      << full.output;
  EXPECT_NE(full.output.find("No space left on device (the disk is full)"), std::string::npos) << full.output;
  EXPECT_EQ(temporaries(dir_ / "after"), 0);
  EXPECT_EQ(files(dir_ / "after").at("checkpoint.safetensors"), before.at("checkpoint.safetensors"));
  EXPECT_GE(parse_rounds_csv(read_text_file(path("after/rounds.csv"))).size(), 2u);
  fs::remove_all(dir_ / "out");
  fs::rename(dir_ / "after", dir_ / "out");
  expect_resume_finishes_the_run("out");
}
