// Wrapper server rules that run an inner rule: bucketing (inner rule on bucket means) and gas (inner
// rule per coordinate group, then keep the n - f best-scored clients). The inner rules here are
// fedavg and small fakes defined below (a recording mean, a coordinate-wise median), so these tests do
// not depend on the other robust rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
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

// What an inner rule was given, one entry per call.
struct Call {
  std::vector<float> rows;
  int64_t n = 0, D = 0, P = 0, f = 0, round = 0;
  uint64_t seed = 0;
  std::vector<int64_t> samples, clients;
  ThreadPool* pool = nullptr;
};

// Plain mean of its input; records every call; flags the rows listed in `flag` (by position). Its state
// is the number of calls so far (to check that wrappers forward save_state / load_state).
class RecordingMean final : public ServerRule {
 public:
  explicit RecordingMean(std::vector<Call>* calls, std::vector<int64_t> flag = {})
      : calls_(calls), flag_(std::move(flag)) {}
  AggregationOutput aggregate(const AggregationInput& in) override {
    ++count_;
    if (calls_ != nullptr) {
      Call c;
      c.rows.assign(in.updates, in.updates + in.n * in.D);
      c.n = in.n, c.D = in.D, c.P = in.num_parameters, c.f = in.expected_malicious, c.round = in.round;
      c.seed = in.seed, c.pool = in.pool;
      c.samples.assign(in.num_samples.begin(), in.num_samples.end());
      c.clients.assign(in.clients.begin(), in.clients.end());
      calls_->push_back(std::move(c));
    }
    AggregationOutput out;
    out.update.assign(static_cast<size_t>(in.D), 0.0f);
    for (int64_t d = 0; d < in.D; ++d) {
      double sum = 0.0;
      for (int64_t i = 0; i < in.n; ++i) sum += in.updates[i * in.D + d];
      out.update[d] = static_cast<float>(sum / static_cast<double>(in.n));
    }
    if (!flag_.empty()) {
      out.flagged.assign(static_cast<size_t>(in.n), 0);
      for (int64_t i : flag_) out.flagged[i] = 1;
    }
    return out;
  }
  RuleState save_state() const override {
    RuleState state;
    state.put_int("calls", count_);
    return state;
  }
  void load_state(const RuleState& state) override { count_ = state.ints("calls").at(0); }

 private:
  std::vector<Call>* calls_;
  std::vector<int64_t> flag_;
  int64_t count_ = 0;
};

// Coordinate-wise median (mean of the two middle values for even n), written here so the tests do not
// depend on fl/defenses/median.cpp.
class TestMedian final : public ServerRule {
 public:
  AggregationOutput aggregate(const AggregationInput& in) override {
    AggregationOutput out;
    out.update.resize(static_cast<size_t>(in.D));
    std::vector<float> column(static_cast<size_t>(in.n));
    for (int64_t d = 0; d < in.D; ++d) {
      for (int64_t i = 0; i < in.n; ++i) column[i] = in.updates[i * in.D + d];
      std::sort(column.begin(), column.end());
      const int64_t m = in.n / 2;
      out.update[d] = in.n % 2 == 1 ? column[m] : 0.5f * (column[m - 1] + column[m]);
    }
    return out;
  }
};

std::unique_ptr<ServerRule> bucketing(std::unique_ptr<ServerRule> inner,
                                      const std::map<std::string, ParamValue>& given = {}) {
  return make_bucketing(rule_params("bucketing", bucketing_params(), given), std::move(inner));
}
std::unique_ptr<ServerRule> gas(std::unique_ptr<ServerRule> inner,
                                const std::map<std::string, ParamValue>& given = {}) {
  return make_gas(rule_params("gas", gas_params(), given), std::move(inner));
}
std::unique_ptr<ServerRule> fedavg(const std::string& weighting) {
  return make_fedavg(rule_params("fedavg", fedavg_params(), {{"weighting", weighting}}));
}

