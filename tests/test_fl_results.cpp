// Tests for fl/metrics/results.h: rounds.csv (exact text, parse errors, byte-exact round trip),
// timing.csv, summarize_run, summary.json (parsed back with nlohmann), curves.svg (structure, escaping,
// line breaks at NaN) and the console summary line.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "fl/metrics/results.h"
#include "tests/test_support.h"

using namespace bastion;
using namespace bastion::testing;

namespace {

// Hand-computed values are one or two floating-point operations from exact decimals (EXPECT_DOUBLE_EQ,
// 4 ulps); figures read back from text carry the printed digits' rounding, hence this tolerance.
constexpr double kPrintedTolerance = 1e-12;

size_t count_of(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++count;
  return count;
}

// Round 1: no backdoor measured yet (empty asr, bfr and v cells); round 2: every column set, a real
// that needs rounding to 6 digits, one that needs an exponent, and a 12-digit byte count.
std::vector<RoundRecord> two_rounds() {
  RoundRecord a;
  a.round = 1, a.acc = 0.5, a.loss = 1.25, a.local_acc = 0.625, a.train_loss = 2;
  a.sampled = 10, a.malicious = 2, a.rejected = 0;
  a.true_positive = 1, a.false_positive = 0, a.true_negative = 8, a.false_negative = 1;
  a.bytes_up = 4000, a.bytes_down = 8000;
  RoundRecord b;
  b.round = 2, b.acc = 0.8125, b.asr = 0.25, b.loss = 0.123456789, b.train_loss = 1e-7;
  b.sampled = 10, b.malicious = 3, b.rejected = 1;
  b.true_positive = 2, b.false_positive = 1, b.true_negative = 6, b.false_negative = 1;
  b.bytes_up = 123456789012, b.bytes_down = 5;
  b.client_detection = detection_rates(2, 1, 6, 1);  // 8/10, 1/7 (rounded to 6 digits), 1/3
  return {a, b};
}

const char* kTwoRoundsCsv =
    "round,acc,asr,bfr,v,loss,local_acc,train_loss,sampled,malicious,rejected,tp,fp,tn,fn,bytes_up,bytes_down,"
    "client_dacc,client_fpr,client_fnr\n"
    "1,0.5,,,,1.25,0.625,2,10,2,0,1,0,8,1,4000,8000,,,\n"
    "2,0.8125,0.25,0.75,0.78125,0.123457,,1e-07,10,3,1,2,1,6,1,123456789012,5,0.8,0.142857,0.333333\n";  // v = (0.8125 + 0.75) / 2

RoundRecord record(int64_t round, double acc, double asr) {
  RoundRecord r;
  r.round = round, r.acc = acc, r.asr = asr;
  return r;
}

RunSummary run_summary(uint64_t seed, double acc, double asr) {
  RunSummary s;
  s.seed = seed, s.acc = acc, s.asr = asr;
  s.bfr = backdoor_failure_rate(asr), s.v = v_score(acc, asr);
  return s;
}

}  // namespace

TEST(FlResults, RoundsCsvExactText) { EXPECT_EQ(rounds_csv(two_rounds()), kTwoRoundsCsv); }

TEST(FlResults, RoundsCsvHeaderOnlyWithoutRecords) {
  EXPECT_EQ(rounds_csv({}), std::string(kTwoRoundsCsv).substr(0, std::string(kTwoRoundsCsv).find('\n') + 1));
  EXPECT_TRUE(parse_rounds_csv(rounds_csv({})).empty());
}

