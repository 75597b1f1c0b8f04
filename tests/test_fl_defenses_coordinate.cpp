// Tests for the coordinate-wise server rules (median, trimmed-mean) and their shared helper
// (fl/defenses/coordinate_wise.h). Bulyan's coordinate step is tested in test_fl_defenses_krum.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "defense_test_support.h"
#include "fl/base/thread_pool.h"
#include "fl/defenses/coordinate_wise.h"
#include "tensor/random.h"
#include "test_support.h"

namespace bastion {
namespace {

using testing::expect_error;
using testing::rule_params;
using testing::Uploads;

using testing::kHandTolerance;  // a value like 13/3 is the float nearest to it

std::vector<float> aggregate(const char* name, const std::vector<ParamSpec>& specs,
                             std::unique_ptr<ServerRule> (*make)(const Params&), const Uploads& u,
                             const std::map<std::string, ParamValue>& given = {}) {
  auto rule = make(rule_params(name, specs, given));
  return rule->aggregate(u.input()).update;
}

std::vector<float> median_of(const Uploads& u, const std::map<std::string, ParamValue>& given = {}) {
  return aggregate("median", median_params(), make_median, u, given);
}
std::vector<float> trimmed_of(const Uploads& u, const std::map<std::string, ParamValue>& given = {}) {
  return aggregate("trimmed-mean", trimmed_mean_params(), make_trimmed_mean, u, given);
}

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t d = 0; d < want.size(); ++d)
    EXPECT_NEAR(got[d], want[d], kHandTolerance * std::max(1.0, std::abs(want[d]))) << "column " << d;
}

// Honest rows N(0, 1) plus `outliers` rows of 1e6 (all columns).
Uploads with_outliers(int64_t honest, int64_t outliers, int64_t D) {
  Uploads u = Uploads::gaussian(honest + outliers, D, 11);
  for (int64_t i = honest; i < honest + outliers; ++i) std::fill_n(u.row(i), D, 1e6f);
  u.f = outliers;
  return u;
}

void expect_inside_honest_range(const Uploads& u, int64_t honest, const std::vector<float>& got) {
  for (int64_t d = 0; d < u.D; ++d) {
    float lo = u.data[d], hi = u.data[d];
    for (int64_t i = 1; i < honest; ++i) {
      lo = std::min(lo, u.data[i * u.D + d]);
      hi = std::max(hi, u.data[i * u.D + d]);
    }
    EXPECT_GE(got[d], lo) << "column " << d;
    EXPECT_LE(got[d], hi) << "column " << d;
  }
}

// ---- sorting network and the helper against a naive reference ----

TEST(FlCoordinateWise, SortingNetworkSortsEverySize) {
  Generator g(3);
  for (int64_t r = 0; r <= 140; ++r) {
    const auto network = sorting_network(r);
    for (int trial = 0; trial < 5; ++trial) {
      std::vector<float> v(static_cast<size_t>(r));
      for (float& x : v) x = static_cast<float>(std::floor(g.normal() * 4));  // many duplicates
      std::vector<float> want = v;
      std::sort(want.begin(), want.end());
      for (const auto& c : network)
        if (v[c.second] < v[c.first]) std::swap(v[c.first], v[c.second]);
      ASSERT_EQ(v, want) << "r = " << r;
    }
  }
}

