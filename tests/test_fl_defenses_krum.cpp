// Tests for the distance-based server rules (krum, multi-krum, bulyan) and their shared helper
// (fl/defenses/krum_scores.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "defense_test_support.h"
#include "fl/base/thread_pool.h"
#include "fl/defenses/coordinate_wise.h"
#include "fl/defenses/krum_scores.h"
#include "test_support.h"

namespace bastion {
namespace {

using testing::expect_error;
using testing::rule_params;
using testing::Uploads;

using testing::kHandTolerance;  // means are summed in double and rounded once to float
// Distances come from GEMM on centred rows (kernels/cpu/vector.h): absolute error about
// sqrt(P) * 6e-8 * |row - mean|^2, here |row - mean|^2 <= 200 for P = 1: 1e-5 relative is ample.
constexpr double kGemmTolerance = 1e-5;

using Maker = std::unique_ptr<ServerRule> (*)(const Params&);

AggregationOutput run_rule(const char* name, const std::vector<ParamSpec>& specs, Maker make, const Uploads& u,
                           const std::map<std::string, ParamValue>& given = {}) {
  return make(rule_params(name, specs, given))->aggregate(u.input());
}
AggregationOutput krum(const Uploads& u, const std::map<std::string, ParamValue>& given = {}) {
  return run_rule("krum", krum_params(), make_krum, u, given);
}
AggregationOutput multi_krum(const Uploads& u, const std::map<std::string, ParamValue>& given = {}) {
  return run_rule("multi-krum", multi_krum_params(), make_multi_krum, u, given);
}
AggregationOutput bulyan(const Uploads& u, const std::map<std::string, ParamValue>& given = {}) {
  return run_rule("bulyan", bulyan_params(), make_bulyan, u, given);
}

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t d = 0; d < want.size(); ++d)
    EXPECT_NEAR(got[d], want[d], kHandTolerance * std::max(1.0, std::abs(want[d]))) << "column " << d;
}

std::vector<uint8_t> flags(std::initializer_list<int> v) { return std::vector<uint8_t>(v.begin(), v.end()); }

// Honest rows N(0, 1) first, then `outliers` rows of 1e6 (all columns, colluding: one vector).
Uploads with_outliers(int64_t honest, int64_t outliers, int64_t D) {
  Uploads u = Uploads::gaussian(honest + outliers, D, 12);
  for (int64_t i = honest; i < honest + outliers; ++i) std::fill_n(u.row(i), D, 1e6f);
  u.f = outliers;
  return u;
}

bool is_one_of_rows(const Uploads& u, int64_t rows, const std::vector<float>& v) {
  for (int64_t i = 0; i < rows; ++i)
    if (v.size() == static_cast<size_t>(u.D) && std::equal(v.begin(), v.end(), u.data.begin() + i * u.D)) return true;
  return false;
}

// ---- the 1-D example used below: points 0, 1, 3, 7, 20, n = 5, f = 1, k = n - f - 2 = 2 ----
// Squared distances and the two nearest (k = 2):
//   0: 1, 9, 49, 400  -> 1 + 9 = 10        1: 1, 4, 36, 361 -> 1 + 4 = 5
//   3: 9, 4, 16, 289  -> 4 + 9 = 13        7: 49, 36, 16, 169 -> 16 + 36 = 52
//   20: 400, 361, 289, 169 -> 169 + 289 = 458
// Krum picks row 1 (value 1).
Uploads line_example() {
  Uploads u({{0}, {1}, {3}, {7}, {20}});
  u.f = 1;
  return u;
}

TEST(FlKrumScores, HandExample) {
  Uploads u = line_example();
  const std::vector<float> dist = pairwise_parameter_distances(u.input());
  const std::vector<int64_t> all = {0, 1, 2, 3, 4};
  const std::vector<double> scores = krum_scores(dist, 5, all, 2);
  const std::vector<double> want = {10, 5, 13, 52, 458};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(scores[i], want[i], kGemmTolerance * want[i]) << i;
  EXPECT_EQ(nearest_rows(dist, 5, 1, 3), (std::vector<int64_t>{1, 0, 2}));
}

TEST(FlKrumScores, DistancesIgnoreBatchNormColumns) {
  Uploads u({{0, 100}, {3, -100}});
  u.P = 1;
  EXPECT_EQ(pairwise_parameter_distances(u.input()), (std::vector<float>{0, 9, 9, 0}));
}