TEST(FlResults, ParseRoundsCsvReadsEveryField) {
  const std::vector<RoundRecord> parsed = parse_rounds_csv(kTwoRoundsCsv);
  ASSERT_EQ(parsed.size(), 2u);
  const RoundRecord& a = parsed[0];
  EXPECT_EQ(a.round, 1);
  EXPECT_DOUBLE_EQ(a.acc, 0.5);
  EXPECT_TRUE(std::isnan(a.asr));
  EXPECT_DOUBLE_EQ(a.loss, 1.25);
  EXPECT_DOUBLE_EQ(a.local_acc, 0.625);
  EXPECT_DOUBLE_EQ(a.train_loss, 2.0);
  EXPECT_EQ(a.sampled, 10);
  EXPECT_EQ(a.malicious, 2);
  EXPECT_EQ(a.rejected, 0);
  EXPECT_EQ(a.true_positive, 1);
  EXPECT_EQ(a.false_positive, 0);
  EXPECT_EQ(a.true_negative, 8);
  EXPECT_EQ(a.false_negative, 1);
  EXPECT_EQ(a.bytes_up, 4000);
  EXPECT_EQ(a.bytes_down, 8000);
  const RoundRecord& b = parsed[1];
  EXPECT_DOUBLE_EQ(b.asr, 0.25);
  EXPECT_NEAR(b.loss, 0.123457, kPrintedTolerance);  // 6 significant digits survive, no more
  EXPECT_TRUE(std::isnan(b.local_acc));
  EXPECT_DOUBLE_EQ(b.train_loss, 1e-7);
  EXPECT_EQ(b.bytes_up, 123456789012);
}

TEST(FlResults, ParseRoundsCsvAcceptsCrLf) {
  std::string crlf;
  for (char c : std::string(kTwoRoundsCsv)) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  EXPECT_EQ(rounds_csv(parse_rounds_csv(crlf)), kTwoRoundsCsv);
}

TEST(FlResults, RoundsCsvRoundTripIsByteExact) {
  // Awkward values: bfr and v must be derived from the printed acc/asr, or a reparsed file could
  // differ from the original in their last digit.
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<RoundRecord> records;
  for (int64_t round = 1; round <= 500; ++round) {
    RoundRecord r = record(round, unit(rng), round % 7 == 0 ? kNoValue : unit(rng));
    r.loss = std::exp(20 * unit(rng) - 10), r.local_acc = unit(rng), r.train_loss = 1.0 / 3.0;
    r.sampled = round, r.bytes_up = round * 1000003;
    records.push_back(r);
  }
  const std::string text = rounds_csv(records);
  EXPECT_EQ(rounds_csv(parse_rounds_csv(text)), text);
  EXPECT_EQ(rounds_csv(parse_rounds_csv(kTwoRoundsCsv)), kTwoRoundsCsv);
}

// Received-model columns (eval.personal_received) follow the p_* columns and round-trip; p_tacc is the
// better of the weighted personal and received accuracies (FedCAP's TAcc), the personal one without them.
TEST(FlResults, ReceivedColumnsRoundTripAndTaccTakesTheBetterWeightedFigure) {
  std::vector<RoundRecord> records;
  for (int64_t round = 1; round <= 2; ++round) {
    RoundRecord r = record(round, 0.5, kNoValue);
    r.personal.present = true;
    r.personal.clients = 4;
    r.personal.acc = {0.7, 0.6 + 0.1 * static_cast<double>(round), 0.5, 0.7, 0.9};  // p_acc_w 0.7, 0.8
    r.personal.received = true;
    r.personal.received_acc = {0.75, 0.75, 0.6, 0.75, 0.9};  // p_racc_w 0.75
    records.push_back(r);
  }
  const std::string text = rounds_csv(records);
  EXPECT_NE(text.find(",p_asr_max,p_racc,p_racc_w,p_racc_min,p_racc_med,p_racc_max\n"), std::string::npos) << text;
  EXPECT_EQ(rounds_csv(parse_rounds_csv(text)), text);
  EXPECT_TRUE(parse_rounds_csv(text)[0].personal.received);

  RunSummary last = summarize_run(1, records, {}, "last", 0);
  EXPECT_DOUBLE_EQ(last.personal_value("p_racc_w"), 0.75);
  EXPECT_DOUBLE_EQ(last.personal_value("p_tacc"), 0.8);  // round 2: personal 0.8 > received 0.75
  records.pop_back();
  last = summarize_run(1, records, {}, "last", 0);
  EXPECT_DOUBLE_EQ(last.personal_value("p_tacc"), 0.75);  // round 1: received 0.75 > personal 0.7

  for (RoundRecord& r : records) r.personal.received = false;
  const std::string without = rounds_csv(records);
  EXPECT_EQ(without.find("p_racc"), std::string::npos) << without;
  last = summarize_run(1, records, {}, "last", 0);
  EXPECT_DOUBLE_EQ(last.personal_value("p_tacc"), 0.7);  // p_acc_w alone
  EXPECT_TRUE(std::isnan(last.personal_value("p_racc_w")));
}

