// Server rules that partition the uploads: clustered (complete-linkage bi-partition on cosine distance) and
// dnc (divide-and-conquer spectral filtering) in fl/defenses/. Per rule: a hand-computed example, row
// permutation, identical uploads, huge outliers dropped and flagged, refused parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <span>

#include "fl/defenses/server_rule.h"
#include "tests/defense_test_support.h"
#include "tests/test_support.h"

namespace bastion {
namespace {

using testing::expect_error;
using testing::rule_params;
using testing::Uploads;

using testing::kHandTolerance;
using testing::kSumOrderTolerance;

using testing::expect_near_all;
using testing::MakeRule;
using testing::run_rule;

void expect_permutation_invariant(MakeRule make, const std::string& name, const std::vector<ParamSpec>& specs,
                                  const Uploads& u, const std::vector<int64_t>& order,
                                  const std::map<std::string, ParamValue>& given = {}) {
  const AggregationOutput a = run_rule(make, name, specs, u, given);
  const AggregationOutput b = run_rule(make, name, specs, u.permuted(order), given);
  expect_near_all(b.update, a.update, kSumOrderTolerance);
  ASSERT_EQ(a.flagged.size(), b.flagged.size());
  for (size_t k = 0; k < b.flagged.size(); ++k) EXPECT_EQ(b.flagged[k], a.flagged[order[k]]) << k;
}

// 10 honest rows close to one direction (1 + N(0, 0.3^2) per coordinate) and rows `bad` replaced by
// -50 * that direction + noise: far away in norm and opposite in direction.
Uploads honest_and_outliers(int64_t P, const std::vector<int64_t>& bad, uint64_t seed) {
  Uploads u = Uploads::gaussian(10, P, seed, 1.0f, 0.3f);
  for (int64_t i : bad)
    for (float& v : std::span<float>(u.row(i), P)) v = -50.0f + (v - 1.0f);
  return u;
}

std::vector<uint8_t> flags_of(int64_t n, const std::vector<int64_t>& bad) {
  std::vector<uint8_t> flags(static_cast<size_t>(n), 0);
  for (int64_t i : bad) flags[i] = 1;
  return flags;
}

std::vector<int64_t> rows_except(int64_t n, const std::vector<int64_t>& bad) {
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < n; ++i)
    if (std::find(bad.begin(), bad.end(), i) == bad.end()) rows.push_back(i);
  return rows;
}

// ------------------------------------------------------------------------------------------ clustered

TEST(FlClustered, HandComputedTwoDirections) {
  // Rows 0-2 point right, rows 3-4 left: every cosine distance inside a group is < 0.03, across > 1.9, so
  // the clusters are {0, 1, 2} and {3, 4}. Keep the larger; sample weights 100, 100, 200:
  // ((1 + 1 + 2 * 0.9) / 4, (0 + 0.1 - 2 * 0.1) / 4) = (0.95, -0.025).
  Uploads u({{1, 0}, {1, 0.1f}, {0.9f, -0.1f}, {-1, 0}, {-1, 0.2f}});
  u.samples = {100, 100, 200, 100, 100};
  const AggregationOutput out = run_rule(make_clustered, "clustered", clustered_params(), u);
  expect_near_all(out.update, {0.95f, -0.025f}, kHandTolerance);
  EXPECT_EQ(out.flagged, (std::vector<uint8_t>{0, 0, 0, 1, 1}));
}

TEST(FlClustered, CompleteLinkageIsNotSingleLinkage) {
  // Unit vectors at 0, 40, 85, 125, 195 degrees; cosine distance grows with the angle between them.
  // Complete linkage: merge {0, 40} and {85, 125} (40 degrees each); then {85, 125}-{195} = max(110, 70)
  // = 110 < {0, 40}-{85, 125} = 125 -> {85, 125, 195}. Kept: rows 2, 3, 4; flagged 0, 1.
  // (Single linkage would chain 0-40-85-125 through 45-degree gaps and leave 195 alone.)
  std::vector<std::vector<float>> rows;
  for (double degrees : {0.0, 40.0, 85.0, 125.0, 195.0}) {
    const double a = degrees * M_PI / 180.0;
    rows.push_back({static_cast<float>(std::cos(a)), static_cast<float>(std::sin(a))});
  }
  Uploads u(rows);
  const AggregationOutput out = run_rule(make_clustered, "clustered", clustered_params(), u);
  EXPECT_EQ(out.flagged, (std::vector<uint8_t>{1, 1, 0, 0, 0}));
  expect_near_all(out.update, u.mean_rows({2, 3, 4}), kHandTolerance);
}

TEST(FlClustered, SmallCountsAndTies) {
  Uploads one({{1, 2}});
  const AggregationOutput single = run_rule(make_clustered, "clustered", clustered_params(), one);
  EXPECT_EQ(single.update, (std::vector<float>{1, 2}));
  EXPECT_EQ(single.flagged, (std::vector<uint8_t>{0}));
  // Two singletons tie: the one with the smaller client id is kept, whatever its row.
  Uploads two({{1, 0}, {0, 1}});
  two.clients = {7, 3};
  const AggregationOutput pair = run_rule(make_clustered, "clustered", clustered_params(), two);
  EXPECT_EQ(pair.flagged, (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(pair.update, (std::vector<float>{0, 1}));
}

TEST(FlClustered, IdenticalUploadsGiveThatUpload) {
  // All distances 0: two clusters are still formed (one upload ends up alone and flagged), but the kept
  // mean is the common upload.
  const std::vector<float> row = {0.3f, -1.0f, 2.0f};
  Uploads u({row, row, row, row});
  const AggregationOutput out = run_rule(make_clustered, "clustered", clustered_params(), u);
  expect_near_all(out.update, row, kHandTolerance);
  EXPECT_EQ(std::accumulate(out.flagged.begin(), out.flagged.end(), 0), 1);
}

TEST(FlClustered, HugeOutliersAreDroppedAndFlaggedBuffersAveraged) {
  const std::vector<int64_t> bad = {2, 6, 9};
  Uploads u = honest_and_outliers(40, bad, 21);
  const AggregationOutput out = run_rule(make_clustered, "clustered", clustered_params(), u);
  EXPECT_EQ(out.flagged, flags_of(10, bad));
  expect_near_all(out.update, u.mean_rows(rows_except(10, bad)), kSumOrderTolerance);
  // The last 5 columns as BatchNorm buffers: left out of the cosines (set wild to show it), averaged.
  Uploads buffers = u;
  buffers.P = 35;
  for (int64_t i = 0; i < 10; ++i)
    for (int64_t d = 35; d < 40; ++d) buffers.row(i)[d] = static_cast<float>(i % 2 == 0 ? 1000 : -1000);
  const AggregationOutput b = run_rule(make_clustered, "clustered", clustered_params(), buffers);
  EXPECT_EQ(b.flagged, flags_of(10, bad));
  expect_near_all(b.update, buffers.mean_rows(rows_except(10, bad)), 1e-3f);  // buffers of size 1000
}

TEST(FlClustered, RowPermutation) {
  Uploads u = honest_and_outliers(30, {1, 4, 8}, 22);
  u.samples = {10, 20, 30, 40, 50, 60, 70, 80, 90, 100};
  expect_permutation_invariant(make_clustered, "clustered", clustered_params(), u, {9, 3, 0, 7, 1, 8, 2, 6, 5, 4});
  Uploads mixed = Uploads::gaussian(7, 20, 23);  // no clear structure: the partition must still not move
  expect_permutation_invariant(make_clustered, "clustered", clustered_params(), mixed, {6, 2, 4, 0, 5, 1, 3});
}

TEST(FlClustered, RefusesBadParameters) {
  expect_error(
      [] {
        rule_params("clustered", clustered_params(), {{"weighting", std::string("x")}});
      },
      {"server.clustered.weighting"});
  expect_error(
      [] {
        rule_params("clustered", clustered_params(), {{"clusters", int64_t{3}}});
      },
      {"unknown key", "clusters"});
}

// ------------------------------------------------------------------------------------------------ dnc

TEST(FlDnc, HandComputedTopSingularDirection) {
  // Rows (3, 0), (-1, 0.2), (-1, 0), (-1, -0.2): mean (0, 0), C^T C = diag(12, 0.08), v = (1, 0);
  // scores <C_i, v>^2 = 9, 1, 1, 1 (ties only in x; v is (1, 0) to 1e-10, so no tie decides anything
  // here). f = 1, c = 1: remove row 0; mean of the rest = (-1, 0).
  Uploads u({{3, 0}, {-1, 0.2f}, {-1, 0}, {-1, -0.2f}});
  u.f = 1;
  const AggregationOutput out = run_rule(make_dnc, "dnc", dnc_params(), u);
  EXPECT_EQ(out.flagged, (std::vector<uint8_t>{1, 0, 0, 0}));
  expect_near_all(out.update, {-1.0f, 0.0f}, kHandTolerance);
  // f = 2 with c = 0.5 also removes floor(1) = 1.
  u.f = 2;
  EXPECT_EQ(run_rule(make_dnc, "dnc", dnc_params(), u, {{"c", 0.5}}).flagged, (std::vector<uint8_t>{1, 0, 0, 0}));
  // f = 0 removes nobody: the plain mean (0, 0).
  u.f = 0;
  const AggregationOutput all = run_rule(make_dnc, "dnc", dnc_params(), u);
  EXPECT_EQ(all.flagged, (std::vector<uint8_t>{0, 0, 0, 0}));
  expect_near_all(all.update, {0.0f, 0.0f}, kHandTolerance);
}

TEST(FlDnc, NormalizeChangesWhoIsTheOutlier) {
  // Raw: (100, 0) dominates the centred matrix and is removed.
  // Normalised: rows 0-2 all become (1, 0), row 3 (0, 1); mean (0.75, 0.25); centred rows
  // (0.25, -0.25) x 3 and (-0.75, 0.75): v = (1, -1)/sqrt(2), scores 0.125, 0.125, 0.125, 1.125 -> row 3.
  Uploads u({{100, 0}, {1, 0}, {2, 0}, {0, 1}});
  u.f = 1;
  EXPECT_EQ(run_rule(make_dnc, "dnc", dnc_params(), u).flagged, (std::vector<uint8_t>{1, 0, 0, 0}));
  const AggregationOutput normal = run_rule(make_dnc, "dnc", dnc_params(), u, {{"normalize", true}});
  EXPECT_EQ(normal.flagged, (std::vector<uint8_t>{0, 0, 0, 1}));
  expect_near_all(normal.update, {103.0f / 3.0f, 0.0f}, 1e-5f);  // mean of the raw kept rows
}

TEST(FlDnc, HugeOutliersAreDroppedAndFlaggedWithCoordinateSubsets) {
  const std::vector<int64_t> bad = {0, 5};
  Uploads u = honest_and_outliers(30000, bad, 31);  // P > subsample: 10000 random coordinates
  u.f = 2;
  for (int64_t iterations : {1, 3}) {
    const AggregationOutput out = run_rule(make_dnc, "dnc", dnc_params(), u, {{"iterations", iterations}});
    EXPECT_EQ(out.flagged, flags_of(10, bad)) << iterations;
    expect_near_all(out.update, u.mean_rows(rows_except(10, bad)), kSumOrderTolerance);
  }
  // Outliers in only a few coordinates are still found when the subset covers them all (P <= subsample).
  Uploads sparse = Uploads::gaussian(10, 200, 32, 0.0f, 0.1f);
  for (int64_t d = 0; d < 5; ++d) sparse.row(7)[d] = 40.0f;
  sparse.f = 1;
  EXPECT_EQ(run_rule(make_dnc, "dnc", dnc_params(), sparse).flagged, flags_of(10, {7}));
}

TEST(FlDnc, KeptSetDoesNotDependOnRowOrderAndIsSeeded) {
  // Random rows, P = 3000 > subsample = 500: the coordinate subset depends on (seed, round) only.
  Uploads u = Uploads::gaussian(10, 3000, 33);
  u.f = 3;
  const std::map<std::string, ParamValue> given = {{"subsample", int64_t{500}}, {"iterations", int64_t{2}}};
  expect_permutation_invariant(make_dnc, "dnc", dnc_params(), u, {4, 9, 0, 2, 7, 1, 8, 3, 6, 5}, given);
  const AggregationOutput a = run_rule(make_dnc, "dnc", dnc_params(), u, given);
  EXPECT_EQ(run_rule(make_dnc, "dnc", dnc_params(), u, given).flagged, a.flagged);
  // Other seeds draw other subsets and, on structureless data, remove other rows for some seed.
  bool differs = false;
  for (uint64_t seed = 100; seed < 120 && !differs; ++seed) {
    u.seed = seed;
    differs = run_rule(make_dnc, "dnc", dnc_params(), u, given).flagged != a.flagged;
  }
  EXPECT_TRUE(differs);
}

TEST(FlDnc, IdenticalUploadsGiveThatUpload) {
  const std::vector<float> row = {0.5f, -2.0f, 0.25f, 1.0f};
  Uploads u({row, row, row, row, row});
  u.f = 2;
  const AggregationOutput out = run_rule(make_dnc, "dnc", dnc_params(), u);
  expect_near_all(out.update, row, kHandTolerance);
  // All scores are 0: the ties remove the largest client ids.
  EXPECT_EQ(out.flagged, (std::vector<uint8_t>{0, 0, 0, 1, 1}));
}

TEST(FlDnc, RefusesBadParameters) {
  Uploads u({{1, 0}, {0, 1}, {1, 1}});
  u.f = 3;
  expect_error([&] { run_rule(make_dnc, "dnc", dnc_params(), u); }, {"dnc", "leaves none"});
  u.f = 1;
  expect_error([&] { run_rule(make_dnc, "dnc", dnc_params(), u, {{"c", 3.0}}); }, {"dnc", "floor(3 * 1) = 3"});
  expect_error([] { rule_params("dnc", dnc_params(), {{"iterations", int64_t{0}}}); }, {"server.dnc.iterations"});
  expect_error([] { rule_params("dnc", dnc_params(), {{"subsample", int64_t{0}}}); }, {"server.dnc.subsample"});
  expect_error([] { rule_params("dnc", dnc_params(), {{"c", -1.0}}); }, {"server.dnc.c"});
  expect_error([] { rule_params("dnc", dnc_params(), {{"normalize", int64_t{1}}}); }, {"server.dnc.normalize"});
}

}  // namespace
}  // namespace bastion
