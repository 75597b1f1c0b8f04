// clients.csv (issue 41 item 2): one row per client and evaluated round with its sampling, its identity,
// the server rule's verdict and its own model's figures; consistent with rounds.csv's summaries, the same
// after a kill and resume, and written only when asked for (eval.clients_csv).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "fl/metrics/results.h"
#include "fl_test_support.h"

namespace bastion {
namespace {

using testing::TinyRun;
using FlClientsCsv = testing::FlRunTest;

// kTinyRun (12 clients, 4 a round, every round evaluated) under BadNets with personalised evaluation.
TinyRun attacked_personal_run() {
  return {{"rounds=3", "clients.rule=fedavg-ft", "eval.personalized=true", "data.local_test=like-train",
           "attack.names=[\"badnets\"]", "attack.malicious_count=2", "attack.malicious_per_round=1",
           "attack.badnets.per_batch=4", "server.rule=multi-krum", "clients.per_round=6"}};
}

TEST_F(FlClientsCsv, RowsAgreeWithTheRoundsSummaries) {
  run(attacked_personal_run(), "a", 1);
  const std::vector<ClientRow> rows = parse_clients_csv(file("a", "clients.csv"));
  const std::vector<RoundRecord> rounds = parse_rounds_csv(file("a", "rounds.csv"));
  ASSERT_EQ(rows.size(), 12u * rounds.size());
  for (size_t r = 0; r < rounds.size(); ++r) {
    int sampled = 0, malicious = 0, judged = 0, flagged_malicious = 0, malicious_sampled = 0;
    double acc_sum = 0.0;
    for (size_t k = 0; k < 12; ++k) {
      const ClientRow& row = rows[r * 12 + k];
      EXPECT_EQ(row.round, rounds[r].round);
      EXPECT_EQ(row.client, static_cast<int64_t>(k));
      sampled += row.sampled;
      malicious += row.malicious;
      flagged_malicious += row.flagged && row.malicious;
      malicious_sampled += row.sampled && row.malicious;
      if (row.malicious) {
        EXPECT_TRUE(std::isnan(row.p_acc)) << "attackers are not judged";
      }
      if (!std::isnan(row.p_acc)) {
        ++judged;
        acc_sum += row.p_acc;
        EXPECT_GT(row.samples, 0);
      }
    }
    EXPECT_EQ(sampled, 6);  // every round evaluated: the round's sample
    EXPECT_EQ(malicious, 2);
    EXPECT_EQ(malicious_sampled, rounds[r].malicious);
    EXPECT_EQ(judged, rounds[r].personal.clients);
    EXPECT_NEAR(acc_sum / judged, rounds[r].personal.acc.mean, 1e-5);  // 6-digit cells
    // client_fnr is the share of malicious clients whose latest verdict is "not flagged"
    if (!std::isnan(rounds[r].client_detection.fnr)) {
      EXPECT_NEAR(1.0 - flagged_malicious / 2.0, rounds[r].client_detection.fnr, 1e-5);
    }
  }
}

// Evaluated every other round and killed after round 3 (between evaluations): the resumed run's rows,
// "sampled since the last evaluation" included, are the uninterrupted run's.
TEST_F(FlClientsCsv, KilledBetweenEvaluationsAndResumedWritesTheSameFile) {
  const TinyRun spec = attacked_personal_run().with({"rounds=4", "eval.every=2", "run.checkpoint_every=1"});
  run(spec, "whole", 1);
  run(spec, "resumed", 1, {}, false, /*stop_after=*/3);
  run(spec, "resumed", 2, {}, /*resume=*/true);
  EXPECT_EQ(file("whole", "clients.csv"), file("resumed", "clients.csv"));
  int sampled = 0;
  for (const ClientRow& row : parse_clients_csv(file("whole", "clients.csv"))) sampled += row.round == 4 && row.sampled;
  EXPECT_GE(sampled, 6);  // rounds 3 and 4's samples
}

TEST_F(FlClientsCsv, WrittenOnlyWhenAskedOrUseful) {
  run(TinyRun{{"rounds=1"}}, "plain", 1);  // no attack, no personalised evaluation: auto writes none
  EXPECT_FALSE(std::filesystem::exists(dir_ / "plain" / "clients.csv"));
  run(TinyRun{{"rounds=1", "eval.clients_csv=on"}}, "on", 1);
  const std::vector<ClientRow> rows = parse_clients_csv(file("on", "clients.csv"));
  ASSERT_EQ(rows.size(), 12u);
  EXPECT_TRUE(std::isnan(rows[0].p_acc));
  run(attacked_personal_run().with({"eval.clients_csv=off"}), "off", 1);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "off" / "clients.csv"));
}

