// Server rules built on distances, similarities and residuals: rfa (geometric median), foolsgold
// (history cosine similarity, with its checkpointed state) and residual-base (repeated-median residual
// reweighting). Hand-computed examples, permutation invariance, identical rows, outliers, bad parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fl/base/thread_pool.h"
#include "fl/defenses/server_rule.h"
#include "tests/defense_test_support.h"
#include "tests/test_support.h"

using namespace bastion;
using namespace bastion::testing;

namespace {

// Float results summed in double in a different row order agree to a few float ulps.
constexpr float kOrderTolerance = 1e-5f;

std::unique_ptr<ServerRule> rfa(const std::map<std::string, ParamValue>& given = {}) {
  return make_rfa(rule_params("rfa", rfa_params(), given));
}
std::unique_ptr<ServerRule> foolsgold(const std::map<std::string, ParamValue>& given = {}) {
  return make_foolsgold(rule_params("foolsgold", foolsgold_params(), given));
}
std::unique_ptr<ServerRule> residual_base(const std::map<std::string, ParamValue>& given = {}) {
  return make_residual_base(rule_params("residual-base", residual_base_params(), given));
}

void expect_near_rows(const std::vector<float>& a, const std::vector<float>& b, float tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t d = 0; d < a.size(); ++d) EXPECT_NEAR(a[d], b[d], tolerance) << "column " << d;
}

// Euclidean distance of the aggregate to the plain mean of rows [0, honest).
double distance_to_honest_mean(const Uploads& u, int64_t honest, const std::vector<float>& update) {
  double sq = 0.0;
  for (int64_t d = 0; d < u.D; ++d) {
    double mean = 0.0;
    for (int64_t i = 0; i < honest; ++i) mean += u.data[i * u.D + d];
    mean /= static_cast<double>(honest);
    sq += (update[d] - mean) * (update[d] - mean);
  }
  return std::sqrt(sq);
}

// 8 honest rows N(0, 1) in D = 20, then 3 attackers at +100 in every coordinate.
Uploads honest_and_outliers() {
  Uploads u = Uploads::gaussian(11, 20, 3);
  for (int64_t i = 8; i < 11; ++i)
    for (int64_t d = 0; d < u.D; ++d) u.row(i)[d] = 100.0f;
  return u;
}

// ---------------------------------------------------------------------------------------------- rfa

// The smoothed Weiszfeld iteration stops at a relative objective change of ftol = 1e-6; on these
// examples it lands within 3.3e-5 of the true median (measured with a Python transcription).
constexpr float kWeiszfeldTolerance = 1e-4f;

TEST(FlRfa, HandComputedOneDimensionalMedian) {
  // P = 1 parameter column, then 1 buffer column. In 1-D the geometric median is the weighted median:
  // uniform weights over {0, 1, 10} -> 1 (the mean would be 11/3); the buffer follows the final
  // Weiszfeld weights, which concentrate on row 1 -> its buffer 7.
  Uploads u({{0.0f, 5.0f}, {1.0f, 7.0f}, {10.0f, 9.0f}});
  u.P = 1;
  const AggregationOutput out = rfa({{"weighting", std::string("uniform")}})->aggregate(u.input());
  expect_near_rows(out.update, {1.0f, 7.0f}, kWeiszfeldTolerance);
  EXPECT_TRUE(out.flagged.empty());
  // Sample weights 100, 100, 300: row 2 holds more than half the weight, so the median is 10.
  u.samples = {100, 100, 300};
  expect_near_rows(rfa()->aggregate(u.input()).update, {10.0f, 9.0f}, kWeiszfeldTolerance);
}

TEST(FlRfa, IdenticalUploadsGiveThatUpload) {
  Uploads u({{1.5f, -2.0f, 3.0f}, {1.5f, -2.0f, 3.0f}, {1.5f, -2.0f, 3.0f}, {1.5f, -2.0f, 3.0f}});
  expect_near_rows(rfa()->aggregate(u.input()).update, {1.5f, -2.0f, 3.0f}, kOrderTolerance);
}

TEST(FlRfa, PermutationOfClientsDoesNotChangeResult) {
  Uploads u = Uploads::gaussian(7, 13, 11);
  u.samples = {10, 20, 30, 40, 50, 60, 70};
  const std::vector<float> a = rfa()->aggregate(u.input()).update;
  const std::vector<float> b = rfa()->aggregate(u.permuted({3, 6, 0, 5, 1, 4, 2}).input()).update;
  expect_near_rows(a, b, kOrderTolerance);
}