void expect_near_rows(const std::vector<float>& a, const std::vector<float>& b, float tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t d = 0; d < a.size(); ++d) EXPECT_NEAR(a[d], b[d], tolerance) << "column " << d;
}

// Uploads whose samples are distinct powers of two: a bucket's sample sum is the bit mask of its members.
Uploads powers_of_ten(int64_t n) {
  std::vector<std::vector<float>> rows;
  for (int64_t i = 0; i < n; ++i) rows.push_back({std::pow(10.0f, static_cast<float>(i))});
  Uploads u(rows);
  for (int64_t i = 0; i < n; ++i) u.samples[i] = int64_t{1} << i;
  return u;
}

// The members of a bucket from its sample-sum mask; checks the bucket row is their plain mean.
std::vector<int64_t> members_of(const Uploads& u, int64_t mask, float bucket_value) {
  std::vector<int64_t> members;
  double sum = 0.0;
  for (int64_t i = 0; i < u.n; ++i)
    if (mask & (int64_t{1} << i)) {
      members.push_back(i);
      sum += u.data[i];
    }
  EXPECT_FALSE(members.empty());
  EXPECT_NEAR(bucket_value, sum / static_cast<double>(members.size()), 1e-3);  // values <= 1e4: float ulps
  return members;
}

// --------------------------------------------------------------------------------------- bucketing

TEST(FlBucketing, BucketsArePairMeansOfAPermutation) {
  // n = 5, s = 2: k = 3 buckets of 2, 2, 1 uploads. Uploads 1, 10, 100, 1000, 10000 with samples 1, 2,
  // 4, 8, 16: each bucket's sample sum names its members, and its row must be their plain mean; the
  // buckets partition the uploads. f = 2 reaches the inner rule unchanged (the paper's default).
  Uploads u = powers_of_ten(5);
  u.f = 2;
  u.round = 4;
  u.seed = 99;
  ThreadPool pool(2);
  u.pool = &pool;
  std::vector<Call> calls;
  bucketing(std::make_unique<RecordingMean>(&calls))->aggregate(u.input());
  ASSERT_EQ(calls.size(), 1u);
  const Call& c = calls[0];
  EXPECT_EQ(c.n, 3);
  EXPECT_EQ(c.f, 2);
  EXPECT_EQ(c.round, 4);
  EXPECT_EQ(c.seed, 99u);
  EXPECT_EQ(c.pool, &pool);
  EXPECT_EQ(c.clients, (std::vector<int64_t>{0, 1, 2}));
  std::set<int64_t> seen;
  std::vector<size_t> sizes;
  for (int64_t b = 0; b < 3; ++b) {
    const std::vector<int64_t> members = members_of(u, c.samples[b], c.rows[b]);
    sizes.push_back(members.size());
    seen.insert(members.begin(), members.end());
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1}));
  EXPECT_EQ(seen.size(), 5u);
}

TEST(FlBucketing, InnerRuleGetsTheUnchangedFByDefaultAndFedCapsScaledFAsAnOption) {
  // n = 5 uploads, s = 2 -> k = 3 buckets; f = 2. Default and inner_f = unchanged: the inner rule gets
  // f = 2; inner_f = scaled (FedCAP): floor(k f / n) = floor(6 / 5) = 1.
  Uploads u = powers_of_ten(5);
  u.f = 2;
  std::vector<Call> calls;
  bucketing(std::make_unique<RecordingMean>(&calls))->aggregate(u.input());
  bucketing(std::make_unique<RecordingMean>(&calls), {{"inner_f", std::string("unchanged")}})->aggregate(u.input());
  bucketing(std::make_unique<RecordingMean>(&calls), {{"inner_f", std::string("scaled")}})->aggregate(u.input());
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].f, 2);
  EXPECT_EQ(calls[1].f, 2);
  EXPECT_EQ(calls[2].f, 1);
}

