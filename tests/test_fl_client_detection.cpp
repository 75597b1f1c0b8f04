// Per-client detection (fl/metrics/metrics.h record_verdicts / client_detection_rates; SPEC §4, FedCAP
// Table III): constructed verdict sequences with known rates, rounds.csv / summary.json columns, the
// checkpoint's verdict table, and a run with a flagging rule that is killed and resumed or run on 1 and 2
// threads (identical files).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fl/core/checkpoint.h"
#include "fl/metrics/metrics.h"
#include "fl/metrics/results.h"
#include "fl_test_support.h"
#include "test_support.h"

namespace bastion {
namespace {

using testing::expect_error;

// 6 clients, 2 and 5 malicious.
const std::vector<uint8_t> kMalicious = {0, 0, 1, 0, 0, 1};

TEST(FlClientDetection, NeverJudgedClientsCountAsNotFlagged) {
  std::vector<uint8_t> latest(6, 0);
  const DetectionRates none = client_detection_rates(latest, kMalicious);
  EXPECT_DOUBLE_EQ(none.dacc, 4.0 / 6.0);  // the 4 benign right, the 2 malicious missed
  EXPECT_DOUBLE_EQ(none.fpr, 0.0);
  EXPECT_DOUBLE_EQ(none.fnr, 1.0);
  // Round 1 judges clients 2 and 3 only, flagging both: 5 is still never judged.
  record_verdicts(latest, std::vector<int64_t>{2, 3}, std::vector<uint8_t>{1, 1});
  const DetectionRates one = client_detection_rates(latest, kMalicious);
  EXPECT_DOUBLE_EQ(one.dacc, 4.0 / 6.0);  // 2 caught; 3 wrongly flagged, 5 missed
  EXPECT_DOUBLE_EQ(one.fpr, 1.0 / 4.0);
  EXPECT_DOUBLE_EQ(one.fnr, 1.0 / 2.0);
}

TEST(FlClientDetection, TheLatestVerdictReplacesTheEarlierOne) {
  std::vector<uint8_t> latest(6, 0);
  record_verdicts(latest, std::vector<int64_t>{0, 2, 5}, std::vector<uint8_t>{1, 1, 0});  // round 1
  record_verdicts(latest, std::vector<int64_t>{0, 1}, std::vector<uint8_t>{0, 0});        // round 2 keeps 0
  EXPECT_EQ(latest, (std::vector<uint8_t>{0, 0, 1, 0, 0, 0}));  // 2's flag stands: not judged again
  const DetectionRates rates = client_detection_rates(latest, kMalicious);
  EXPECT_DOUBLE_EQ(rates.dacc, 5.0 / 6.0);
  EXPECT_DOUBLE_EQ(rates.fpr, 0.0);  // client 0, flagged in round 1 and kept in round 2, is not flagged
  EXPECT_DOUBLE_EQ(rates.fnr, 0.5);
}

// A permanent removal (FedCAP) is the same flag given every round the client is judged.
TEST(FlClientDetection, RepeatedFlagsAndEmptyVerdicts) {
  std::vector<uint8_t> latest(6, 0);
  for (int round = 0; round < 3; ++round)
    record_verdicts(latest, std::vector<int64_t>{2, 5}, std::vector<uint8_t>{1, 1});
  EXPECT_DOUBLE_EQ(client_detection_rates(latest, kMalicious).dacc, 1.0);
  // A rule that flags nobody (empty verdicts) clears the clients it judged, and only those.
  record_verdicts(latest, std::vector<int64_t>{5}, std::vector<uint8_t>{});
  EXPECT_EQ(latest, (std::vector<uint8_t>{0, 0, 1, 0, 0, 0}));
}

TEST(FlClientDetection, RatesWithoutMaliciousOrWithBadInput) {
  const DetectionRates rates = client_detection_rates({1, 0, 0}, {0, 0, 0});
  EXPECT_TRUE(std::isnan(rates.fnr));  // no malicious client: no miss rate
  EXPECT_DOUBLE_EQ(rates.fpr, 1.0 / 3.0);
  std::vector<uint8_t> latest(3, 0);
  expect_error([&] { record_verdicts(latest, std::vector<int64_t>{3}, std::vector<uint8_t>{1}); }, {"client 3"});
  expect_error([&] { record_verdicts(latest, std::vector<int64_t>{0, 1}, std::vector<uint8_t>{1}); }, {"1 verdicts"});
  expect_error([&] { client_detection_rates({0, 1}, {0}); }, {"2 verdicts for 1"});
}

TEST(FlClientDetection, RoundsCsvFromBeforeTheColumnsStillParses) {
  const std::string legacy =
      "round,acc,asr,bfr,v,loss,local_acc,train_loss,sampled,malicious,rejected,tp,fp,tn,fn,bytes_up,bytes_down\n"
      "1,0.5,,,,1.25,0.625,2,10,2,0,1,0,8,1,4000,8000\n";
  const std::vector<RoundRecord> records = parse_rounds_csv(legacy);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].bytes_down, 8000);
  EXPECT_TRUE(std::isnan(records[0].client_detection.dacc));
}