// ---- krum ----

TEST(FlKrum, HandExample) {
  const AggregationOutput out = krum(line_example());
  expect_near_all(out.update, {1});
  EXPECT_EQ(out.flagged, flags({1, 0, 1, 1, 1}));
  // score = fedcap (k + 1 smallest with the self distance 0) is the same number.
  EXPECT_EQ(krum(line_example(), {{"score", std::string("fedcap")}}).update, out.update);
}

TEST(FlKrum, NeighbourhoodOutput) {
  // Best row 1 (value 1); its k + 1 = 3 nearest, itself included: 1, 0 (distance 1), 3 (distance 4):
  // (1 + 0 + 3) / 3 = 4/3; rows 3 and 4 (values 7, 20) are flagged.
  const AggregationOutput out = krum(line_example(), {{"output", std::string("neighbourhood")}});
  expect_near_all(out.update, {4.0 / 3.0});
  EXPECT_EQ(out.flagged, flags({0, 0, 0, 1, 1}));
}

TEST(FlKrum, NeighboursParameter) {
  // neighbours = 4 (every other upload, SPMC): 0: 1+9+49+400 = 459; 1: 1+4+36+361 = 402;
  // 3: 9+4+16+289 = 318; 7: 49+36+16+169 = 270; 20: 1219 -> row 3 (value 7).
  expect_near_all(krum(line_example(), {{"neighbours", int64_t{4}}}).update, {7});
  expect_error([&] { krum(line_example(), {{"neighbours", int64_t{5}}}); }, {"krum", "neighbours", "5", "n = 5"});
}

TEST(FlKrum, EuclideanDistancesOption) {
  // Points 0, 2, 9, 14, 19 (n = 5, f = 1, k = 2).
  //   squared:   0: 4+81 = 85; 2: 4+49 = 53; 9: 25+49 = 74; 14: 25+25 = 50; 19: 25+100 = 125 -> 14
  //   Euclidean: 0: 2+9 = 11;  2: 2+7 = 9;   9: 5+7 = 12;   14: 5+5 = 10;   19: 5+10 = 15  -> 2
  Uploads u({{0}, {2}, {9}, {14}, {19}});
  u.f = 1;
  expect_near_all(krum(u).update, {14});
  expect_near_all(krum(u, {{"squared", false}}).update, {2});
}

TEST(FlKrum, DistancesIgnoreBatchNormColumnsButOutputCoversThem) {
  // Column 1 is a buffer; were it counted, row 1's distances would all grow by 50^2 and row 1 would lose.
  Uploads u({{0, 0}, {1, 50}, {3, 0}, {7, 0}, {20, 0}});
  u.P = 1;
  u.f = 1;
  expect_near_all(krum(u).update, {1, 50});
}

TEST(FlKrum, RowPermutationSelectsTheSameUpload) {
  Uploads u = Uploads::gaussian(9, 200, 4);
  u.f = 2;
  const std::vector<float> base = krum(u).update;
  EXPECT_EQ(krum(u.permuted({4, 8, 0, 6, 1, 7, 2, 5, 3})).update, base);
}

TEST(FlKrum, IdenticalUploadsGiveThatUpload) {
  Uploads g = Uploads::gaussian(1, 40, 9);
  std::vector<float> row(g.data.begin(), g.data.end());
  Uploads u({row, row, row, row, row});
  u.f = 1;
  EXPECT_EQ(krum(u).update, row);
}

TEST(FlKrum, OutliersNeverSelectedAndFlagged) {
  Uploads u = with_outliers(10, 3, 100);
  const AggregationOutput out = krum(u);
  EXPECT_TRUE(is_one_of_rows(u, 10, out.update));
  for (int64_t i = 10; i < 13; ++i) EXPECT_EQ(out.flagged[i], 1) << "row " << i;
}

TEST(FlKrum, RefusesTooFewUploads) {
  Uploads u = line_example();
  u.f = 2;
  expect_error([&] { krum(u); }, {"krum", "n > 2f + 2", "n = 5", "f = 2"});
}

TEST(FlKrum, PoolGivesBitwiseSameResultAsSerial) {
  Uploads u = Uploads::gaussian(9, 2 * 4096 + 5, 23);
  u.f = 2;
  const std::vector<float> serial = krum(u, {{"output", std::string("neighbourhood")}}).update;
  ThreadPool pool(2);
  u.pool = &pool;
  EXPECT_EQ(krum(u, {{"output", std::string("neighbourhood")}}).update, serial);
}