TEST(FlRfa, OutliersStayBounded) {
  // 3 of 11 rows at distance ~450 from the honest cluster: the mean moves by ~120, the geometric median
  // (breakdown 1/2) stays within the honest spread (rows N(0, 1): |row - mean| ~ sqrt(20) ~ 4.5).
  constexpr double kHonestRadius = 2.0;
  const Uploads u = honest_and_outliers();
  const std::vector<float> update = rfa()->aggregate(u.input()).update;
  EXPECT_LT(distance_to_honest_mean(u, 8, update), kHonestRadius);
  const std::vector<float> mean = make_fedavg(rule_params("fedavg", fedavg_params()))->aggregate(u.input()).update;
  EXPECT_GT(distance_to_honest_mean(u, 8, mean), 100.0);  // the test can fail: the mean does move
}

TEST(FlRfa, RefusesBadParameters) {
  expect_error([] { rfa({{"max_iterations", int64_t{0}}}); }, {"server.rfa.max_iterations"});
  expect_error([] { rfa({{"nu", 0.0}}); }, {"server.rfa.nu"});
  expect_error([] { rfa({{"weighting", std::string("median")}}); }, {"server.rfa.weighting"});
  Uploads u({{1.0f}, {2.0f}});
  u.samples = {0, 0};
  expect_error([&] { rfa()->aggregate(u.input()); }, {"rfa", "zero samples"});
}

// ---------------------------------------------------------------------------------------- foolsgold

// The weights go through log and clamps in double; the sums are float.
constexpr float kFoolsGoldTolerance = 1e-5f;

TEST(FlFoolsGold, HandComputedFirstRound) {
  // Fresh histories = the updates H0 = (1,0,0), H1 = (1,1,0), H2 = (0,1,1).
  // cs01 = 1/sqrt2 = 0.707107, cs02 = 0, cs12 = 1/2; v = (0.707107, 0.707107, 0.5).
  // Pardoning (v2 < v1): cs21 = 0.5 * 0.5 / 0.707107 = 0.353553.
  // w = 1 - max_j cs = (0.292893, 0.292893, 0.646447); / max -> (0.453082, 0.453082, 1 -> 0.99);
  // logit: ln(0.453082 / 0.546918) + 0.5 = 0.311774; ln(99) + 0.5 > 1 -> 1.  w = (0.311774, 0.311774, 1).
  // weighted:     (0.623548, 1.311774, 1) / 1.623548 = (0.384065, 0.807968, 0.615935)
  // nonzero-mean: (0.623548, 1.311774, 1) / 3        = (0.207849, 0.437258, 0.333333)
  const Uploads u({{1, 0, 0}, {1, 1, 0}, {0, 1, 1}});
  const AggregationOutput out = foolsgold()->aggregate(u.input());
  expect_near_rows(out.update, {0.384065f, 0.807968f, 0.615935f}, kFoolsGoldTolerance);
  EXPECT_EQ(out.flagged, (std::vector<uint8_t>{0, 0, 0}));
  const AggregationOutput cpa = foolsgold({{"aggregate", std::string("nonzero-mean")}})->aggregate(u.input());
  expect_near_rows(cpa.update, {0.207849f, 0.437258f, 0.333333f}, kFoolsGoldTolerance);
}

TEST(FlFoolsGold, ColludingIdenticalSybilsAreZeroed) {
  // 6 honest N(0, 1) rows in D = 50 (mutual cosines ~ +-0.3) and 3 sybils uploading one vector: their
  // mutual cosine is 1, so w = 0 for each; honest clients keep positive weight.
  Uploads u = Uploads::gaussian(9, 50, 5);
  for (int64_t i = 7; i < 9; ++i) std::copy_n(u.row(6), u.D, u.row(i));
  const AggregationOutput out = foolsgold()->aggregate(u.input());
  EXPECT_EQ(out.flagged, (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 1, 1, 1}));
}

TEST(FlFoolsGold, HistoryAccumulatesAcrossRounds) {
  // Round 1: client 0 and 1 differ; round 2: they upload the same vector. With histories the two are
  // not identical yet (cos < 1), so neither is zeroed; a fresh rule seeing round 2 alone zeroes both.
  const Uploads r1({{1, 0, 0}, {0, 1, 0}, {0, 0, 1}});
  Uploads r2({{0.5f, 0.5f, 0}, {0.5f, 0.5f, 0}, {0, 0, 1}});
  r2.round = 2;
  auto rule = foolsgold();
  rule->aggregate(r1.input());
  EXPECT_EQ(rule->aggregate(r2.input()).flagged, (std::vector<uint8_t>{0, 0, 0}));
  EXPECT_EQ(foolsgold()->aggregate(r2.input()).flagged, (std::vector<uint8_t>{1, 1, 0}));
}

