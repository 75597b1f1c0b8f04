// Tests for fl/metrics/metrics.h: detection rates, report modes (last, last:K, best) with NaN skipping,
// mean ± sample std, round-to-accuracy, bfr and v. Every expected value is worked out by hand in the
// comment beside it.
#include <gtest/gtest.h>

#include <cmath>

#include "fl/metrics/metrics.h"
#include "tests/test_support.h"

using namespace bastion;
using namespace bastion::testing;

namespace {

// The functions under test are one or two floating-point operations away from the exact decimal
// answers, so EXPECT_DOUBLE_EQ (4 ulps) holds; a formula error shows up in the first digits.

RoundRecord record_with_acc(int64_t round, double acc) {
  RoundRecord r;
  r.round = round;
  r.acc = acc;
  return r;
}

}  // namespace

TEST(FlMetrics, DetectionRatesFromCounts) {
  // 10 uploads: 4 malicious (3 caught, 1 missed), 6 benign (1 flagged, 5 kept).
  const DetectionRates rates = detection_rates(/*tp=*/3, /*fp=*/1, /*tn=*/5, /*fn=*/1);
  EXPECT_DOUBLE_EQ(rates.dacc, 0.8);       // (3 + 5) / 10
  EXPECT_DOUBLE_EQ(rates.fpr, 1.0 / 6.0);  // 1 flagged of 6 benign
  EXPECT_DOUBLE_EQ(rates.fnr, 0.25);       // 1 missed of 4 malicious
}

TEST(FlMetrics, DetectionRatesAreNaNWithoutADenominator) {
  // No attacker in the round: FNR does not exist, the other two do.
  const DetectionRates no_attacker = detection_rates(0, 2, 6, 0);
  EXPECT_DOUBLE_EQ(no_attacker.dacc, 0.75);
  EXPECT_DOUBLE_EQ(no_attacker.fpr, 0.25);
  EXPECT_TRUE(std::isnan(no_attacker.fnr));
  // Only attackers: FPR does not exist.
  const DetectionRates only_attackers = detection_rates(2, 0, 0, 2);
  EXPECT_DOUBLE_EQ(only_attackers.fnr, 0.5);
  EXPECT_TRUE(std::isnan(only_attackers.fpr));
  // A rule that judged nobody.
  const DetectionRates none = detection_rates(0, 0, 0, 0);
  EXPECT_TRUE(std::isnan(none.dacc) && std::isnan(none.fpr) && std::isnan(none.fnr));
  expect_error([] { detection_rates(1, -1, 0, 0); }, {"fp=-1"});
}

TEST(FlMetrics, ParseReportModeAcceptsTheThreeForms) {
  EXPECT_EQ(parse_report_mode("last").kind, ReportMode::Last);
  EXPECT_EQ(parse_report_mode("best").kind, ReportMode::Best);
  const ReportMode last5 = parse_report_mode("last:5");
  EXPECT_EQ(last5.kind, ReportMode::LastMean);
  EXPECT_EQ(last5.k, 5);
  EXPECT_EQ(parse_report_mode("last:1").k, 1);
}

TEST(FlMetrics, ParseReportModeRejectsEverythingElse) {
  for (const std::string bad :
       {"", "first", "LAST", "last:", "last:0", "last:-3", "last:2.5", "last:5x", " last", "best:3", "last:+2"})
    expect_error([&] { parse_report_mode(bad); }, {"'" + bad + "'", "'last'", "'best'", "'last:K'"});
}

TEST(FlMetrics, ReportedValueLastSkipsTrailingNaN) {
  // The final round was not evaluated for this metric: "last" is the latest measured value.
  EXPECT_DOUBLE_EQ(reported_value({0.1, 0.5, kNoValue}, {1, 2, 3}, parse_report_mode("last")), 0.5);
  EXPECT_DOUBLE_EQ(reported_value({0.3}, {1}, parse_report_mode("last")), 0.3);
}

TEST(FlMetrics, ReportedValueBestIsTheMaximum) {
  EXPECT_DOUBLE_EQ(reported_value({0.1, kNoValue, 0.7, 0.3}, {1, 2, 3, 4}, parse_report_mode("best")), 0.7);
}

TEST(FlMetrics, ReportedValueLastKAveragesTheValuesOfTheLastKRounds) {
  // Rounds 3 and 4 form the window; round 3 was not measured, so only round 4 counts.
  EXPECT_DOUBLE_EQ(reported_value({0.2, 0.4, kNoValue, 0.6}, {1, 2, 3, 4}, parse_report_mode("last:2")), 0.6);
  // A window longer than the run: every measured value, (0.2 + 0.4 + 0.6) / 3.
  EXPECT_DOUBLE_EQ(reported_value({0.2, 0.4, kNoValue, 0.6}, {1, 2, 3, 4}, parse_report_mode("last:10")), 0.4);
  EXPECT_DOUBLE_EQ(reported_value({0.2, 0.4, 0.6}, {1, 2, 3}, parse_report_mode("last:1")), 0.6);
}