// ---- multi-krum ----
// Points 0, 1, 2, 5, 6, 8 (n = 6, f = 1), m = 2. Squared distances:
//   0: 1, 4, 25, 36, 64     1: 1, 1, 16, 25, 49     2: 4, 1, 9, 16, 36
//   5: 25, 16, 9, 1, 9      6: 36, 25, 16, 1, 4     8: 64, 49, 36, 9, 4
// one-shot, k = n - f - 2 = 3: 0: 30; 1: 18; 2: 14; 5: 19; 6: 21; 8: 49 -> rows 2, 1: mean 1.5.
// iterative: pick row 2 (14); R = {0, 1, 5, 6, 8}, |R| = 5 > 2f + 2 = 4, k = 2: 0: 1+25 = 26; 1: 1+16 = 17;
//   5: 1+9 = 10; 6: 1+4 = 5; 8: 4+9 = 13 -> row 4 (value 6): mean (2 + 6) / 2 = 4.
Uploads multi_example() {
  Uploads u({{0}, {1}, {2}, {5}, {6}, {8}});
  u.f = 1;
  return u;
}

TEST(FlMultiKrum, HandExampleIterative) {
  const AggregationOutput out =
      multi_krum(multi_example(), {{"m", int64_t{2}}, {"selection", std::string("iterative")}});
  expect_near_all(out.update, {4});
  EXPECT_EQ(out.flagged, flags({1, 1, 0, 1, 0, 1}));
}

TEST(FlMultiKrum, HandExampleOneShotIsTheDefault) {
  for (const char* selection : {"", "one-shot"}) {
    std::map<std::string, ParamValue> given = {{"m", int64_t{2}}};
    if (*selection) given["selection"] = std::string(selection);
    const AggregationOutput out = multi_krum(multi_example(), given);
    expect_near_all(out.update, {1.5});
    EXPECT_EQ(out.flagged, flags({1, 0, 0, 1, 1, 1})) << selection;
  }
}

// multi_example with the default m = n - f = 5: the two selections drop different uploads.
// one-shot drops the worst score, row 5 (49): mean (0 + 1 + 2 + 5 + 6) / 5 = 2.8.
// iterative picks row 2, then row 4 (above); then |R| = 4 = 2f + 2, so the last scores (0: 26, 1: 17,
// 5: 10, 8: 13) order the rest: rows 3, 5, 1. Row 0 is dropped: mean (1 + 2 + 5 + 6 + 8) / 5 = 4.4.
TEST(FlMultiKrum, OneShotAndIterativeKeepDifferentSets) {
  const AggregationOutput one_shot = multi_krum(multi_example());
  expect_near_all(one_shot.update, {2.8});
  EXPECT_EQ(one_shot.flagged, flags({0, 0, 0, 0, 0, 1}));
  const AggregationOutput iterative = multi_krum(multi_example(), {{"selection", std::string("iterative")}});
  expect_near_all(iterative.update, {4.4});
  EXPECT_EQ(iterative.flagged, flags({1, 0, 0, 0, 0, 0}));
}

// ndss21 on multi_example: m = n - 2f - 2 = 2 picks; each score sums the |R| - f - 2 smallest entries of
// the row with its own 0 among them, i.e. |R| - f - 3 other distances.
//   |R| = 6, 2 others: 0: 1+4 = 5; 1: 1+1 = 2; 2: 1+4 = 5; 5: 1+9 = 10; 6: 1+4 = 5; 8: 4+9 = 13 -> row 1
//   |R| = 5, 1 other: 0: 4; 2: 4; 5: 1; 6: 1; 8: 4 -> rows 3 and 4 tie, the lower index (row 3, value 5)
//   |R| = 4 = 2f + 2: stop. Mean (1 + 5) / 2 = 3. (iterative with m = 2 keeps rows 2 and 4: mean 4.)
TEST(FlMultiKrum, Ndss21CountsTheSelfDistanceAndStopsAt2fPlus2Left) {
  const AggregationOutput out = multi_krum(multi_example(), {{"selection", std::string("ndss21")}});
  expect_near_all(out.update, {3});
  EXPECT_EQ(out.flagged, flags({1, 0, 1, 0, 1, 1}));
  std::vector<float> dist(36);
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 6; ++j) {
      const float d = multi_example().data[i] - multi_example().data[j];
      dist[i * 6 + j] = d * d;
    }
  EXPECT_EQ(krum_select(dist, 6, 1, 2, KrumSelection::Ndss21), (std::vector<int64_t>{1, 3}));
  expect_error(
      [] {
        multi_krum(multi_example(), {{"selection", std::string("ndss21")}, {"m", int64_t{3}}});
      },
      {"multi-krum", "ndss21", "m = -1", "m = 3"});
}