// Naive per-column reference: full sort, then the definition in coordinate_wise.h.
float naive_statistic(std::vector<float> v, const CoordinateSpec& spec) {
  std::sort(v.begin(), v.end());
  const int64_t r = static_cast<int64_t>(v.size()), h = r / 2;
  const double median = r % 2 ? v[h] : (static_cast<double>(v[h - 1]) + v[h]) / 2.0;
  switch (spec.statistic) {
    case CoordinateStatistic::Median:
      return static_cast<float>(median);
    case CoordinateStatistic::LowerMedian:
      return v[(r - 1) / 2];
    case CoordinateStatistic::TrimmedMean: {
      double s = 0;
      for (int64_t k = spec.count; k < r - spec.count; ++k) s += v[k];
      return static_cast<float>(s / static_cast<double>(r - 2 * spec.count));
    }
    case CoordinateStatistic::ClosestToMedian: {
      std::vector<float> by_distance = v;  // stable: equal distances keep the smaller value first
      std::stable_sort(by_distance.begin(), by_distance.end(),
                       [&](float a, float b) { return std::abs(a - median) < std::abs(b - median); });
      by_distance.resize(static_cast<size_t>(spec.count));
      std::sort(by_distance.begin(), by_distance.end());
      double s = 0;
      for (float x : by_distance) s += x;
      return static_cast<float>(s / static_cast<double>(spec.count));
    }
  }
  return 0;
}

TEST(FlCoordinateWise, MatchesNaiveReference) {
  for (int64_t n : {1, 2, 3, 7, 10, 50, 64, 65, 100}) {
    Uploads u = Uploads::gaussian(n, 2 * kCoordinateTile + 13, 100 + n);  // a ragged last tile
    for (int64_t i = 0; i < n; i += 3) u.row(i)[5] = u.row(0)[5];         // ties in one column
    const std::vector<CoordinateSpec> specs = {{CoordinateStatistic::Median, 0},
                                               {CoordinateStatistic::LowerMedian, 0},
                                               {CoordinateStatistic::TrimmedMean, (n - 1) / 2},
                                               {CoordinateStatistic::TrimmedMean, n / 4},
                                               {CoordinateStatistic::ClosestToMedian, std::max<int64_t>(1, n / 2)},
                                               {CoordinateStatistic::ClosestToMedian, n}};
    for (const CoordinateSpec& spec : specs) {
      const std::vector<float> got = coordinate_wise(u.input(), {}, spec, "test");
      for (int64_t d = 0; d < u.D; ++d) {
        std::vector<float> column;
        for (int64_t i = 0; i < n; ++i) column.push_back(u.row(i)[d]);
        // Both sum in double in ascending order: bitwise equal.
        ASSERT_EQ(got[d], naive_statistic(column, spec))
            << "n = " << n << " column " << d << " statistic " << static_cast<int>(spec.statistic);
      }
    }
  }
}

TEST(FlCoordinateWise, ChosenRowsOnly) {
  // Rows {0, 2, 3} of column values [5, -100, 1, 3, 100]: median of {5, 1, 3} = 3.
  Uploads u({{5}, {-100}, {1}, {3}, {100}});
  const std::vector<int64_t> rows = {0, 2, 3};
  EXPECT_EQ(coordinate_wise(u.input(), rows, {CoordinateStatistic::Median, 0}, "test")[0], 3.0f);
}

// ---- median ----

// Columns of 4 rows (even n): sorted c0 = 1,2,3,100; c1 = -5,10,20,30; c2 = -3,-2,-1,7.
//   even = mean:  (2+3)/2 = 2.5, (10+20)/2 = 15, (-2-1)/2 = -1.5
//   even = lower: 2, 10, -2
// With a fifth row (0, 0, 0) (odd n): sorted c0 = 0,1,2,3,100 -> 2; c1 = -5,0,10,20,30 -> 10;
//   c2 = -3,-2,-1,0,7 -> -1.
Uploads median_example() { return Uploads({{1, 10, -1}, {2, 20, -2}, {3, 30, -3}, {100, -5, 7}}); }

TEST(FlMedian, HandExampleEvenMean) { expect_near_all(median_of(median_example()), {2.5, 15, -1.5}); }

TEST(FlMedian, HandExampleEvenLower) {
  expect_near_all(median_of(median_example(), {{"even", std::string("lower")}}), {2, 10, -2});
}

TEST(FlMedian, HandExampleOdd) {
  Uploads u({{1, 10, -1}, {2, 20, -2}, {3, 30, -3}, {100, -5, 7}, {0, 0, 0}});
  expect_near_all(median_of(u), {2, 10, -1});
  expect_near_all(median_of(u, {{"even", std::string("lower")}}), {2, 10, -1});  // odd n: no difference
}