TEST(FlClientDetection, SummaryReportsTheLastEvaluatedRound) {
  RoundRecord a, b;
  a.round = 1, a.acc = 0.5, a.client_detection = detection_rates(0, 0, 4, 2);
  b.round = 2, b.acc = 0.6, b.client_detection = detection_rates(2, 1, 3, 0);
  const RunSummary s = summarize_run(1, {a, b}, {}, "best", 0);  // the report mode does not apply to it
  EXPECT_DOUBLE_EQ(s.client_detection.dacc, 5.0 / 6.0);
  EXPECT_DOUBLE_EQ(s.client_detection.fpr, 0.25);
  EXPECT_DOUBLE_EQ(s.client_detection.fnr, 0.0);
  const nlohmann::json j = nlohmann::json::parse(summary_json("x", "best", {s}));
  EXPECT_DOUBLE_EQ(j["runs"][0]["client_detection"]["fpr"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(j["mean"]["client_dacc"].get<double>(), 5.0 / 6.0);
}

TEST(FlClientDetection, CheckpointKeepsTheVerdicts) {
  CheckpointState state;
  state.round = 1, state.seed = 3, state.config_toml = "x";
  state.global = {1, 2};
  state.clients.resize(4);
  state.client_flags = {0, 1, 0, 1};
  const SafetensorsFile file = checkpoint_file(state);
  EXPECT_EQ(parse_checkpoint(file, "ck").client_flags, state.client_flags);
  state.client_flags.clear();  // an older checkpoint: no entry, no verdicts
  EXPECT_TRUE(parse_checkpoint(checkpoint_file(state), "ck").client_flags.empty());
  SafetensorsFile bad = file;
  bad.metadata.erase("payload_crc32");  // an edited file would fail its checksum first
  for (auto& [name, entry] : bad.i64)
    if (name == "client_flags") entry.second[2] = 7;
  expect_error([&] { parse_checkpoint(bad, "ck"); }, {"client_flags", "7"});
}

// norm-bound flags the scaled attackers' uploads: the per-client columns move, and a killed + resumed
// run and a 2-thread run write the same rounds.csv byte for byte.
testing::TinyRun flagging_run() {
  return {{"seed=5", "rounds=6", "clients.sgd.epochs=1", "clients.sgd.batch=16", "clients.sgd.lr=0.05",
           "server.rule=norm-bound", "server.norm-bound.mode=median-multiple", "attack.names=[\"scale\"]",
           "attack.malicious_count=3", "attack.scale.factor=50", "run.checkpoint_every=1"}};
}

using FlClientDetectionRun = testing::FlRunTest;

TEST_F(FlClientDetectionRun, ResumedAndTwoThreadRunsKeepTheVerdicts) {
  expect_same_on_threads_and_resume(flagging_run(), /*stop_after=*/3);
  const std::vector<RoundRecord> records = parse_rounds_csv(file("one", "rounds.csv"));
  ASSERT_EQ(records.size(), 6u);
  EXPECT_LT(records.back().client_detection.fnr, 1.0);  // some attacker was judged and flagged
}

}  // namespace
}  // namespace bastion