TEST(FlMultiKrum, DefaultMIsNMinusF) {
  // line_example, m = 5 - 1 = 4. one-shot: scores 10, 5, 13, 52, 458 -> rows 0..3, mean 11/4.
  // iterative: |R| = 5 > 2f + 2 = 4 only for the first pick, so the first scores order every pick: the same.
  for (const char* selection : {"iterative", "one-shot"}) {
    const AggregationOutput out = multi_krum(line_example(), {{"selection", std::string(selection)}});
    expect_near_all(out.update, {11.0 / 4.0});
    EXPECT_EQ(out.flagged, flags({0, 0, 0, 0, 1})) << selection;
  }
}

TEST(FlMultiKrum, SampleWeighting) {
  // one-shot m = 2 keeps rows 1, 2 (values 1, 2); samples 100, 300 -> (1 * 100 + 2 * 300) / 400 = 7/4.
  Uploads u = multi_example();
  u.samples = {1, 100, 300, 1, 1, 1};
  expect_near_all(
      multi_krum(u, {{"m", int64_t{2}}, {"selection", std::string("one-shot")}, {"weighting", std::string("samples")}})
          .update,
      {7.0 / 4.0});
}

TEST(FlMultiKrum, RowPermutationSelectsTheSameSet) {
  Uploads u = Uploads::gaussian(9, 200, 4);
  u.f = 2;
  const std::vector<int64_t> order = {4, 8, 0, 6, 1, 7, 2, 5, 3};
  for (const char* selection : {"iterative", "one-shot"}) {
    const std::map<std::string, ParamValue> given = {{"selection", std::string(selection)}};
    const AggregationOutput base = multi_krum(u, given), moved = multi_krum(u.permuted(order), given);
    for (size_t k = 0; k < order.size(); ++k) EXPECT_EQ(moved.flagged[k], base.flagged[order[k]]) << selection;
    // The mean sums the same rows in another order: equal up to rounding (1e-6 of |value| + 1e-6).
    for (int64_t d = 0; d < u.D; ++d)
      EXPECT_NEAR(moved.update[d], base.update[d], kHandTolerance * (1 + std::abs(base.update[d])));
  }
}

TEST(FlMultiKrum, IdenticalUploadsGiveThatUpload) {
  Uploads g = Uploads::gaussian(1, 40, 9);
  std::vector<float> row(g.data.begin(), g.data.end());
  Uploads u({row, row, row, row, row, row});
  u.f = 1;
  EXPECT_EQ(multi_krum(u).update, row);  // mean of 5 copies, summed in double: exact
}

TEST(FlMultiKrum, OutliersNeverAveraged) {
  Uploads u = with_outliers(10, 3, 100);
  for (const char* selection : {"iterative", "one-shot"}) {
    const AggregationOutput out = multi_krum(u, {{"selection", std::string(selection)}});
    EXPECT_EQ(out.flagged, flags({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1})) << selection;
    for (float v : out.update)
      EXPECT_LT(std::abs(v), 10.0f);  // means of N(0, 1) values; one outlier would add >= 1e6 / 10
  }
}

TEST(FlMultiKrum, DistancesIgnoreBatchNormColumns) {
  // multi_example with a buffer column that would change the selection if it counted (row 4 huge);
  // the mean still covers it: (0 + 1e4) / 2.
  Uploads u({{0, 0}, {1, 0}, {2, 0}, {5, 0}, {6, 1e4f}, {8, 0}});
  u.P = 1;
  u.f = 1;
  const AggregationOutput out = multi_krum(u, {{"m", int64_t{2}}, {"selection", std::string("iterative")}});
  EXPECT_EQ(out.flagged, flags({1, 1, 0, 1, 0, 1}));
  expect_near_all(out.update, {4, 1e4 / 2.0});
}

