// fedcpa (fl/defenses/fedcpa.cpp) and its math (fl/defenses/critical_parameters.h) on constructed inputs:
// similarity of identical and disjoint sets, hand-computed correlations and Jaccard indices, the weights of
// Eq. 8, top/bottom-k against a full sort (ties included), a known kept-client mean, the layout of weight
// columns, the first-round variants and their state, the Table 5 ablations, row permutation and threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "fl/core/client_models.h"
#include "fl/core/server_side.h"
#include "fl/base/thread_pool.h"
#include "fl/defenses/critical_parameters.h"
#include "fl/defenses/server_rule.h"
#include "nn/models.h"
#include "tests/defense_test_support.h"
#include "tests/test_support.h"

namespace bastion {
namespace {

using testing::expect_error;
using testing::expect_near_all;
using testing::rule_params;
using testing::run_rule;
using testing::Uploads;

// Similarities are sums of at most four terms computed in double from a handful of values: exact to 1e-12.
constexpr double kMathTolerance = 1e-12;
// A mean of a few O(1) float rows, summed in double in another row order, then rounded to float.
constexpr float kMeanOrderTolerance = 1e-6f;

CriticalSet set_of(std::vector<int64_t> index, std::vector<float> value) {
  return {std::move(index), std::move(value), {}};
}

std::vector<float> random_importance(int64_t K, uint64_t seed) {
  Generator g(seed);
  std::vector<float> v(static_cast<size_t>(K));
  for (float& x : v) x = std::fabs(static_cast<float>(g.normal()));
  return v;
}

TEST(FedcpaMath, IdenticalSetsGiveTheMaximumSimilarity) {
  std::vector<float> scratch;
  const CriticalSets a = select_critical_sets(random_importance(1000, 1), 20, scratch);
  for (const CorrelationKind kind : {CorrelationKind::Spearman, CorrelationKind::Pearson}) {
    EXPECT_NEAR(critical_similarity(a, a, {kind}), 4.0, kMathTolerance);  // J = 1 and rho01 = 1, twice
    EXPECT_NEAR(critical_set_similarity(a.top, a.top, kind), 2.0, kMathTolerance);
  }
}

TEST(FedcpaMath, DisjointSetsGiveJaccardZeroAndNoCorrelation) {
  const CriticalSet a = set_of({0, 1, 2}, {3, 2, 1}), b = set_of({3, 4, 5}, {3, 2, 1});
  EXPECT_EQ(critical_set_similarity(a, b, CorrelationKind::Spearman), 0.0);
  EXPECT_EQ(critical_set_similarity(a, b, CorrelationKind::Pearson), 0.0);
}

// A = {1,2,3,4}, B = {2,3,4,5}: J = 3/5. On the shared {2,3,4}: a = (3,2,1).
TEST(FedcpaMath, HandComputedSimilarities) {
  const CriticalSet a = set_of({1, 2, 3, 4}, {4, 3, 2, 1});
  // b = (1,2,3): reversed order, rho = -1 for both kinds -> rho01 = 0.
  const CriticalSet reversed = set_of({2, 3, 4, 5}, {1, 2, 3, 9});
  EXPECT_NEAR(critical_set_similarity(a, reversed, CorrelationKind::Spearman), 0.6, kMathTolerance);
  EXPECT_NEAR(critical_set_similarity(a, reversed, CorrelationKind::Pearson), 0.6, kMathTolerance);
  // b = (6,5,1): same order (Spearman 1) but not linear: Pearson = 5 / sqrt(2 * 14).
  const CriticalSet same_order = set_of({2, 3, 4, 5}, {6, 5, 1, 9});
  EXPECT_NEAR(critical_set_similarity(a, same_order, CorrelationKind::Spearman), 1.6, kMathTolerance);
  EXPECT_NEAR(critical_set_similarity(a, same_order, CorrelationKind::Pearson),
              0.6 + (5.0 / std::sqrt(28.0) + 1.0) / 2.0, kMathTolerance);
}

TEST(FedcpaMath, UndefinedCorrelationsCountZero) {
  const std::vector<double> one = {2.0}, other = {5.0};
  EXPECT_EQ(correlation_01(one, other, CorrelationKind::Spearman), 0.0);  // one shared index
  const std::vector<double> flat = {1.0, 1.0, 1.0}, rising = {1.0, 2.0, 3.0};
  EXPECT_EQ(correlation_01(flat, rising, CorrelationKind::Pearson), 0.0);  // a constant side
  EXPECT_EQ(correlation_01(rising, flat, CorrelationKind::Spearman), 0.0);
  EXPECT_EQ(correlation_01({}, {}, CorrelationKind::Spearman), 0.0);
}

TEST(FedcpaMath, AverageRanksShareTies) {
  const std::vector<double> x = {3.0, 1.0, 3.0, 2.0, 3.0};
  EXPECT_EQ(average_ranks(x), (std::vector<double>{4.0, 1.0, 4.0, 2.0, 4.0}));
  // Spearman with ties = Pearson of the average ranks: (4,1,4,2,4) vs (1,2,3,4,5).
  const std::vector<double> y = {1, 2, 3, 4, 5};
  const std::vector<double> r = average_ranks(x);
  EXPECT_NEAR(correlation_01(x, y, CorrelationKind::Spearman), correlation_01(r, y, CorrelationKind::Pearson),
              kMathTolerance);
}

// The sets must be the first k of a full sort by (value desc, index asc) for the top and (value asc, index
// asc) for the bottom, with each index's own value.
void expect_sets_of_a_full_sort(const std::vector<float>& v, int64_t k, std::vector<float>& scratch) {
  const int64_t K = static_cast<int64_t>(v.size());
  std::vector<int64_t> order(static_cast<size_t>(K));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::vector<int64_t> desc = order, asc = order;
  std::stable_sort(desc.begin(), desc.end(), [&](int64_t a, int64_t b) { return v[a] > v[b]; });
  std::stable_sort(asc.begin(), asc.end(), [&](int64_t a, int64_t b) { return v[a] < v[b]; });
  std::vector<int64_t> want_top(desc.begin(), desc.begin() + k), want_bottom(asc.begin(), asc.begin() + k);
  std::sort(want_top.begin(), want_top.end());
  std::sort(want_bottom.begin(), want_bottom.end());
  const CriticalSets got = select_critical_sets(v, k, scratch);
  EXPECT_EQ(got.top.index, want_top) << "K=" << K << " k=" << k;
  EXPECT_EQ(got.bottom.index, want_bottom) << "K=" << K << " k=" << k;
  for (const CriticalSet* set : {&got.top, &got.bottom})
    for (size_t t = 0; t < set->index.size(); ++t) EXPECT_EQ(set->value[t], v[set->index[t]]);
}

// Values drawn from 6 levels, so nearly every cut falls inside a run of ties.
TEST(FedcpaMath, TopAndBottomKEqualAFullSortWithTies) {
  Generator g(11);
  std::vector<float> scratch;
  for (const int64_t K : {1, 7, 1000}) {
    std::vector<float> v(static_cast<size_t>(K));
    for (float& x : v) x = static_cast<float>(g.below(6)) * 0.5f;
    for (const int64_t k : {int64_t{1}, K / 3 + 1, K})
      if (k <= K) expect_sets_of_a_full_sort(v, k, scratch);
  }
  expect_error([&] { select_critical_sets(std::vector<float>(5, 1.0f), 6, scratch); }, {"fedcpa", "k = 6"});
}

// The selection's histogram buckets by the top 16 bits of an order-preserving key: negative values, -0
// beside +0 (equal values, so one run of ties), values that all share one bucket (1 + a few ulps), and
// cuts at the bucket edges (k = every bucket's count boundary of a two-bucket vector).
TEST(FedcpaMath, TopAndBottomKEqualAFullSortOnSignedValuesZerosAndOneBucket) {
  Generator g(12);
  std::vector<float> scratch;
  std::vector<float> mixed(3000);
  for (float& x : mixed) {
    const int64_t kind = g.below(4);
    x = kind == 0 ? -0.0f : kind == 1 ? 0.0f : static_cast<float>(g.normal()) * (kind == 2 ? 1e-3f : 10.0f);
  }
  for (const int64_t k : {1, 2, 700, 1500, 2999, 3000}) expect_sets_of_a_full_sort(mixed, k, scratch);
  std::vector<float> one_bucket(2000);
  for (float& x : one_bucket) x = std::nextafter(1.0f, 2.0f) + static_cast<float>(g.below(50)) * 1.2e-7f;
  for (const int64_t k : {1, 333, 1999}) expect_sets_of_a_full_sort(one_bucket, k, scratch);
  std::vector<float> two_buckets(100, 1.0f);
  for (size_t d = 0; d < 100; d += 3) two_buckets[d] = 4.0f;
  for (int64_t k = 1; k <= 100; ++k) expect_sets_of_a_full_sort(two_buckets, k, scratch);
}

// Spearman's ranks read off each set's value order are the ranks of the shared values sorted anew: the same
// similarity bit for bit as a hand-built copy without the order, here with ties in the shared values.
TEST(FedcpaMath, SpearmanFromTheSetsValueOrderEqualsRankingTheSharedValues) {
  Generator g(13);
  std::vector<float> first(4000), second(4000);
  for (size_t d = 0; d < first.size(); ++d) {
    first[d] = static_cast<float>(g.below(40)) + 0.25f * static_cast<float>(d % 7);
    second[d] = first[d] + static_cast<float>(g.below(12));  // correlated, tied in places
  }
  std::vector<float> scratch;
  CriticalSets a = select_critical_sets(first, 600, scratch), b = select_critical_sets(second, 600, scratch);
  for (CriticalSet* set : {&a.top, &a.bottom, &b.top, &b.bottom}) order_by_value(*set);
  auto without_order = [](CriticalSet s) {
    s.value_order.clear();
    return s;
  };
  for (const auto& [x, y] : {std::pair{&a.top, &b.top}, std::pair{&a.bottom, &b.bottom}}) {
    const double with = critical_set_similarity(*x, *y, CorrelationKind::Spearman);
    EXPECT_EQ(with, critical_set_similarity(without_order(*x), without_order(*y), CorrelationKind::Spearman));
    EXPECT_GT(with, 1.0);  // a real overlap and a positive correlation, so the case tests the ranks
  }
}

// Eq. 8 by hand: N = (0, 0.6 * 5, 5) scales to (0, 0.6, 1): lambda = (0, ln 1.5 + 0.5, 1).
TEST(FedcpaMath, WeightsAreTheClippedInverseSigmoidOfTheScaledNormality) {
  const std::vector<double> w = critical_weights(std::vector<double>{2.0, 5.0, 7.0});
  EXPECT_EQ(w[0], 0.0);
  EXPECT_NEAR(w[1], std::log(1.5) + 0.5, kMathTolerance);
  EXPECT_EQ(w[2], 1.0);
  // Scaled 0.25 gives ln(1/3) + 0.5 < 0 -> 0; scaled 0.75 gives ln 3 + 0.5 > 1 -> 1.
  EXPECT_EQ(critical_weights(std::vector<double>{0.0, 1.0, 3.0, 4.0}), (std::vector<double>{0.0, 0.0, 1.0, 1.0}));
  EXPECT_EQ(critical_weights(std::vector<double>{3.0, 3.0}), (std::vector<double>{1.0, 1.0}));  // all equal
}

// n honest clients whose K = 100 updates share one shape (Delta_d = (1 + d/100)(1 + 0.1 i): importances
// Delta^2 at g = 0 rank the coordinates alike), and attackers whose top half is reversed (top set {50..59}
// instead of {90..99}, bottom set {0..9} like everyone's).
Uploads shaped_round(int64_t honest, int64_t attackers) {
  std::vector<std::vector<float>> rows;
  for (int64_t i = 0; i < honest + attackers; ++i) {
    std::vector<float> row(100);
    for (int64_t d = 0; d < 100; ++d) {
      const int64_t rank = i >= honest && d >= 50 ? 149 - d : d;
      row[d] = (1.0f + static_cast<float>(rank) / 100.0f) * (1.0f + 0.1f * static_cast<float>(i));
    }
    rows.push_back(row);
  }
  return Uploads(rows);
}

// Honest sims are 4 (same sets, same order), honest-attacker sims 2 (bottom half only): N_honest = (3*4 +
// 2)/4, N_attacker = (3*2 + 4)/4, so lambda = (1, 1, 1, 0) and the update is the honest mean.
TEST(Fedcpa, KnownCaseKeepsTheHonestMeanAndFlagsTheAttacker) {
  const Uploads u = shaped_round(3, 1);
  for (const char* correlation : {"spearman", "pearson"}) {
    const AggregationOutput out =
        run_rule(make_fedcpa, "fedcpa", fedcpa_params(), u, {{"k", 0.1}, {"correlation", std::string(correlation)}});
    EXPECT_EQ(out.flagged, (std::vector<uint8_t>{0, 0, 0, 1})) << correlation;
    expect_near_all(out.update, u.mean_rows({0, 1, 2}), kMeanOrderTolerance);
  }
}

// Table 5: without the top sets the attacker (who differs only there) looks honest: all N equal, weight 1.
TEST(Fedcpa, AblationsChangeWhatCounts) {
  const Uploads u = shaped_round(3, 1);
  auto flags = [&](const std::string& ablation) {
    return run_rule(make_fedcpa, "fedcpa", fedcpa_params(), u, {{"k", 0.1}, {"ablation", ablation}}).flagged;
  };
  EXPECT_EQ(flags("without-topk"), (std::vector<uint8_t>{0, 0, 0, 0}));
  EXPECT_EQ(flags("without-bottomk"), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(flags("without-global"), (std::vector<uint8_t>{0, 0, 0, 1}));
  // No previous global model in the first round (first_round = skip): nothing left to compare, plain mean.
  const AggregationOutput local_off =
      run_rule(make_fedcpa, "fedcpa", fedcpa_params(), u, {{"k", 0.1}, {"ablation", std::string("without-local")}});
  EXPECT_EQ(local_off.flagged, (std::vector<uint8_t>{0, 0, 0, 0}));
  expect_near_all(local_off.update, u.mean_rows({0, 1, 2, 3}), kMeanOrderTolerance);
}

// Eq. 9 on random uploads with fractional weights: sum lambda_i Delta_i / #{lambda > 0}, not / sum lambda,
// with lambda recomputed here from the pure functions.
TEST(Fedcpa, UpdateDividesByTheNumberOfKeptClients) {
  Uploads u = Uploads::gaussian(8, 300, 21, 0.0f, 1.0f);
  std::vector<float> scratch;
  std::vector<CriticalSets> sets;
  for (int64_t i = 0; i < u.n; ++i) {
    std::vector<float> p(300);
    for (int64_t d = 0; d < 300; ++d) p[d] = critical_importance(u.row(i)[d], u.row(i)[d]);
    sets.push_back(select_critical_sets(p, 30, scratch));
  }
  const std::vector<double> lambda = critical_weights(critical_normality(sets, nullptr, {}));
  ASSERT_TRUE(std::any_of(lambda.begin(), lambda.end(), [](double l) { return l > 0.0 && l < 1.0; }))
      << "the case must have a fractional weight to tell the two denominators apart";
  const int64_t kept = std::count_if(lambda.begin(), lambda.end(), [](double l) { return l > 0.0; });
  std::vector<float> want(300);
  for (int64_t d = 0; d < 300; ++d) {
    double sum = 0.0;
    for (int64_t i = 0; i < u.n; ++i) sum += lambda[i] * u.row(i)[d];
    want[d] = static_cast<float>(sum / static_cast<double>(kept));
  }
  const AggregationOutput out = run_rule(make_fedcpa, "fedcpa", fedcpa_params(), u, {{"k", 0.1}});
  expect_near_all(out.update, want, kMeanOrderTolerance);
  for (int64_t i = 0; i < u.n; ++i) EXPECT_EQ(out.flagged[i], lambda[i] > 0.0 ? 0 : 1) << i;
}

// The pair similarities run on the pool, each into its own slot: the same scores bit for bit, with the
// global term too.
TEST(Fedcpa, NormalityOnAPoolIsTheSerialOne) {
  Uploads u = Uploads::gaussian(7, 400, 41, 0.0f, 1.0f);
  std::vector<float> scratch;
  std::vector<CriticalSets> sets;
  for (int64_t i = 0; i <= u.n; ++i) {  // the last one plays the global model
    std::vector<float> p(400);
    for (int64_t d = 0; d < 400; ++d) p[d] = critical_importance(u.row(i % u.n)[d], u.row((i + 1) % u.n)[d]);
    sets.push_back(select_critical_sets(p, 40, scratch));
  }
  const std::span<const CriticalSets> clients(sets.data(), static_cast<size_t>(u.n));
  ThreadPool pool(3);
  EXPECT_EQ(critical_normality(clients, &sets.back(), {}, &pool), critical_normality(clients, &sets.back(), {}));
  CriticalSimilarityOptions local_only;
  local_only.use_global = false;
  EXPECT_EQ(critical_normality(clients, &sets.back(), local_only, &pool), critical_normality(clients, nullptr, {}));
}

TEST(Fedcpa, RowPermutationAndThreadCountDoNotChangeTheResult) {
  Uploads u = Uploads::gaussian(9, 500, 31, 0.1f, 1.0f);
  for (float& g : u.global) g = 0.5f;
  const AggregationOutput a = run_rule(make_fedcpa, "fedcpa", fedcpa_params(), u, {{"k", 0.05}});
  const std::vector<int64_t> order = {4, 8, 0, 2, 7, 1, 6, 3, 5};
  const AggregationOutput b = run_rule(make_fedcpa, "fedcpa", fedcpa_params(), u.permuted(order), {{"k", 0.05}});
  expect_near_all(b.update, a.update, kMeanOrderTolerance);
  for (size_t k = 0; k < order.size(); ++k) EXPECT_EQ(b.flagged[k], a.flagged[order[k]]) << k;
  ThreadPool pool(3);
  u.pool = &pool;
  const AggregationOutput c = run_rule(make_fedcpa, "fedcpa", fedcpa_params(), u, {{"k", 0.05}});
  EXPECT_EQ(c.update, a.update);
  EXPECT_EQ(c.flagged, a.flagged);
}

// Only the weight columns are analysed: the answer equals the run on a matrix of those columns alone (the
// other columns are averaged with the same weights, so compare flags), whatever the other columns hold.
TEST(Fedcpa, OnlyWeightColumnsAreAnalysed) {
  Uploads full = shaped_round(3, 1);  // 100 columns; mark [0, 40) and [60, 100) as weights
  Uploads mixed = full;
  for (int64_t i = 0; i < mixed.n; ++i)
    for (int64_t d = 40; d < 60; ++d) mixed.row(i)[d] = i == 0 ? 50.0f + static_cast<float>(d) : 1.0f;  // "biases"
  mixed.weight_columns = {{0, 40}, {60, 100}};
  const AggregationOutput out = run_rule(make_fedcpa, "fedcpa", fedcpa_params(), mixed, {{"k", 0.1}});
  EXPECT_EQ(out.flagged, (std::vector<uint8_t>{0, 0, 0, 1}));
  mixed.weight_columns = {};  // the same matrix analysed over every column: row 0's biases dominate its top set
  EXPECT_NE(run_rule(make_fedcpa, "fedcpa", fedcpa_params(), mixed, {{"k", 0.1}}).flagged, out.flagged);
  mixed.weight_columns = {{60, 100}, {0, 40}};
  expect_error([&] { run_rule(make_fedcpa, "fedcpa", fedcpa_params(), mixed); },
               {"fedcpa", "weight columns", "sorted"});
}

// server_side.h: a model's conv and linear weights (2 or 4 dimensions), renumbered inside shared columns.
TEST(Fedcpa, WeightColumnsOfAModelAreItsConvAndLinearWeights) {
  const std::unique_ptr<Model> model = make_model("lenet", InputShape{1, 28, 28}, 10, 1);
  const SharedColumns all = shared_columns(*model, SharedPart::All);
  const std::vector<ColumnRange> columns = weight_columns(*model, all);
  int64_t want = 0, got = 0;
  for (const ParameterView& p : model->parameters()) {
    const int rank = p.value.shape().rank();
    if (rank == 2 || rank == 4) want += p.end - p.begin;
    const bool inside = std::any_of(columns.begin(), columns.end(),
                                    [&](const ColumnRange& r) { return r.begin <= p.begin && p.end <= r.end; });
    EXPECT_EQ(inside, rank == 2 || rank == 4) << p.name;
  }
  for (const ColumnRange& r : columns) got += r.end - r.begin;
  EXPECT_EQ(got, want);
  EXPECT_GT(want, 0);
}

// The reference schedule. skip: round 1 has no global term and remembers g; round 2 compares with
// |(g2 - g1) * g2|. local-mean (code): round 1 remembers g + mean Delta.
TEST(Fedcpa, FirstRoundVariantsRememberTheirReference) {
  Uploads u = shaped_round(3, 1);
  for (int64_t d = 0; d < u.D; ++d) u.global[d] = 0.01f * static_cast<float>(d % 7);
  for (const char* mode : {"skip", "local-mean"}) {
    std::unique_ptr<ServerRule> rule =
        make_fedcpa(rule_params("fedcpa", fedcpa_params(), {{"k", 0.1}, {"first_round", std::string(mode)}}));
    EXPECT_TRUE(rule->save_state().empty());
    rule->aggregate(u.input());
    const RuleState saved = rule->save_state();
    const std::vector<float>& state = saved.floats("previous_global");
    ASSERT_EQ(state.size(), 100u);
    std::vector<float> want = u.global;
    if (std::string(mode) == "local-mean") {
      const std::vector<float> mean = u.mean_rows({0, 1, 2, 3});
      for (int64_t d = 0; d < u.D; ++d) want[d] = static_cast<float>(double{u.global[d]} + mean[d]);
    }
    expect_near_all(state, want, kMeanOrderTolerance);
    // A restored rule answers round 2 like the one that ran round 1.
    std::unique_ptr<ServerRule> restored =
        make_fedcpa(rule_params("fedcpa", fedcpa_params(), {{"k", 0.1}, {"first_round", std::string(mode)}}));
    restored->load_state(saved);
    Uploads next = u;
    for (int64_t d = 0; d < u.D; ++d) next.global[d] += 0.02f * static_cast<float>(d % 5);
    EXPECT_EQ(restored->aggregate(next.input()).update, rule->aggregate(next.input()).update) << mode;
  }
  std::unique_ptr<ServerRule> rule = make_fedcpa(rule_params("fedcpa", fedcpa_params()));
  // Checkpoints written before the codec held [P, values]: they still load, and are checked the same way.
  rule->load_state(RuleState::from_legacy({3.0f, 1.0f, 2.0f, 3.0f}));
  expect_error([&] { rule->aggregate(u.input()); }, {"fedcpa", "3 parameters", "100"});
  expect_error([&] { rule->load_state(RuleState::from_legacy({2.0f, 1.0f, NAN})); }, {"fedcpa", "state", "NaN"});
  RuleState blocks;
  blocks.put_floats("previous_global", {1.0f, NAN});
  blocks.put_int("parameters", 2);
  expect_error([&] { rule->load_state(blocks); }, {"previous_global", "NaN"});
}

// The memory matters: with g_prev = 0 and g = the attacker's own shape, the global model's critical sets
// are the attacker's (top {50..59}) and it wins: N_attacker = 2.5 + 4, N_honest = 3.5 + 2 (bottom only).
// A rule without that memory (first round, skip) flags the attacker as in the known case.
TEST(Fedcpa, PreviousGlobalModelDecidesTheGlobalTerm) {
  Uploads u = shaped_round(3, 1);
  for (int64_t d = 0; d < u.D; ++d) u.global[d] = u.row(3)[d] / 1.3f;  // the attacker's shape, factor 1
  std::unique_ptr<ServerRule> remembering = make_fedcpa(rule_params("fedcpa", fedcpa_params(), {{"k", 0.1}}));
  RuleState zero_previous;
  zero_previous.put_floats("previous_global", std::vector<float>(100, 0.0f));
  zero_previous.put_int("parameters", 100);
  remembering->load_state(zero_previous);
  EXPECT_EQ(remembering->aggregate(u.input()).flagged, (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(run_rule(make_fedcpa, "fedcpa", fedcpa_params(), u, {{"k", 0.1}}).flagged,
            (std::vector<uint8_t>{0, 0, 0, 1}));
}

TEST(Fedcpa, RefusesBadParametersAndEmptyRounds) {
  expect_error(
      [] {
        rule_params("fedcpa", fedcpa_params(), {{"correlation", std::string("kendall")}});
      },
      {"correlation", "kendall"});
  expect_error([] { rule_params("fedcpa", fedcpa_params(), {{"k", 0.9}}); }, {"k"});
  expect_error(
      [] {
        rule_params("fedcpa", fedcpa_params(), {{"ablation", std::string("without-all")}});
      },
      {"ablation"});
  Uploads none(std::vector<std::vector<float>>{});
  expect_error([&] { run_rule(make_fedcpa, "fedcpa", fedcpa_params(), none); }, {"fedcpa", "no upload"});
}

}  // namespace
}  // namespace bastion