TEST(FlResults, ParseRoundsCsvErrorsNameTheLine) {
  const std::string header = std::string(kTwoRoundsCsv).substr(0, std::string(kTwoRoundsCsv).find('\n') + 1);
  expect_error([] { parse_rounds_csv(""); }, {"line 1", "header"});
  expect_error([] { parse_rounds_csv("round,acc\n1,0.5\n"); }, {"line 1", "header", "'round,acc'"});
  expect_error([&] { parse_rounds_csv(header + "1,0.5,,,,1.25,0.625,2,10,2,0,1,0,8,1,4000,8000,,,\n1,2,3\n"); },
               {"line 3", "3 columns", "expected 20"});
  expect_error([&] { parse_rounds_csv(header + "1,abc,,,,1.25,0.625,2,10,2,0,1,0,8,1,4000,8000,,,\n"); },
               {"line 2", "'acc'", "'abc'"});
  expect_error([&] { parse_rounds_csv(header + "1,0.5x,,,,1.25,0.625,2,10,2,0,1,0,8,1,4000,8000,,,\n"); },
               {"line 2", "'acc'", "'0.5x'"});
  expect_error([&] { parse_rounds_csv(header + "1,0.5,,,,1.25,0.625,2,1.5,2,0,1,0,8,1,4000,8000,,,\n"); },
               {"line 2", "'sampled'", "'1.5'", "integer"});
  expect_error([&] { parse_rounds_csv(header + ",0.5,,,,1.25,0.625,2,10,2,0,1,0,8,1,4000,8000,,,\n"); },
               {"line 2", "'round'"});
  expect_error([&] { parse_rounds_csv(header + "1,0.5,,oops,,1.25,0.625,2,10,2,0,1,0,8,1,4000,8000,,,\n"); },
               {"line 2", "'bfr'", "'oops'"});
}

TEST(FlResults, TimingCsvExactText) {
  const std::vector<RoundTiming> timings = {{1, 0.5, 0.01234, 0.1, 0.61237, 0.25},
                                            {2, 12.25, 0, 1.00004, 13.3}};  // cpu_s not measured: empty
  const std::string text =
      "round,train_s,aggregate_s,eval_s,round_s,cpu_s\n"
      "1,0.5000,0.0123,0.1000,0.6124,0.2500\n"
      "2,12.2500,0.0000,1.0000,13.3000,\n";
  EXPECT_EQ(timing_csv(timings), text);
  const std::vector<RoundTiming> back = parse_timing_csv(text);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].cpu_seconds, 0.25);
  EXPECT_TRUE(std::isnan(back[1].cpu_seconds));
  EXPECT_EQ(back[1].round_seconds, 13.3);
}

// timing.csv written before cpu_s (every committed run of 2026-11-29 and earlier) is still read: cpu_s unmeasured.
TEST(FlResults, TimingCsvWithoutCpuSecondsStillParses) {
  const std::vector<RoundTiming> back =
      parse_timing_csv("round,train_s,aggregate_s,eval_s,round_s\n1,0.5000,0.0123,0.1000,0.6124\n");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].round_seconds, 0.6124);
  EXPECT_TRUE(std::isnan(back[0].cpu_seconds));
  expect_error([] { parse_timing_csv("round,train_s,aggregate_s,eval_s,round_s\n1,0.5,0,0,0.6,0.2\n"); },
               {"timing.csv line 2", "6 columns", "expected 5"});
  expect_error([] { parse_timing_csv("round,train_s,cpu_s\n1,0.5,0.1\n"); }, {"timing.csv: no header line"});
}