TEST(FlBucketing, InnerPreconditionFailureNamesTheNumbersAndTheSettingsThatFit) {
  // Krum inside (the one real robust rule in this file: its precondition is the point). n = 10 uploads in
  // pairs give k = 5 buckets; Krum needs k > 2f + 2. With f = 2 unchanged: 5 > 6 fails. s = 1 gives
  // k = 10 > 6; inner_f = scaled keeps s = 2 with f = floor(5 * 2 / 10) = 1: 5 > 4.
  Uploads u = Uploads::gaussian(10, 3, 21);
  u.f = 2;
  const auto krum_inside = [] { return make_krum(rule_params("krum", krum_params())); };
  expect_error([&] { bucketing(krum_inside())->aggregate(u.input()); },
               {"bucketing", "n = 10", "s = 2", "k = 5", "f = 2", "krum: needs n > 2f + 2, got n = 5, f = 2",
                "s = 1 with inner_f = \"unchanged\" (k = 10)", "s = 2 with inner_f = \"scaled\" (k = 5)"});
  // The suggested settings do run.
  EXPECT_EQ(bucketing(krum_inside(), {{"s", int64_t{1}}})->aggregate(u.input()).update.size(), 3u);
  EXPECT_EQ(bucketing(krum_inside(), {{"inner_f", std::string("scaled")}})->aggregate(u.input()).update.size(), 3u);
  // n = 4, f = 2: Krum needs at least 7 rows with f = 2 and 5 with f = 1; nothing fits.
  Uploads few = Uploads::gaussian(4, 3, 22);
  few.f = 2;
  expect_error([&] { bucketing(krum_inside())->aggregate(few.input()); },
               {"bucketing", "k = 2", "no s or inner_f fits"});
}

TEST(FlBucketing, FedAvgInsideGivesThePlainMeanWhateverThePermutation) {
  // With equal samples, fedavg (sample weights) over bucket means weighs bucket b by |b| / n, so the
  // result is the plain mean of the uploads for any permutation, even with a smaller last bucket.
  Uploads u = Uploads::gaussian(7, 9, 13);
  const std::vector<float> mean = fedavg("uniform")->aggregate(u.input()).update;
  for (uint64_t seed : {1u, 2u, 3u}) {
    u.seed = seed;
    expect_near_rows(bucketing(fedavg("samples"))->aggregate(u.input()).update, mean, kOrderTolerance);
    expect_near_rows(bucketing(fedavg("samples"))->aggregate(u.permuted({6, 5, 4, 3, 2, 1, 0}).input()).update, mean,
                     kOrderTolerance);
  }
}

TEST(FlBucketing, FixedReshuffleKeepsThePermutationAcrossRounds) {
  Uploads u = powers_of_ten(6);
  std::vector<Call> fixed, per_round;
  for (uint64_t round = 1; round <= 4; ++round) {
    u.round = static_cast<int64_t>(round);
    u.seed = 1000 + round;  // the run loop derives a new seed each round
    bucketing(std::make_unique<RecordingMean>(&fixed), {{"reshuffle", std::string("fixed")}, {"seed", int64_t{5}}})
        ->aggregate(u.input());
    bucketing(std::make_unique<RecordingMean>(&per_round))->aggregate(u.input());
  }
  std::set<std::vector<int64_t>> fixed_layouts, round_layouts;
  for (const Call& c : fixed) fixed_layouts.insert(c.samples);
  for (const Call& c : per_round) round_layouts.insert(c.samples);
  EXPECT_EQ(fixed_layouts.size(), 1u);
  EXPECT_GT(round_layouts.size(), 1u);  // 4 draws of 90 pairings: all equal has probability 90^-3
}