TEST(FlMedian, FlagsNobody) {
  auto rule = make_median(rule_params("median", median_params()));
  EXPECT_TRUE(rule->aggregate(median_example().input()).flagged.empty());
}

TEST(FlMedian, RowPermutationDoesNotChangeResult) {
  Uploads u = Uploads::gaussian(10, 300, 5);
  EXPECT_EQ(median_of(u), median_of(u.permuted({3, 9, 0, 7, 1, 8, 2, 6, 5, 4})));
}

TEST(FlMedian, IdenticalUploadsGiveThatUpload) {
  Uploads g = Uploads::gaussian(1, 77, 9);
  std::vector<float> row(g.data.begin(), g.data.end());
  Uploads u({row, row, row, row});
  EXPECT_EQ(median_of(u), row);
  EXPECT_EQ(median_of(u, {{"even", std::string("lower")}}), row);
}

TEST(FlMedian, OutliersStayInsideHonestRange) {
  Uploads u = with_outliers(10, 4, 200);
  expect_inside_honest_range(u, 10, median_of(u));
}

TEST(FlMedian, AppliesToBatchNormColumnsToo) {
  Uploads u = median_example();
  u.P = 1;  // columns 1 and 2 are buffers: still the median
  expect_near_all(median_of(u), {2.5, 15, -1.5});
}

TEST(FlMedian, PoolGivesBitwiseSameResultAsSerial) {
  Uploads u = Uploads::gaussian(9, 3 * kCoordinateTask + 17, 21);
  const std::vector<float> serial = median_of(u);
  ThreadPool pool(2);
  u.pool = &pool;
  EXPECT_EQ(median_of(u), serial);
}

TEST(FlMedian, RefusesNoUploads) {
  Uploads u(std::vector<std::vector<float>>{});
  expect_error([&] { median_of(u); }, {"median", "no upload"});
}

// ---- trimmed-mean ----

// Five rows, two columns: c0 = [4, 1, 9, 2, 7] sorted 1,2,4,7,9; c1 = [-3, 8, 0, 5, 1] sorted -3,0,1,5,8.
//   b = 0: 23/5 = 4.6, 11/5 = 2.2     b = 1: (2+4+7)/3 = 13/3, (0+1+5)/3 = 2     b = 2: 4, 1
//   closest-to-median (keep floor(5/2) = 2): c0 median 4, distances to 1,2,4,7,9 = 3,2,0,3,5 -> {4, 2}: 3;
//     c1 median 1, distances to -3,0,1,5,8 = 4,1,0,4,7 -> {1, 0}: 0.5
Uploads trimmed_example() { return Uploads({{4, -3}, {1, 8}, {9, 0}, {2, 5}, {7, 1}}); }

TEST(FlTrimmedMean, HandExampleTrimF) {
  Uploads u = trimmed_example();
  u.f = 1;  // f = -1 default: server.expected_malicious
  expect_near_all(trimmed_of(u), {13.0 / 3.0, 2});
  expect_near_all(trimmed_of(u, {{"f", int64_t{2}}}), {4, 1});
  expect_near_all(trimmed_of(u, {{"f", int64_t{0}}}), {4.6, 2.2});
}

TEST(FlTrimmedMean, HandExampleHalfF) {
  Uploads u = trimmed_example();
  u.f = 3;  // floor(3/2) = 1
  expect_near_all(trimmed_of(u, {{"trim", std::string("half-f")}}), {13.0 / 3.0, 2});
  u.f = 1;  // floor(1/2) = 0: plain mean
  expect_near_all(trimmed_of(u, {{"trim", std::string("half-f")}}), {4.6, 2.2});
}

TEST(FlTrimmedMean, HandExampleFixed) {
  Uploads u = trimmed_example();
  u.f = 0;  // ignored by trim = fixed
  expect_near_all(trimmed_of(u, {{"trim", std::string("fixed")}, {"b", int64_t{2}}}), {4, 1});
  expect_near_all(trimmed_of(u, {{"trim", std::string("fixed")}}), {13.0 / 3.0, 2});  // b = 1 default
}