TEST(FlMultiKrum, RefusesBadParameters) {
  Uploads u = line_example();
  u.f = 2;
  expect_error([&] { multi_krum(u); }, {"multi-krum", "n > 2f + 2", "n = 5", "f = 2"});
  expect_error([&] { multi_krum(line_example(), {{"m", int64_t{6}}}); }, {"multi-krum", "m = 6", "n = 5"});
}

TEST(FlMultiKrum, PoolGivesBitwiseSameResultAsSerial) {
  Uploads u = Uploads::gaussian(9, 2 * 4096 + 5, 24);
  u.f = 2;
  const std::vector<float> serial = multi_krum(u).update;
  ThreadPool pool(2);
  u.pool = &pool;
  EXPECT_EQ(multi_krum(u).update, serial);
}

// ---- bulyan ----
// n = 7, f = 1: theta = 5 picked by iterated Krum, beta = 3 kept per coordinate. Column 0 (the only
// parameter) = 0, 1, 3, 4, 9, 50, -60; column 1 is a buffer = 7, -2, 1e4, 1, 0, 1000, 1000.
// Iterated Krum on column 0 (k = |R| - 3):
//   R = all, k = 4: 0: 1+9+16+81 = 107; 1: 1+4+9+64 = 78; 3: 9+4+1+36 = 50; 4: 16+9+1+25 = 51;
//     9: 81+64+36+25 = 206; 50: 8407; -60: 15386 -> row 2 (3)
//   R = {0,1,4,9,50,-60}, k = 3: 0: 1+16+81 = 98; 1: 1+9+64 = 74; 4: 16+9+25 = 50; 9: 206-36 = 170 -> row 3 (4)
//   R = {0,1,9,50,-60}, k = 2: 0: 1+81 = 82; 1: 1+64 = 65; 9: 81+64 = 145 -> row 1 (1)
//     (50: 1681 + 2401 = 4082, -60: 3600 + 3721 = 7321)
//   |R| = 4 <= 2f + 2: no rescoring; the last scores order the rest: 0 (82), 9 (145). Selected rows 0..4;
//   rows 5 and 6 are flagged.
// Coordinate step on rows 0..4: column 0 = 0,1,3,4,9, median 3, distances 3,2,0,1,6 -> {3,4,1}: 8/3;
// column 1 = -2,0,1,7,1e4, median 1, distances 3,1,0,6,9999 -> {1,0,-2}: -1/3. (Had the buffer counted in
// the distances, row 2 with 1e4 would not have been selected.)
Uploads bulyan_example() {
  Uploads u({{0, 7}, {1, -2}, {3, 1e4f}, {4, 1}, {9, 0}, {50, 1000}, {-60, 1000}});
  u.P = 1;
  u.f = 1;
  return u;
}

TEST(FlBulyan, HandExample) {
  const AggregationOutput out = bulyan(bulyan_example());
  expect_near_all(out.update, {8.0 / 3.0, -1.0 / 3.0});
  EXPECT_EQ(out.flagged, flags({0, 0, 0, 0, 0, 1, 1}));
}

TEST(FlBulyan, IteratedSelectionIsUsed) {
  // Iterated Krum selection from the helper on the same example: order 2, 3, 1, 0, 4.
  const Uploads u = bulyan_example();
  const std::vector<float> dist = pairwise_parameter_distances(u.input());
  EXPECT_EQ(krum_select(dist, 7, 1, 5, KrumSelection::Iterative), (std::vector<int64_t>{2, 3, 1, 0, 4}));
}

TEST(FlBulyan, RowPermutationDoesNotChangeResult) {
  Uploads u = Uploads::gaussian(11, 200, 8);
  u.f = 2;
  const std::vector<int64_t> order = {10, 3, 9, 0, 7, 1, 8, 2, 6, 5, 4};
  const AggregationOutput base = bulyan(u), moved = bulyan(u.permuted(order));
  EXPECT_EQ(moved.update, base.update);  // coordinate sums run in sorted order: bitwise
  for (size_t k = 0; k < order.size(); ++k) EXPECT_EQ(moved.flagged[k], base.flagged[order[k]]);
}

TEST(FlBulyan, IdenticalUploadsGiveThatUpload) {
  Uploads g = Uploads::gaussian(1, 40, 9);
  std::vector<float> row(g.data.begin(), g.data.end());
  Uploads u({row, row, row, row, row, row, row});
  u.f = 1;
  EXPECT_EQ(bulyan(u).update, row);
}