TEST(FlBucketing, FlagsOfABucketGoToItsMembers) {
  Uploads u = powers_of_ten(4);
  std::vector<Call> calls;
  const AggregationOutput out =
      bucketing(std::make_unique<RecordingMean>(&calls, std::vector<int64_t>{1}))->aggregate(u.input());
  const std::vector<int64_t> flagged = members_of(u, calls[0].samples[1], calls[0].rows[1]);
  std::vector<uint8_t> expected(4, 0);
  for (int64_t i : flagged) expected[i] = 1;
  EXPECT_EQ(out.flagged, expected);
  // An inner rule that flags nobody -> bucketing flags nobody.
  EXPECT_TRUE(bucketing(std::make_unique<RecordingMean>(nullptr))->aggregate(u.input()).flagged.empty());
}

TEST(FlBucketing, IdenticalUploadsGiveThatUpload) {
  const Uploads u({{2, -1}, {2, -1}, {2, -1}, {2, -1}, {2, -1}});
  expect_near_rows(bucketing(std::make_unique<TestMedian>())->aggregate(u.input()).update, {2, -1}, 0.0f);
}

TEST(FlBucketing, ForwardsStateToTheInnerRule) {
  const Uploads u = powers_of_ten(4);
  auto a = bucketing(std::make_unique<RecordingMean>(nullptr));
  a->aggregate(u.input());
  a->aggregate(u.input());
  EXPECT_EQ(a->save_state().ints("calls"), (std::vector<int64_t>{2}));
  auto b = bucketing(std::make_unique<RecordingMean>(nullptr));
  b->load_state(a->save_state());
  EXPECT_EQ(b->save_state().ints("calls"), (std::vector<int64_t>{2}));
}

TEST(FlBucketing, RefusesBadParameters) {
  expect_error([] { bucketing(fedavg("uniform"), {{"s", int64_t{0}}}); }, {"server.bucketing.s"});
  expect_error(
      [] {
        bucketing(fedavg("uniform"), {{"reshuffle", std::string("never")}});
      },
      {"server.bucketing.reshuffle"});
  expect_error([] { bucketing(nullptr); }, {"bucketing", "inner"});
  Uploads u = powers_of_ten(3);
  u.f = 4;
  expect_error([&] { bucketing(fedavg("uniform"))->aggregate(u.input()); }, {"bucketing", "f = 4"});
}

// --------------------------------------------------------------------------------------------- gas

TEST(FlGas, HandComputedContiguousGroups) {
  // Rows (0, 0 | 1), (2, 1 | 3), (10, -10 | 100): P = 2 parameters then one buffer; p = 2 contiguous
  // groups {0}, {1}; inner = mean; f = 1.
  //   group 0: values 0, 2, 10, mean 4 -> distances 4, 2, 6
  //   group 1: values 0, 1, -10, mean -3 -> distances 3, 4, 7
  //   scores 7, 6, 13 -> drop row 2; plain mean of rows 0, 1 over all columns = (1, 0.5 | 2).
  Uploads u({{0, 0, 1}, {2, 1, 3}, {10, -10, 100}});
  u.P = 2;
  u.f = 1;
  std::vector<Call> calls;
  const AggregationOutput out =
      gas(std::make_unique<RecordingMean>(&calls), {{"p", int64_t{2}}, {"split", std::string("contiguous")}})
          ->aggregate(u.input());
  EXPECT_EQ(out.update, (std::vector<float>{1, 0.5f, 2}));
  EXPECT_EQ(out.flagged, (std::vector<uint8_t>{0, 0, 1}));
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].rows, (std::vector<float>{0, 2, 10}));
  EXPECT_EQ(calls[1].rows, (std::vector<float>{0, 1, -10}));
  EXPECT_EQ(calls[1].D, 1);
  EXPECT_EQ(calls[1].P, 1);
  EXPECT_EQ(calls[1].f, 1);
}