TEST(FlFoolsGold, StateRoundTripsThroughSaveAndLoad) {
  Uploads r1 = Uploads::gaussian(5, 12, 21);
  r1.clients = {3, 8, 11, 40, 41};
  Uploads r2 = Uploads::gaussian(5, 12, 22);
  r2.clients = {3, 9, 11, 40, 77};
  r2.round = 2;
  auto original = foolsgold({{"history", std::string("normalized")}});
  original->aggregate(r1.input());
  const RuleState state = original->save_state();
  ASSERT_EQ(state.ints("ids"), (std::vector<int64_t>{3, 8, 11, 40, 41}));
  ASSERT_EQ(state.floats("histories").size(), 5u * 12u);
  auto restored = foolsgold({{"history", std::string("normalized")}});
  restored->load_state(state);
  EXPECT_EQ(restored->save_state(), state);
  // A checkpoint written before the codec: [count, P, then (id, P values) records] loads to the same state.
  std::vector<float> legacy = {5.0f, 12.0f};
  for (size_t c = 0; c < 5; ++c) {
    legacy.push_back(static_cast<float>(state.ints("ids")[c]));
    legacy.insert(legacy.end(), state.floats("histories").begin() + c * 12,
                  state.floats("histories").begin() + (c + 1) * 12);
  }
  auto from_old = foolsgold({{"history", std::string("normalized")}});
  from_old->load_state(RuleState::from_legacy(legacy));
  EXPECT_EQ(from_old->save_state(), state);
  const AggregationOutput a = original->aggregate(r2.input());
  const AggregationOutput b = restored->aggregate(r2.input());
  EXPECT_EQ(a.update, b.update);  // bitwise: same history, same arithmetic
  EXPECT_EQ(a.flagged, b.flagged);
  // Without the state the next aggregate differs (so the comparison above can fail).
  EXPECT_NE(foolsgold({{"history", std::string("normalized")}})->aggregate(r2.input()).update, a.update);
  legacy.pop_back();
  expect_error([&] { restored->load_state(RuleState::from_legacy(legacy)); }, {"foolsgold", "state"});
  RuleState twice;
  twice.put_int("width", 1);
  twice.put_ints("ids", {4, 4});
  twice.put_floats("histories", {1.0f, 2.0f});
  expect_error([&] { restored->load_state(twice); }, {"foolsgold", "client 4 twice"});
}

TEST(FlFoolsGold, PermutationOfClientsDoesNotChangeResult) {
  const Uploads u = Uploads::gaussian(6, 17, 9);
  const std::vector<int64_t> order = {4, 1, 5, 0, 3, 2};
  const AggregationOutput a = foolsgold()->aggregate(u.input());
  const AggregationOutput b = foolsgold()->aggregate(u.permuted(order).input());
  expect_near_rows(a.update, b.update, kOrderTolerance);
  for (size_t k = 0; k < order.size(); ++k) EXPECT_EQ(b.flagged[k], a.flagged[order[k]]);
}

TEST(FlFoolsGold, IdenticalUploadsGiveZeroUpdate) {
  // Every pair has cosine 1, so every weight is 0: documented as "keep the global model".
  const Uploads u({{1, 2}, {1, 2}, {1, 2}});
  const AggregationOutput out = foolsgold()->aggregate(u.input());
  EXPECT_EQ(out.update, (std::vector<float>{0, 0}));
  EXPECT_EQ(out.flagged, (std::vector<uint8_t>{1, 1, 1}));
  // A single client keeps its own update (w = 1 -> 0.99 -> logit clipped to 1).
  const Uploads one({{1, 2}});
  EXPECT_EQ(foolsgold()->aggregate(one.input()).update, (std::vector<float>{1, 2}));
}

TEST(FlFoolsGold, RefusesBadParametersAndWidthChange) {
  expect_error([] { foolsgold({{"history", std::string("mean")}}); }, {"server.foolsgold.history"});
  expect_error([] { foolsgold({{"confidence", 0.0}}); }, {"server.foolsgold.confidence"});
  auto rule = foolsgold();
  rule->aggregate(Uploads({{1, 2}, {2, 1}}).input());
  expect_error([&] { rule->aggregate(Uploads({{1, 2, 3}, {2, 1, 3}}).input()); }, {"foolsgold", "history"});
}

// ------------------------------------------------------------------------------------ residual-base

// The fit runs in double; the output is a float sum of 5 terms.
constexpr float kResidualTolerance = 1e-5f;

