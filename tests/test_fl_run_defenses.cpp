// Robust server rules inside the run loop, on the seeded synthetic set (a few seconds): server data
// (fltrust), a wrapper with its inner rule, a rule restricted to the body (server.apply_to), a stateful
// rule (foolsgold) through kill + resume, and the detection counters the flags feed.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "data/idx.h"
#include "fl/core/config.h"
#include "fl/core/experiment.h"
#include "fl_test_support.h"
#include "test_support.h"

namespace bastion {
namespace {


// 20 clients, 5 per round, 2 sign-flip attackers forced into every round; the server holds out 10 %.
std::string tiny_defense_config(const std::string& server) {
  return R"(
name = "tiny-defense"
seed = 3
rounds = 6
[data]
dataset = "synthetic"
partition = "dirichlet:0.5"
clients = 20
min_size = 5
server_fraction = 0.1
[model]
name = "mlp"
[clients]
per_round = 5
[clients.sgd]
epochs = 1
batch = 16
lr = 0.05
[attack]
names = ["sign-flip"]
malicious_count = 4
malicious_per_round = 2
[eval]
every = 2
batch = 128
[run]
checkpoint_every = 2
)" + server;
}


class FlRunDefenses : public testing::FlRunTest {
 protected:
  std::string rounds(const std::string& out) { return file(out, "rounds.csv"); }
};

int64_t detections(const std::vector<RoundRecord>& records) {
  int64_t total = 0;
  for (const RoundRecord& r : records) total += r.true_positive + r.false_positive + r.true_negative + r.false_negative;
  return total;
}

TEST_F(FlRunDefenses, FlTrustTrainsOnTheServerSplitAndFillsTheDetectionCounters) {
  run(tiny_defense_config("[server]\nrule = \"fltrust\"\n"), "fltrust", 2);
  const std::vector<RoundRecord> records = parse_rounds_csv(rounds("fltrust"));
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(detections(records), 6 * 5);  // every upload of every round judged
  EXPECT_TRUE(std::isfinite(records.back().acc));
}

TEST_F(FlRunDefenses, BucketingAroundMedianIsDeterministicAcrossThreadCounts) {
  const std::string toml = tiny_defense_config("[server]\nrule = \"bucketing\"\ninner = \"median\"\n");
  run(toml, "one", 1);
  run(toml, "two", 2);
  EXPECT_EQ(rounds("one"), rounds("two"));
}

TEST_F(FlRunDefenses, MultiKrumOnTheBodyOnlyKeepsTheHeadsWhenAsked) {
  // 5 uploads: Krum's n > 2f + 2 allows f = 1 only (the forced 2 attackers would need n > 6).
  const std::string krum = "[server.multi-krum]\nf = 1\n";
  const std::string toml =
      tiny_defense_config("[server]\nrule = \"multi-krum\"\napply_to = [\"body\"]\nrest = \"keep\"\n" + krum);
  run(toml, "body", 1);
  run(toml, "body2", 2);
  EXPECT_EQ(rounds("body"), rounds("body2"));
  EXPECT_GT(detections(parse_rounds_csv(rounds("body"))), 0);
  // A whole-model multi-krum is a different experiment: the head moves too.
  run(tiny_defense_config("[server]\nrule = \"multi-krum\"\n" + krum), "all", 1);
  EXPECT_NE(rounds("body"), rounds("all"));
}

TEST_F(FlRunDefenses, FoolsGoldHistoryIsCheckpointedSoAResumedRunMatches) {
  const std::string toml = tiny_defense_config("[server]\nrule = \"foolsgold\"\n");
  run(toml, "whole", 1);
  run(toml, "resumed", 1, {}, false, /*stop_after=*/3);
  run(toml, "resumed", 2, {}, /*resume=*/true);
  EXPECT_EQ(rounds("whole"), rounds("resumed"));
}

}  // namespace
}  // namespace bastion