TEST(FlTrimmedMean, HandExampleClosestToMedian) {
  expect_near_all(trimmed_of(trimmed_example(), {{"trim", std::string("closest-to-median")}}), {3, 0.5});
}

TEST(FlTrimmedMean, ClosestToMedianTieKeepsSmallerValue) {
  // n = 6, keep 3: values 0,2,4,6,8,10, median 5, distances 5,3,1,1,3,5: 4 and 6, then 2 (tie with 8,
  // the smaller is kept): (2 + 4 + 6) / 3 = 4 (keeping 8 would give 6).
  Uploads u({{8}, {0}, {10}, {4}, {2}, {6}});
  expect_near_all(trimmed_of(u, {{"trim", std::string("closest-to-median")}}), {4});
}

TEST(FlTrimmedMean, RowPermutationDoesNotChangeResult) {
  Uploads u = Uploads::gaussian(11, 300, 6);
  u.f = 3;
  const std::vector<int64_t> order = {10, 3, 9, 0, 7, 1, 8, 2, 6, 5, 4};
  EXPECT_EQ(trimmed_of(u), trimmed_of(u.permuted(order)));  // sums in sorted order: bitwise equal
  const std::map<std::string, ParamValue> closest = {{"trim", std::string("closest-to-median")}};
  EXPECT_EQ(trimmed_of(u, closest), trimmed_of(u.permuted(order), closest));
}

TEST(FlTrimmedMean, IdenticalUploadsGiveThatUpload) {
  Uploads g = Uploads::gaussian(1, 77, 9);
  std::vector<float> row(g.data.begin(), g.data.end());
  Uploads u({row, row, row, row, row});
  u.f = 1;
  EXPECT_EQ(trimmed_of(u), row);
  EXPECT_EQ(trimmed_of(u, {{"trim", std::string("closest-to-median")}}), row);
}

TEST(FlTrimmedMean, OutliersStayInsideHonestRange) {
  Uploads u = with_outliers(10, 3, 200);
  expect_inside_honest_range(u, 10, trimmed_of(u));
  expect_inside_honest_range(u, 10, trimmed_of(u, {{"trim", std::string("closest-to-median")}}));
}

TEST(FlTrimmedMean, AppliesToBatchNormColumnsToo) {
  Uploads u = trimmed_example();
  u.P = 1;
  u.f = 1;
  expect_near_all(trimmed_of(u), {13.0 / 3.0, 2});
}

TEST(FlTrimmedMean, PoolGivesBitwiseSameResultAsSerial) {
  Uploads u = Uploads::gaussian(9, 3 * kCoordinateTask + 17, 22);
  u.f = 2;
  const std::vector<float> serial = trimmed_of(u);
  const std::vector<float> serial_closest = trimmed_of(u, {{"trim", std::string("closest-to-median")}});
  ThreadPool pool(2);
  u.pool = &pool;
  EXPECT_EQ(trimmed_of(u), serial);
  EXPECT_EQ(trimmed_of(u, {{"trim", std::string("closest-to-median")}}), serial_closest);
}

TEST(FlTrimmedMean, RefusesTooFewUploads) {
  Uploads u = trimmed_example();
  u.f = 3;
  expect_error([&] { trimmed_of(u); }, {"trimmed-mean", "n > 2b", "n = 5", "b = 3"});
  expect_error(
      [&] {
        trimmed_of(u, {{"trim", std::string("fixed")}, {"b", int64_t{5}}});
      },
      {"trimmed-mean", "n = 5", "b = 5"});
  Uploads one(std::vector<std::vector<float>>{{1.0f}});
  expect_error(
      [&] {
        trimmed_of(one, {{"trim", std::string("closest-to-median")}});
      },
      {"trimmed-mean", "n >= 2", "n = 1"});
}

}  // namespace
}  // namespace bastion