TEST(ClientsCsv, RoundTripsAndRefusesMalformedRows) {
  const std::vector<ClientRow> rows = {{3, 0, true, false, false, 0.75, kNoValue, 40}, {3, 1, false, true, true}};
  const std::string text = clients_csv(rows);
  EXPECT_EQ(text,
            "round,client,sampled,malicious,flagged,p_acc,p_asr,samples\n3,0,1,0,0,0.750000,,40\n3,1,0,1,1,,,0\n");
  const std::vector<ClientRow> back = parse_clients_csv(text);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].p_acc, 0.75);
  EXPECT_TRUE(std::isnan(back[1].p_acc));
  EXPECT_TRUE(back[1].flagged);
  testing::expect_error([] { parse_clients_csv("round,client\n"); }, {"clients.csv: header"});
  testing::expect_error(
      [] { parse_clients_csv("round,client,sampled,malicious,flagged,p_acc,p_asr,samples\n1,2,3\n"); },
      {"malformed row"});
  testing::expect_error(
      [] { parse_clients_csv("round,client,sampled,malicious,flagged,p_acc,p_asr,samples\n1,2,1,0,0,x,,4\n"); },
      {"'x' is not a number"});
}

// partition.csv (issue 41 item 1, the data each client used): one row per client, its class counts sum to
// its size, no own test split under local_test = like-train, the attackers are summary.json's, and a
// resumed run writes the same file.
TEST_F(FlClientsCsv, PartitionCsvNamesEachClientsDataAndItsAttackers) {
  const TinyRun spec = attacked_personal_run().with({"run.checkpoint_every=1"});
  const std::vector<RunSummary> summaries = run(spec, "whole", 1);
  std::istringstream csv(file("whole", "partition.csv"));
  std::string line;
  std::getline(csv, line);
  ASSERT_EQ(line.rfind("client,size,test_size,malicious,class_0,", 0), 0u) << line;
  std::vector<int64_t> malicious;
  int64_t clients = 0, total = 0;
  while (std::getline(csv, line)) {
    std::vector<int64_t> cells;
    std::istringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(std::stoll(cell));
    ASSERT_GE(cells.size(), 5u) << line;
    EXPECT_EQ(cells[0], clients++);
    int64_t classes = 0;
    for (size_t k = 4; k < cells.size(); ++k) classes += cells[k];
    EXPECT_EQ(classes, cells[1]) << line;
    EXPECT_EQ(cells[2], 0) << "like-train deals the global test set: no own split (clients.csv has those sizes)";
    if (cells[3] == 1) malicious.push_back(cells[0]);
    total += cells[1] + cells[2];
  }
  EXPECT_EQ(clients, 12);
  std::vector<int64_t> attackers = summaries[0].malicious_clients;
  std::sort(attackers.begin(), attackers.end());
  EXPECT_EQ(malicious, attackers);
  EXPECT_EQ(malicious.size(), 2u);
  EXPECT_GT(total, 0);
  run(spec, "resumed", 1, {}, false, /*stop_after=*/2);
  run(spec, "resumed", 2, {}, /*resume=*/true);
  EXPECT_EQ(file("whole", "partition.csv"), file("resumed", "partition.csv"));
}

}  // namespace
}  // namespace bastion