TEST(FlResidualBase, HandComputedFiveClients) {
  // Column 0: y = (0, 2, 3, 4, 20), ranks 0..4.
  //   slope medians per rank: r0 {2, 1.5, 1.333, 5} -> 1.75; r1 {2, 1, 1, 6} -> 1.5; r2 {1.5, 1, 1, 8.5}
  //   -> 1.25; r3 {1.333, 1, 1, 16} -> 1.1667; r4 {5, 6, 8.5, 16} -> 7.25; b = median = 1.5;
  //   a = median(y) - 1.5 * 2 = 0; line = (0, 1.5, 3, 4.5, 6); residuals (0, .5, 0, -.5, 14);
  //   M = median(0, .5, .5, 14) = 0.5 (smallest |r| left out); tau = 1.4826 * 2.25 * 0.5 = 1.667925.
  //   h(r) = 1/5 + (r - 2)^2 / 10; client 4: u = (14 / 1.667925) / sqrt(1 - 0.6) = 13.2715 > K =
  //   2 sqrt(2/5) = 1.264911 -> psi4 = K / u = 0.0953100; clients 1, 3: u = 0.3352 -> psi = 1.
  //   std(psi) = 0.404590; scores = psi * 0.404590.
  // Column 1: y = (1, 2, 0, 2, 1), a tie between clients 1 and 3 (broken by id): every psi = 1, std 0,
  //   so it adds nothing to the scores.
  // omega = (score / max)^2 normalised = (1, 1, 1, 1, 0.0090840) / 4.0090840
  //       = (0.2494335, x4, 0.0022659).
  // psi4 = 0.0953 >= delta = 0.05: nothing clipped. Output: col 0 = 0.2494335 * 9 + 0.0022659 * 20 =
  // 2.2902189; col 1 = 0.2494335 * 5 + 0.0022659 * 1 = 1.2494335; buffer col (10, 10, 10, 10, 110) =
  // 10 + 100 * 0.0022659 = 10.2265854.
  Uploads u({{0, 1, 10}, {2, 2, 10}, {3, 0, 10}, {4, 2, 10}, {20, 1, 110}});
  u.P = 2;
  const AggregationOutput out = residual_base()->aggregate(u.input());
  expect_near_rows(out.update, {2.2902189f, 1.2494335f, 10.2265854f}, kResidualTolerance);
  EXPECT_TRUE(out.flagged.empty());
  // threshold 0.1 > psi4: client 4's value in column 0 is replaced by the line value 6:
  // 0.2494335 * 9 + 0.0022659 * 6 = 2.2584967.
  const AggregationOutput clipped = residual_base({{"threshold", 0.1}})->aggregate(u.input());
  EXPECT_NEAR(clipped.update[0], 2.2584967f, kResidualTolerance);
  EXPECT_NEAR(clipped.update[1], 1.2494335f, kResidualTolerance);
}

TEST(FlResidualBase, IdenticalUploadsGiveThatUpload) {
  const Uploads u({{0.25f, -1}, {0.25f, -1}, {0.25f, -1}, {0.25f, -1}});
  expect_near_rows(residual_base()->aggregate(u.input()).update, {0.25f, -1}, kOrderTolerance);
}

TEST(FlResidualBase, PermutationOfClientsDoesNotChangeResult) {
  const Uploads u = Uploads::gaussian(9, 2100, 4);  // > one shard of 2000 columns
  const std::vector<float> a = residual_base()->aggregate(u.input()).update;
  const std::vector<float> b = residual_base()->aggregate(u.permuted({8, 2, 5, 0, 7, 1, 4, 6, 3}).input()).update;
  expect_near_rows(a, b, kOrderTolerance);
}

TEST(FlResidualBase, ThreadCountDoesNotChangeResult) {
  // Shard scores are summed in shard order, so a pool gives the serial result bit for bit.
  Uploads u = Uploads::gaussian(6, 4500, 12);  // 3 shards of <= 2000 columns
  const std::vector<float> serial = residual_base()->aggregate(u.input()).update;
  ThreadPool pool(2);
  u.pool = &pool;
  EXPECT_EQ(residual_base()->aggregate(u.input()).update, serial);
  EXPECT_EQ(rfa()->aggregate(u.input()).update, [&] {
    Uploads plain = u;
    plain.pool = nullptr;
    return rfa()->aggregate(plain.input()).update;
  }());
}

TEST(FlResidualBase, OutliersAreDownWeighted) {
  // Outliers at +100 sit far above every fitted line: psi ~ 0.03 for them, so omega ~ 1e-3 and, with
  // values clipped where psi < delta, the output stays near the honest mean (mean moves by ~120).
  constexpr double kHonestRadius = 2.0;
  const Uploads u = honest_and_outliers();
  EXPECT_LT(distance_to_honest_mean(u, 8, residual_base()->aggregate(u.input()).update), kHonestRadius);
}

TEST(FlResidualBase, RefusesBadParametersAndTooFewUploads) {
  expect_error([] { residual_base({{"confidence", 0.0}}); }, {"server.residual-base.confidence"});
  expect_error([] { residual_base({{"threshold", 1.5}}); }, {"server.residual-base.threshold"});
  expect_error([] { residual_base()->aggregate(Uploads({{1}, {2}}).input()); }, {"residual-base", "3"});
}

}  // namespace