TEST(FlBulyan, OutliersExcludedAndFlagged) {
  Uploads u = with_outliers(12, 3, 100);  // n = 15 >= 4 * 3 + 3
  const AggregationOutput out = bulyan(u);
  for (int64_t i = 12; i < 15; ++i) EXPECT_EQ(out.flagged[i], 1) << "row " << i;
  for (int64_t d = 0; d < u.D; ++d) {
    float lo = u.data[d], hi = u.data[d];
    for (int64_t i = 1; i < 12; ++i) {
      lo = std::min(lo, u.row(i)[d]);
      hi = std::max(hi, u.row(i)[d]);
    }
    EXPECT_GE(out.update[d], lo);
    EXPECT_LE(out.update[d], hi);
  }
}

TEST(FlBulyan, RefusesTooFewUploads) {
  Uploads u = bulyan_example();
  u.f = 2;
  expect_error([&] { bulyan(u); }, {"bulyan", "n >= 4f + 3", "n = 7", "f = 2"});
}

TEST(FlBulyan, PoolGivesBitwiseSameResultAsSerial) {
  Uploads u = Uploads::gaussian(11, 3 * kCoordinateTask + 5, 25);
  u.f = 2;
  const std::vector<float> serial = bulyan(u).update;
  ThreadPool pool(2);
  u.pool = &pool;
  EXPECT_EQ(bulyan(u).update, serial);
}

// The SPMC code's variants (base = client-0, momentum) on the hand example, whose Bulyan update is
// u = (8/3, -1/3) with client 0's upload (0, 7): results are sums of u and that row, exact in float up to
// the update's own rounding.
std::unique_ptr<ServerRule> make_bulyan_rule(const std::map<std::string, ParamValue>& given) {
  return make_bulyan(rule_params("bulyan", bulyan_params(), given));
}

TEST(FlBulyan, MomentumAccumulatesTheUpdateAcrossRounds) {
  const std::unique_ptr<ServerRule> rule = make_bulyan_rule({{"momentum", 0.5}});
  const Uploads u = bulyan_example();
  expect_near_all(rule->aggregate(u.input()).update, {8.0 / 3.0, -1.0 / 3.0});
  expect_near_all(rule->aggregate(u.input()).update, {1.5 * 8.0 / 3.0, 1.5 * -1.0 / 3.0});  // 0.5 v + u
}

TEST(FlBulyan, ClientZeroBaseAddsItsUploadOnlyWhenItIsThere) {
  const Uploads u = bulyan_example();
  expect_near_all(bulyan(u, {{"base", std::string("client-0")}}).update, {8.0 / 3.0, 7.0 - 1.0 / 3.0});
  Uploads without_zero = u;
  for (int64_t& c : without_zero.clients) c += 1;  // ids 1..7: the base is the global model
  expect_near_all(bulyan(without_zero, {{"base", std::string("client-0")}}).update, {8.0 / 3.0, -1.0 / 3.0});
}

TEST(FlBulyan, VelocitySurvivesACheckpoint) {
  const std::map<std::string, ParamValue> code = {{"momentum", 0.9}, {"base", std::string("client-0")}};
  const Uploads first = bulyan_example(), second = Uploads::gaussian(7, 2, 31);
  const std::unique_ptr<ServerRule> straight = make_bulyan_rule(code), resumed = make_bulyan_rule(code);
  straight->aggregate(first.input());
  const RuleState saved = straight->save_state();
  ASSERT_EQ(saved.floats("velocity").size(), 2u);
  resumed->load_state(saved);
  EXPECT_EQ(resumed->aggregate(second.input()).update, straight->aggregate(second.input()).update);
}

TEST(FlBulyan, RefusesAVelocityWithoutMomentumOrOfAnotherSize) {
  const RuleState velocity = RuleState::from_legacy({1.0f, 2.0f, 3.0f});  // a pre-codec checkpoint's layout
  expect_error([&] { make_bulyan_rule({})->load_state(velocity); }, {"bulyan", "velocity", "momentum 0"});
  const std::unique_ptr<ServerRule> rule = make_bulyan_rule({{"momentum", 0.9}});
  rule->load_state(velocity);
  expect_error([&] { rule->aggregate(bulyan_example().input()); }, {"bulyan", "3 values", "model 2"});
}

}  // namespace
}  // namespace bastion