TEST(FlResults, SummarizeRunAppliesTheReportMode) {
  // acc 0.5 0.7 0.9 0.8; asr 0.6 0.4 (NaN) 0.2; detection counts summed over rounds.
  std::vector<RoundRecord> records = {record(1, 0.5, 0.6), record(2, 0.7, 0.4), record(3, 0.9, kNoValue),
                                      record(4, 0.8, 0.2)};
  for (RoundRecord& r : records) {
    r.true_positive = 1, r.false_positive = r.round == 2 ? 1 : 0, r.true_negative = 3, r.false_negative = 1;
    r.rejected = r.round, r.bytes_up = 100, r.bytes_down = 1000;
  }
  const std::vector<RoundTiming> timings = {{1, 0, 0, 0, 3}, {2, 0, 0, 0, 1}, {3, 0, 0, 0, 2}, {4, 0, 0, 0, 10}};
  const RunSummary s = summarize_run(7, records, timings, "last:2", 0.7);
  EXPECT_EQ(s.seed, 7u);
  EXPECT_EQ(s.rounds, 4);
  EXPECT_DOUBLE_EQ(s.acc, 0.85);  // (0.9 + 0.8) / 2
  EXPECT_DOUBLE_EQ(s.asr, 0.2);   // rounds 3 and 4, round 3 not measured (last:K counts rounds)
  EXPECT_DOUBLE_EQ(s.bfr, 0.8);
  EXPECT_DOUBLE_EQ(s.v, 0.825);  // (0.85 + 0.8) / 2
  EXPECT_TRUE(std::isnan(s.local_acc));
  EXPECT_DOUBLE_EQ(s.final_acc, 0.8);
  EXPECT_DOUBLE_EQ(s.best_acc, 0.9);
  EXPECT_EQ(s.round_to_target, 2);
  EXPECT_DOUBLE_EQ(s.detection.dacc, 16.0 / 21.0);  // tp 4 + tn 12 of 21 judged
  EXPECT_DOUBLE_EQ(s.detection.fpr, 1.0 / 13.0);    // fp 1 of benign 1 + 12
  EXPECT_DOUBLE_EQ(s.detection.fnr, 0.5);           // fn 4 of malicious 4 + 4
  EXPECT_EQ(s.rejected, 10);
  EXPECT_EQ(s.bytes_up, 400);
  EXPECT_EQ(s.bytes_down, 4000);
  EXPECT_DOUBLE_EQ(s.seconds_per_round, 2.5);  // median of {1, 2, 3, 10}

  const RunSummary best = summarize_run(7, records, {}, "best", 0);
  EXPECT_DOUBLE_EQ(best.acc, 0.9);
  EXPECT_EQ(best.round_to_target, -1);              // target 0: disabled
  EXPECT_TRUE(std::isnan(best.seconds_per_round));  // no timings
  expect_error([&] { summarize_run(7, records, timings, "mean", 0.7); }, {"'mean'"});
}

TEST(FlResults, SummarizeRunWithoutRecords) {
  const RunSummary s = summarize_run(1, {}, {{1, 0, 0, 0, 4}}, "last", 0.5);
  EXPECT_EQ(s.rounds, 0);
  EXPECT_TRUE(std::isnan(s.acc) && std::isnan(s.asr) && std::isnan(s.final_acc) && std::isnan(s.best_acc));
  EXPECT_TRUE(std::isnan(s.detection.dacc));
  EXPECT_EQ(s.round_to_target, -1);
  EXPECT_DOUBLE_EQ(s.seconds_per_round, 4.0);
}