TEST(FlGas, GroupSizesAndMoreGroupsThanCoordinates) {
  // P = 10, p = 3: numpy array_split sizes 4, 3, 3. p = 1000 > P = 10: one group per coordinate.
  const Uploads u = Uploads::gaussian(4, 10, 2);
  std::vector<Call> calls;
  gas(std::make_unique<RecordingMean>(&calls), {{"p", int64_t{3}}})->aggregate(u.input());
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].D, 4);
  EXPECT_EQ(calls[1].D, 3);
  EXPECT_EQ(calls[2].D, 3);
  // The random split is a permutation: the groups together hold every value of row 0 once.
  std::multiset<float> row0(u.data.begin(), u.data.begin() + 10), seen;
  for (const Call& c : calls) seen.insert(c.rows.begin(), c.rows.begin() + c.D);
  EXPECT_EQ(seen, row0);
  calls.clear();
  gas(std::make_unique<RecordingMean>(&calls))->aggregate(u.input());
  EXPECT_EQ(calls.size(), 10u);
}

TEST(FlGas, OutliersAreDroppedWithAMedianInside) {
  // 8 honest N(0, 1) rows, 3 at +100 (D = 20), f = 3: per group the median sits among the honest
  // values, the attackers score ~ 100 sqrt(20) more, so they are exactly the 3 dropped and the result is
  // the honest mean.
  Uploads u = Uploads::gaussian(11, 20, 3);
  for (int64_t i = 8; i < 11; ++i)
    for (int64_t d = 0; d < u.D; ++d) u.row(i)[d] = 100.0f;
  u.f = 3;
  const AggregationOutput out = gas(std::make_unique<TestMedian>(), {{"p", int64_t{5}}})->aggregate(u.input());
  EXPECT_EQ(out.flagged, (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}));
  Uploads honest = u;
  honest.n = 8;
  honest.data.resize(8 * 20);
  expect_near_rows(out.update, fedavg("uniform")->aggregate(honest.input()).update, kOrderTolerance);
}

TEST(FlGas, PermutationOfClientsDoesNotChangeResult) {
  Uploads u = Uploads::gaussian(7, 30, 8);
  u.f = 2;
  const std::vector<int64_t> order = {2, 6, 1, 0, 5, 3, 4};
  const AggregationOutput a = gas(std::make_unique<TestMedian>(), {{"p", int64_t{4}}})->aggregate(u.input());
  const AggregationOutput b =
      gas(std::make_unique<TestMedian>(), {{"p", int64_t{4}}})->aggregate(u.permuted(order).input());
  expect_near_rows(a.update, b.update, kOrderTolerance);
  for (size_t k = 0; k < order.size(); ++k) EXPECT_EQ(b.flagged[k], a.flagged[order[k]]);
}

TEST(FlGas, IdenticalUploadsGiveThatUpload) {
  Uploads u({{3, 1, -2}, {3, 1, -2}, {3, 1, -2}, {3, 1, -2}});
  u.f = 1;
  EXPECT_EQ(gas(std::make_unique<TestMedian>())->aggregate(u.input()).update, (std::vector<float>{3, 1, -2}));
}

TEST(FlGas, ForwardsStateToTheInnerRule) {
  const Uploads u = Uploads::gaussian(3, 4, 1);
  auto a = gas(std::make_unique<RecordingMean>(nullptr), {{"p", int64_t{2}}});
  a->aggregate(u.input());
  EXPECT_EQ(a->save_state().ints("calls"), (std::vector<int64_t>{2}));  // one inner call per group
  auto b = gas(std::make_unique<RecordingMean>(nullptr));
  b->load_state(a->save_state());
  EXPECT_EQ(b->save_state().ints("calls"), (std::vector<int64_t>{2}));
}

TEST(FlGas, RefusesBadParameters) {
  expect_error([] { gas(fedavg("uniform"), {{"p", int64_t{0}}}); }, {"server.gas.p"});
  expect_error([] { gas(fedavg("uniform"), {{"split", std::string("blocks")}}); }, {"server.gas.split"});
  expect_error([] { gas(nullptr); }, {"gas", "inner"});
  Uploads u({{1}, {2}, {3}});
  u.f = 3;
  expect_error([&] { gas(fedavg("uniform"))->aggregate(u.input()); }, {"gas", "f = 3"});
}

}  // namespace