// Issue 17: with eval.every = 2 over 10 rounds the records are rounds 2, 4, .., 10. "last:5" means
// rounds 6..10, i.e. the evaluations of rounds 6, 8 and 10, not the 5 latest evaluations (rounds 2..10).
TEST(FlMetrics, ReportedValueLastKCountsRoundsNotEvaluations) {
  const std::vector<int64_t> rounds = {2, 4, 6, 8, 10};
  const std::vector<double> acc = {0.1, 0.2, 0.3, 0.4, 0.8};
  EXPECT_DOUBLE_EQ(reported_value(acc, rounds, parse_report_mode("last:5")), (0.3 + 0.4 + 0.8) / 3);
  EXPECT_DOUBLE_EQ(reported_value(acc, rounds, parse_report_mode("last:4")), (0.4 + 0.8) / 2);
  EXPECT_DOUBLE_EQ(reported_value(acc, rounds, parse_report_mode("last:10")), (0.1 + 0.2 + 0.3 + 0.4 + 0.8) / 5);
}

TEST(FlMetrics, ReportedValueNeedsOneNonDecreasingRoundPerValue) {
  expect_error([] { reported_value({0.1, 0.2}, {1}, parse_report_mode("last")); }, {"2 values but 1 round"});
  expect_error([] { reported_value({0.1, 0.2}, {2, 1}, parse_report_mode("last:2")); }, {"must not decrease"});
}

TEST(FlMetrics, ReportedValueIsNaNWithoutValues) {
  for (const char* mode : {"last", "best", "last:3"}) {
    EXPECT_TRUE(std::isnan(reported_value({}, {}, parse_report_mode(mode)))) << mode;
    EXPECT_TRUE(std::isnan(reported_value({kNoValue, kNoValue}, {1, 2}, parse_report_mode(mode)))) << mode;
  }
}

TEST(FlMetrics, MeanStdUsesTheSampleStd) {
  // {1, 2, 3, 4}: mean 2.5, squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5, std = sqrt(5 / 3).
  const MeanStd s = mean_std({1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.std, std::sqrt(5.0 / 3.0));
  EXPECT_NEAR(s.std, 1.29099, 1e-5);
  EXPECT_EQ(s.count, 4);
}

TEST(FlMetrics, MeanStdSkipsNaNAndHandlesFewValues) {
  const MeanStd with_nan = mean_std({kNoValue, 1, 3});  // {1, 3}: mean 2, std sqrt(2 / 1)
  EXPECT_DOUBLE_EQ(with_nan.mean, 2.0);
  EXPECT_DOUBLE_EQ(with_nan.std, std::sqrt(2.0));
  EXPECT_EQ(with_nan.count, 2);
  const MeanStd one = mean_std({0.7, kNoValue});
  EXPECT_DOUBLE_EQ(one.mean, 0.7);
  EXPECT_EQ(one.std, 0.0);
  EXPECT_EQ(one.count, 1);
  const MeanStd none = mean_std({kNoValue});
  EXPECT_TRUE(std::isnan(none.mean) && std::isnan(none.std));
  EXPECT_EQ(none.count, 0);
}

TEST(FlMetrics, RoundToAccuracyIsTheFirstRoundReachingTheTarget) {
  // Rounds numbered as stored (evaluation every 5 rounds), a NaN acc in between.
  const std::vector<RoundRecord> records = {record_with_acc(5, 0.5), record_with_acc(10, kNoValue),
                                            record_with_acc(15, 0.8), record_with_acc(20, 0.75),
                                            record_with_acc(25, 0.9)};
  EXPECT_EQ(round_to_accuracy(records, 0.8), 15);  // >= : reaching the target exactly counts
  EXPECT_EQ(round_to_accuracy(records, 0.5), 5);
  EXPECT_EQ(round_to_accuracy(records, 0.85), 25);
  EXPECT_EQ(round_to_accuracy(records, 0.95), -1);
  EXPECT_EQ(round_to_accuracy(records, 0.0), -1);  // target <= 0: disabled
  EXPECT_EQ(round_to_accuracy({}, 0.5), -1);
}

TEST(FlMetrics, BackdoorFailureRateAndVScore) {
  EXPECT_DOUBLE_EQ(backdoor_failure_rate(0.25), 0.75);
  EXPECT_DOUBLE_EQ(v_score(0.8, 0.2), 0.8);  // (0.8 + 0.8) / 2
  EXPECT_TRUE(std::isnan(backdoor_failure_rate(kNoValue)));
  EXPECT_TRUE(std::isnan(v_score(0.8, kNoValue)));
}