TEST(FlResults, SummaryJsonParsesBackWithNullForNaN) {
  RunSummary first = run_summary(1, 0.8, kNoValue), second = run_summary(2, 0.9, kNoValue);
  first.detection = detection_rates(0, 1, 3, 0);  // no attacker judged
  first.bytes_up = 123456789012, first.seconds_per_round = 1.5;
  const std::string text = summary_json("demo \"x\"", "last:5", {first, second});
  EXPECT_EQ(text.rfind("{\n  \"name\": \"demo \\\"x\\\"\",\n  \"report\": \"last:5\",\n", 0), 0u) << text;
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
  EXPECT_EQ(j["name"], "demo \"x\"");
  ASSERT_EQ(j["runs"].size(), 2u);
  const auto& run = j["runs"][0];
  std::vector<std::string> keys;
  for (const auto& [key, value] : run.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"seed", "rounds", "acc", "asr", "bfr", "v", "local_acc", "final_acc",
                                            "best_acc", "round_to_target", "detection", "client_detection", "rejected",
                                            "bytes_up", "bytes_down", "seconds_per_round", "malicious_clients"}));
  EXPECT_EQ(run["seed"], 1);
  EXPECT_DOUBLE_EQ(run["acc"].get<double>(), 0.8);
  EXPECT_TRUE(run["asr"].is_null());
  EXPECT_TRUE(run["v"].is_null());
  EXPECT_DOUBLE_EQ(run["detection"]["dacc"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(run["detection"]["fpr"].get<double>(), 0.25);
  EXPECT_TRUE(run["detection"]["fnr"].is_null());
  EXPECT_EQ(run["bytes_up"].get<int64_t>(), 123456789012);
  EXPECT_EQ(run["round_to_target"], -1);
  EXPECT_DOUBLE_EQ(j["mean"]["acc"].get<double>(), 0.85);
  EXPECT_NEAR(j["std"]["acc"].get<double>(), std::sqrt(0.005), kPrintedTolerance);  // 2 * 0.05² / 1
  EXPECT_TRUE(j["mean"]["asr"].is_null());
  EXPECT_TRUE(j["std"]["asr"].is_null());
  EXPECT_DOUBLE_EQ(j["mean"]["seconds_per_round"].get<double>(), 1.5);  // the other run has none
  EXPECT_EQ(j["std"]["seconds_per_round"], 0.0);
}

TEST(FlResults, CurvesSvgSingleRun) {
  const std::vector<RoundRecord> records = {record(1, 0.2, 0.9), record(2, 0.5, 0.6), record(3, 0.7, 0.3)};
  const std::string svg = curves_svg("acc & asr <fedavg> \"q\" 'p'", {records});
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("acc &amp; asr &lt;fedavg&gt; &quot;q&quot; &apos;p&apos;"), std::string::npos);
  EXPECT_EQ(svg.find("<fedavg>"), std::string::npos);
  EXPECT_EQ(count_of(svg, "<polyline"), 2u);          // acc and asr
  EXPECT_EQ(count_of(svg, "stroke-dasharray"), 2u);   // the asr line and its legend sample
  EXPECT_EQ(count_of(svg, "<"), count_of(svg, ">"));  // nothing unescaped leaked into the markup
  EXPECT_NE(svg.find(">100%</text>"), std::string::npos);
  EXPECT_NE(svg.find(">0%</text>"), std::string::npos);
}

TEST(FlResults, CurvesSvgWithoutAsrDrawsOnlyAcc) {
  const std::vector<RoundRecord> records = {record(1, 0.2, kNoValue), record(2, 0.5, kNoValue)};
  const std::string svg = curves_svg("clean", {records, records});
  EXPECT_EQ(count_of(svg, "<polyline"), 3u);          // two runs and their mean
  EXPECT_EQ(svg.find("#d62728"), std::string::npos);  // no asr colour anywhere, legend included
}

TEST(FlResults, CurvesSvgSeveralRunsDrawEachRunAndTheMean) {
  std::vector<std::vector<RoundRecord>> runs(3);
  for (int64_t round = 1; round <= 40; ++round)
    for (size_t i = 0; i < runs.size(); ++i) runs[i].push_back(record(round, 0.01 * round + 0.05 * i, 0.5));
  const std::string svg = curves_svg("three seeds", runs);
  EXPECT_EQ(count_of(svg, "<polyline"), 8u);  // 3 runs x (acc, asr) + the two means
  EXPECT_NE(svg.find("each of 3 runs"), std::string::npos);
  EXPECT_NE(svg.find(">40</text>"), std::string::npos);  // rounds 1..40: ticks every 5 from 0 to 40
  EXPECT_NE(svg.find(">0</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">2</text>"), std::string::npos);
}

TEST(FlResults, CurvesSvgAddsTheClientsOwnModelsForPersonalisedRuns) {
  std::vector<RoundRecord> records = {record(1, 0.2, 0.9), record(2, 0.5, 0.6)};
  EXPECT_EQ(curves_svg("global only", {records}).find("p_acc"), std::string::npos);
  for (RoundRecord& r : records) {
    r.personal.present = true;
    r.personal.acc.mean = 0.8;
    r.personal.asr.mean = 0.1;
  }
  const std::string svg = curves_svg("personalised", {records});
  EXPECT_EQ(count_of(svg, "<polyline"), 4u);  // acc, asr, p_acc, p_asr
  EXPECT_NE(svg.find(">p_acc</text>"), std::string::npos);
  EXPECT_NE(svg.find(">p_asr</text>"), std::string::npos);
}

TEST(FlResults, CurvesSvgBreaksLinesAtNaN) {
  const std::vector<RoundRecord> records = {record(1, 0.1, kNoValue),      record(2, 0.2, 0.5),
                                            record(3, kNoValue, kNoValue), record(4, 0.4, 0.6),
                                            record(5, 0.5, 0.7),           record(6, 0.6, kNoValue)};
  const std::string svg = curves_svg("gaps", {records});
  // acc: rounds 1-2 and 4-6 (two polylines); asr: round 2 alone (a dot) and rounds 4-5 (a polyline).
  EXPECT_EQ(count_of(svg, "<polyline"), 3u);
  EXPECT_EQ(count_of(svg, "<circle"), 1u);
  EXPECT_NE(curves_svg("empty", {}).find("</svg>"), std::string::npos);
}

TEST(FlResults, SummaryLineOneRun) {
  EXPECT_EQ(summary_line({run_summary(1, 0.81234, 0.04116)}), "acc=0.8123 asr=0.0412");
  EXPECT_EQ(summary_line({run_summary(1, 0.81234, kNoValue)}), "acc=0.8123 asr=-");  // no backdoor: not measured
}

// The personalised figures follow the same rule: p_asr without a backdoor prints "-", not "nan".
TEST(FlResults, SummaryLinePersonalFiguresWithoutABackdoor) {
  RunSummary run = run_summary(1, 0.5, kNoValue);
  run.personal = {{"p_acc", 0.61234}, {"p_asr", kNoValue}};
  EXPECT_EQ(summary_line({run}), "acc=0.5000 asr=- p_acc=0.6123 p_asr=-");
  RunSummary other = run_summary(2, 0.5, kNoValue);
  other.personal = {{"p_acc", 0.63234}, {"p_asr", kNoValue}};
  EXPECT_EQ(summary_line({run, other}), "acc=0.5000\u00b10.0000 asr=- p_acc=0.6223\u00b10.0141 p_asr=-");
}

TEST(FlResults, SummaryLineSeveralRunsShowsMeanAndSampleStd) {
  // acc {0.8, 0.82}: mean 0.81, std sqrt(2 * 0.01² / 1) = 0.014142; asr {0.05, 0.052}: 0.051 ± 0.001414.
  EXPECT_EQ(summary_line({run_summary(1, 0.8, 0.05), run_summary(2, 0.82, 0.052)}),
            "acc=0.8100\u00b10.0141 asr=0.0510\u00b10.0014");
  EXPECT_EQ(summary_line({run_summary(1, 0.8, kNoValue), run_summary(2, 0.82, kNoValue)}),
            "acc=0.8100\u00b10.0141 asr=-");
}
