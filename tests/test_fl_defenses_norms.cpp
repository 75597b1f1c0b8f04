// Server rules that clip, bound, vote on signs or add noise: norm-clip, add-noise, norm-bound, crfl, rlr,
// rsa-server (fl/defenses/*.cpp; rsa itself: test_fl_rsa.cpp). Per rule: a hand-computed example, row-permutation invariance, identical
// uploads, outliers, noise statistics where the rule is random, and refused parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <span>

#include "fl/base/thread_pool.h"
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

// Permutation invariance: the update is the same (up to summation order) and the flags follow the rows.
void expect_permutation_invariant(MakeRule make, const std::string& name, const std::vector<ParamSpec>& specs,
                                  const Uploads& u, const std::map<std::string, ParamValue>& given = {}) {
  const std::vector<int64_t> order = {3, 0, 4, 1, 2};
  ASSERT_EQ(u.n, 5);
  const AggregationOutput a = run_rule(make, name, specs, u, given);
  const AggregationOutput b = run_rule(make, name, specs, u.permuted(order), given);
  expect_near_all(b.update, a.update, kSumOrderTolerance);
  ASSERT_EQ(a.flagged.size(), b.flagged.size());
  for (size_t k = 0; k < b.flagged.size(); ++k) EXPECT_EQ(b.flagged[k], a.flagged[order[k]]) << k;
}

// Mean and standard deviation of `values`.
std::pair<double, double> moments(const std::vector<float>& values) {
  double sum = 0.0, squares = 0.0;
  for (float v : values) sum += v;
  const double mean = sum / static_cast<double>(values.size());
  for (float v : values) squares += (v - mean) * (v - mean);
  return {mean, std::sqrt(squares / static_cast<double>(values.size() - 1))};
}

// N i.i.d. draws of N(0, sigma^2): the sample mean has std sigma / sqrt(N), the sample std has std about
// sigma / sqrt(2N). Five of those standard errors: a correct generator fails about once in 10^6 runs, and a
// wrong sigma (x2, or x1.05 at N = 40000) or a biased mean fails every time.
constexpr double kStandardErrors = 5.0;
void expect_gaussian(const std::vector<float>& values, double sigma) {
  const auto N = static_cast<double>(values.size());
  const std::pair<double, double> m = moments(values);
  EXPECT_NEAR(m.first, 0.0, kStandardErrors * sigma / std::sqrt(N));
  EXPECT_NEAR(m.second, sigma, kStandardErrors * sigma / std::sqrt(2.0 * N));
}

// ------------------------------------------------------------------------------------------ norm-clip

TEST(FlNormClip, HandComputedClipThenSampleWeightedMeanBuffersUnclipped) {
  // P = 2 parameters + 1 buffer. |(3,4)| = 5 > c = 1 -> (0.6, 0.8); |(0.3,0.4)| = 0.5 stays.
  // weights 100/400, 300/400: 0.25 * (0.6, 0.8) + 0.75 * (0.3, 0.4) = (0.375, 0.5);
  // buffer (not clipped): 0.25 * 10 + 0.75 * 2 = 4.
  Uploads u({{3, 4, 10}, {0.3f, 0.4f, 2}});
  u.P = 2;
  u.samples = {100, 300};
  const AggregationOutput out = run_rule(make_norm_clip, "norm-clip", norm_clip_params(), u);
  expect_near_all(out.update, {0.375f, 0.5f, 4.0f}, kHandTolerance);
  EXPECT_TRUE(out.flagged.empty());
  // uniform and c = 0.5: (0.3, 0.4) + (0.3, 0.4) halves -> (0.3, 0.4); buffer (10 + 2) / 2 = 6.
  const AggregationOutput half =
      run_rule(make_norm_clip, "norm-clip", norm_clip_params(), u, {{"c", 0.5}, {"weighting", std::string("uniform")}});
  expect_near_all(half.update, {0.3f, 0.4f, 6.0f}, kHandTolerance);
}

TEST(FlNormClip, IdenticalUploadsGiveThatUploadOrItsClippedCopy) {
  Uploads small({{0.1f, -0.2f, 0.3f}, {0.1f, -0.2f, 0.3f}, {0.1f, -0.2f, 0.3f}});
  expect_near_all(run_rule(make_norm_clip, "norm-clip", norm_clip_params(), small).update, {0.1f, -0.2f, 0.3f},
                  kHandTolerance);
  Uploads big({{0, 6, 8}, {0, 6, 8}});  // norm 10 -> clipped to 1
  expect_near_all(run_rule(make_norm_clip, "norm-clip", norm_clip_params(), big).update, {0, 0.6f, 0.8f},
                  kHandTolerance);
}

TEST(FlNormClip, RowPermutationAndOutliersStayBounded) {
  Uploads u = Uploads::gaussian(5, 40, 11);
  for (float& v : std::span<float>(u.row(2), 40)) v *= 1e6f;
  u.samples = {10, 20, 30, 40, 50};
  expect_permutation_invariant(make_norm_clip, "norm-clip", norm_clip_params(), u);
  // Every clipped row has norm <= c, so any mean of them has norm <= c, however large the outlier.
  const AggregationOutput out = run_rule(make_norm_clip, "norm-clip", norm_clip_params(), u, {{"c", 0.5}});
  double squared = 0.0;
  for (float v : out.update) squared += v * v;
  EXPECT_LE(std::sqrt(squared), 0.5 + 1e-6);
}

TEST(FlNormClip, RefusesBadParameters) {
  expect_error(
      [] {
        make_norm_clip(rule_params("norm-clip", norm_clip_params(), {{"c", 0.0}}));
      },
      {"norm-clip", "c must be > 0"});
  expect_error([] { rule_params("norm-clip", norm_clip_params(), {{"c", -1.0}}); }, {"server.norm-clip.c"});
  expect_error(
      [] {
        rule_params("norm-clip", norm_clip_params(), {{"weighting", std::string("median")}});
      },
      {"server.norm-clip.weighting"});
}

// ------------------------------------------------------------------------------------------ add-noise

TEST(FlAddNoise, ZeroSigmaIsFedAvgAndClipIsNormClip) {
  // (1,2) and (3,4), weights 1/4, 3/4: (2.5, 3.5).
  Uploads u({{1, 2}, {3, 4}});
  u.samples = {100, 300};
  expect_near_all(run_rule(make_add_noise, "add-noise", add_noise_params(), u, {{"sigma", 0.0}}).update, {2.5f, 3.5f},
                  kHandTolerance);
  // clip 1: (1,2)/sqrt(5) = (0.44721, 0.89443), (3,4)/5 = (0.6, 0.8);
  // 0.25 * (0.44721, 0.89443) + 0.75 * (0.6, 0.8) = (0.56180, 0.82361).
  expect_near_all(run_rule(make_add_noise, "add-noise", add_noise_params(), u, {{"sigma", 0.0}, {"clip", 1.0}}).update,
                  {0.5618034f, 0.8236068f}, kHandTolerance);
}

TEST(FlAddNoise, NoiseIsGaussianWithSigmaOnParametersOnly) {
  const int64_t P = 40000, buffers = 3;
  Uploads u({std::vector<float>(P + buffers, 0.0f), std::vector<float>(P + buffers, 0.0f)});
  u.P = P;
  for (int64_t b = 0; b < buffers; ++b) u.row(0)[P + b] = 2.0f;  // buffer mean 1
  for (double sigma : {5e-4, 0.3}) {
    const AggregationOutput out = run_rule(make_add_noise, "add-noise", add_noise_params(), u, {{"sigma", sigma}});
    expect_gaussian(std::vector<float>(out.update.begin(), out.update.begin() + P), sigma);
    for (int64_t b = 0; b < buffers; ++b) EXPECT_EQ(out.update[P + b], 1.0f);
  }
}

TEST(FlAddNoise, DeterministicFromSeedAndIndependentOfThreadsAndRowOrder) {
  // More than one noise block (65536 columns), so the per-block generator forks are exercised.
  Uploads u = Uploads::gaussian(5, 140000, 3);
  const AggregationOutput a = run_rule(make_add_noise, "add-noise", add_noise_params(), u);
  ThreadPool pool(2);
  u.pool = &pool;
  const AggregationOutput b = run_rule(make_add_noise, "add-noise", add_noise_params(), u);
  EXPECT_EQ(a.update, b.update);
  expect_permutation_invariant(make_add_noise, "add-noise", add_noise_params(), u);
  u.seed = 8;  // another round's seed: other noise
  const AggregationOutput c = run_rule(make_add_noise, "add-noise", add_noise_params(), u);
  EXPECT_NE(a.update, c.update);
}

TEST(FlAddNoise, IdenticalUploadsGiveThatUploadPlusNoiseOfSigma) {
  const int64_t P = 40000;
  std::vector<float> row(P);
  for (int64_t d = 0; d < P; ++d) row[d] = static_cast<float>(d % 7) - 3.0f;
  Uploads u({row, row, row});
  const double sigma = 0.01;
  const AggregationOutput out = run_rule(make_add_noise, "add-noise", add_noise_params(), u, {{"sigma", sigma}});
  std::vector<float> noise(P);
  for (int64_t d = 0; d < P; ++d) noise[d] = out.update[d] - row[d];
  expect_gaussian(noise, sigma);
}

TEST(FlAddNoise, RefusesBadParameters) {
  expect_error([] { rule_params("add-noise", add_noise_params(), {{"sigma", -1e-3}}); }, {"server.add-noise.sigma"});
  expect_error([] { rule_params("add-noise", add_noise_params(), {{"clip", -1.0}}); }, {"server.add-noise.clip"});
  expect_error([] { rule_params("add-noise", add_noise_params(), {{"std", 1.0}}); }, {"unknown key", "std"});
}

// ----------------------------------------------------------------------------------------- norm-bound

TEST(FlNormBound, HandComputedThresholdAndMedianMultiple) {
  // norms: |(3,4)| = 5, |(0.6,0.8)| = 1, |(0,0.5)| = 0.5.
  Uploads u({{3, 4}, {0.6f, 0.8f}, {0, 0.5f}});
  const std::map<std::string, ParamValue> uniform = {{"weighting", std::string("uniform")}};
  // threshold 1.01 keeps rows 1, 2: mean (0.3, 0.65). (Not threshold 1: float (0.6, 0.8) has norm
  // 1 + 2e-8 and is dropped, as the next check shows.)
  std::map<std::string, ParamValue> given = uniform;
  given["threshold"] = 1.01;
  const AggregationOutput t = run_rule(make_norm_bound, "norm-bound", norm_bound_params(), u, given);
  expect_near_all(t.update, {0.3f, 0.65f}, kHandTolerance);
  EXPECT_EQ(t.flagged, (std::vector<uint8_t>{1, 0, 0}));
  EXPECT_EQ(run_rule(make_norm_bound, "norm-bound", norm_bound_params(), u, uniform).flagged,
            (std::vector<uint8_t>{1, 1, 0}));
  // median 1, tau 2 -> bound 2: same rows.
  std::map<std::string, ParamValue> median = uniform;
  median["mode"] = std::string("median-multiple");
  const AggregationOutput m = run_rule(make_norm_bound, "norm-bound", norm_bound_params(), u, median);
  EXPECT_EQ(m.flagged, (std::vector<uint8_t>{1, 0, 0}));
  // Even count: add (0, 2) (norm 2): sorted 0.5, 1, 2, 5 -> median 1.5, bound 3: rows 1, 2, 3 kept;
  // mean ((0.6 + 0 + 0) / 3, (0.8 + 0.5 + 2) / 3) = (0.2, 1.1). tau 1.2 -> bound 1.8 drops row 3 too.
  Uploads even({{3, 4}, {0.6f, 0.8f}, {0, 0.5f}, {0, 2}});
  const AggregationOutput e = run_rule(make_norm_bound, "norm-bound", norm_bound_params(), even, median);
  expect_near_all(e.update, {0.2f, 1.1f}, kHandTolerance);
  EXPECT_EQ(e.flagged, (std::vector<uint8_t>{1, 0, 0, 0}));
  median["tau"] = 1.2;
  EXPECT_EQ(run_rule(make_norm_bound, "norm-bound", norm_bound_params(), even, median).flagged,
            (std::vector<uint8_t>{1, 0, 0, 1}));
}

TEST(FlNormBound, KeepSmallestOnUpdatesAndOnModels) {
  // Update norms 5, 1, 0.5, 2; f = 1 -> keep n - f = 3 smallest: rows 1, 2, 3 (row 0 dropped).
  Uploads u({{3, 4}, {0.6f, 0.8f}, {0, 0.5f}, {0, 2}});
  u.f = 1;
  std::map<std::string, ParamValue> given = {{"mode", std::string("keep-smallest")}};
  EXPECT_EQ(run_rule(make_norm_bound, "norm-bound", norm_bound_params(), u, given).flagged,
            (std::vector<uint8_t>{1, 0, 0, 0}));
  // measure = model with global (-3, -4): model norms |(0,0)| = 0, |(-2.4,-3.2)| = 4, |(-3,-3.5)| = 4.61,
  // |(-3,-2)| = 3.61 -> row 2 dropped; keep = 2 -> rows 0 and 3 kept, uniform mean (1.5, 3).
  u.global = {-3, -4};
  given["measure"] = std::string("model");
  EXPECT_EQ(run_rule(make_norm_bound, "norm-bound", norm_bound_params(), u, given).flagged,
            (std::vector<uint8_t>{0, 0, 1, 0}));
  given["keep"] = int64_t{2};
  given["weighting"] = std::string("uniform");
  const AggregationOutput two = run_rule(make_norm_bound, "norm-bound", norm_bound_params(), u, given);
  EXPECT_EQ(two.flagged, (std::vector<uint8_t>{0, 1, 1, 0}));
  expect_near_all(two.update, {1.5f, 3.0f}, kHandTolerance);
}

TEST(FlNormBound, AllDroppedLeavesTheGlobalUnchanged) {
  Uploads u({{3, 4, 1}, {0.6f, 0.8f, 1}});
  u.P = 2;
  const AggregationOutput out = run_rule(make_norm_bound, "norm-bound", norm_bound_params(), u, {{"threshold", 0.1}});
  EXPECT_EQ(out.update, (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(out.flagged, (std::vector<uint8_t>{1, 1}));
}

TEST(FlNormBound, HugeOutliersAreDroppedAndFlagged) {
  Uploads u = Uploads::gaussian(10, 50, 5, 0.0f, 0.1f);
  for (int64_t i : {3, 7})
    for (float& v : std::span<float>(u.row(i), 50)) v *= 1000.0f;
  u.f = 2;
  std::vector<int64_t> honest = {0, 1, 2, 4, 5, 6, 8, 9};
  const Uploads clean = u.permuted(honest);  // the first 8 rows of the result are the honest ones
  Uploads only_honest = clean;
  only_honest.n = 8;
  only_honest.data.resize(8 * 50);
  only_honest.samples.resize(8);
  only_honest.clients.resize(8);
  const std::vector<float> want =
      run_rule(make_norm_bound, "norm-bound", norm_bound_params(), only_honest, {{"threshold", 1e9}}).update;
  const std::vector<uint8_t> flags = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0};
  for (const std::string mode : {"median-multiple", "keep-smallest"}) {
    const AggregationOutput out = run_rule(make_norm_bound, "norm-bound", norm_bound_params(), u, {{"mode", mode}});
    EXPECT_EQ(out.flagged, flags) << mode;
    expect_near_all(out.update, want, kSumOrderTolerance);
  }
}

TEST(FlNormBound, IdenticalUploadsAndRowPermutation) {
  Uploads same({{0.1f, 0.2f}, {0.1f, 0.2f}, {0.1f, 0.2f}});
  same.f = 1;
  for (const std::string mode : {"threshold", "median-multiple", "keep-smallest"})
    expect_near_all(run_rule(make_norm_bound, "norm-bound", norm_bound_params(), same, {{"mode", mode}}).update,
                    {0.1f, 0.2f}, kHandTolerance);
  Uploads u = Uploads::gaussian(5, 30, 9, 0.0f, 0.2f);
  u.samples = {10, 20, 30, 40, 50};
  u.f = 2;
  for (const std::string mode : {"threshold", "median-multiple", "keep-smallest"}) {
    const std::map<std::string, ParamValue> given = {{"mode", mode}, {"tau", 1.0}};
    expect_permutation_invariant(make_norm_bound, "norm-bound", norm_bound_params(), u, given);
  }
}

TEST(FlNormBound, RefusesBadParameters) {
  expect_error(
      [] {
        rule_params("norm-bound", norm_bound_params(), {{"mode", std::string("clip")}});
      },
      {"server.norm-bound.mode"});
  expect_error(
      [] {
        make_norm_bound(rule_params("norm-bound", norm_bound_params(), {{"keep", int64_t{0}}}));
      },
      {"norm-bound", "keep"});
  expect_error(
      [] {
        rule_params("norm-bound", norm_bound_params(), {{"threshold", -1.0}});
      },
      {"server.norm-bound.threshold"});
  Uploads u({{1}, {2}});
  u.f = 2;
  expect_error(
      [&] {
        run_rule(make_norm_bound, "norm-bound", norm_bound_params(), u, {{"mode", std::string("keep-smallest")}});
      },
      {"norm-bound", "leaves no upload"});
}

// ----------------------------------------------------------------------------------------------- crfl

TEST(FlCrfl, HandComputedClipOfTheNewGlobalModelFirstRoundBoundIs30) {
  // round 1 is CRFL's epoch 0: rho = min(5 * 0 + 30, 100) = 30. global (30, 0 | buffer 7); uploads
  // (0, 10 | 1) x 100 samples, (0, 50 | 5) x 300: mean (0, 40 | 4); w' = (30, 40), norm 50 -> scaled by
  // 0.6 to (18, 24); update = w' - global = (-12, 24); buffer: the plain mean 4. (Counting rounds from 1,
  // rho = 35, would give (-9, 28).)
  Uploads u({{0, 10, 1}, {0, 50, 5}});
  u.P = 2;
  u.samples = {100, 300};
  u.global = {30, 0, 7};
  const AggregationOutput out = run_rule(make_crfl, "crfl", crfl_params(), u, {{"sigma", 0.0}});
  expect_near_all(out.update, {-12.0f, 24.0f, 4.0f}, 1e-5f);
  EXPECT_TRUE(out.flagged.empty());
}

TEST(FlCrfl, ClipRadiusGrowsWithTheRoundUpToTheMaximum) {
  // Zero uploads, global (120, 160) of norm 200: round 1 -> rho 30: (18, 24); round 3 -> rho 5 * 2 + 30 = 40:
  // (24, 32); round 20 -> min(125, 100).
  Uploads u({{0, 0}, {0, 0}});
  u.global = {120, 160};
  expect_near_all(run_rule(make_crfl, "crfl", crfl_params(), u, {{"sigma", 0.0}}).update, {-102.0f, -136.0f}, 1e-4f);
  u.round = 3;
  expect_near_all(run_rule(make_crfl, "crfl", crfl_params(), u, {{"sigma", 0.0}}).update, {-96.0f, -128.0f}, 1e-4f);
  u.round = 20;
  expect_near_all(run_rule(make_crfl, "crfl", crfl_params(), u, {{"sigma", 0.0}}).update, {-60.0f, -80.0f}, 1e-4f);
  // A model inside the radius is not touched: global (3, 4), identical uploads (1, 1) -> update (1, 1).
  Uploads inside({{1, 1}, {1, 1}});
  inside.global = {3, 4};
  expect_near_all(run_rule(make_crfl, "crfl", crfl_params(), inside, {{"sigma", 0.0}}).update, {1.0f, 1.0f},
                  kHandTolerance);
}

TEST(FlCrfl, SmoothingNoiseStatisticsAndANoiseFreeFinalModel) {
  const int64_t P = 40000;
  Uploads u({std::vector<float>(P + 1, 0.0f), std::vector<float>(P + 1, 0.0f)});
  u.P = P;
  u.round = 5;
  u.last_round = 8;  // a run of 8 rounds: round 5 is smoothed
  const double sigma = 0.02;
  const AggregationOutput out = run_rule(make_crfl, "crfl", crfl_params(), u, {{"sigma", sigma}});
  expect_gaussian(std::vector<float>(out.update.begin(), out.update.begin() + P), sigma);
  EXPECT_EQ(out.update[P], 0.0f);  // buffer: no noise
  // The run's final round (default last_round = -1): the final model is exactly the clipped mean, here 0.
  u.last_round = 5;
  EXPECT_EQ(run_rule(make_crfl, "crfl", crfl_params(), u, {{"sigma", sigma}}).update, std::vector<float>(P + 1, 0.0f));
  // last_round = 0: noise in every round, the final one too; last_round = t: round t is the noise-free one.
  const AggregationOutput always =
      run_rule(make_crfl, "crfl", crfl_params(), u, {{"sigma", sigma}, {"last_round", int64_t{0}}});
  expect_gaussian(std::vector<float>(always.update.begin(), always.update.begin() + P), sigma);
  u.last_round = 8;
  const AggregationOutput last =
      run_rule(make_crfl, "crfl", crfl_params(), u, {{"sigma", sigma}, {"last_round", int64_t{5}}});
  EXPECT_EQ(last.update, std::vector<float>(P + 1, 0.0f));
  // Default sigma 1e-4 too.
  const AggregationOutput standard = run_rule(make_crfl, "crfl", crfl_params(), u);
  expect_gaussian(std::vector<float>(standard.update.begin(), standard.update.begin() + P), 1e-4);
}

TEST(FlCrfl, DeterministicFromSeedAndIndependentOfThreadsAndRowOrder) {
  Uploads u = Uploads::gaussian(5, 140000, 4, 0.0f, 0.01f);
  const AggregationOutput a = run_rule(make_crfl, "crfl", crfl_params(), u);
  ThreadPool pool(2);
  u.pool = &pool;
  EXPECT_EQ(run_rule(make_crfl, "crfl", crfl_params(), u).update, a.update);
  expect_permutation_invariant(make_crfl, "crfl", crfl_params(), u);
  u.seed = 99;
  EXPECT_NE(run_rule(make_crfl, "crfl", crfl_params(), u).update, a.update);
}

TEST(FlCrfl, RefusesBadParameters) {
  expect_error([] { rule_params("crfl", crfl_params(), {{"sigma", -1.0}}); }, {"server.crfl.sigma"});
  expect_error([] { rule_params("crfl", crfl_params(), {{"clip_max", -1.0}}); }, {"server.crfl.clip_max"});
  expect_error([] { rule_params("crfl", crfl_params(), {{"last_round", int64_t{-2}}}); }, {"server.crfl.last_round"});
  Uploads u({{1, 2}});
  u.global = {0};
  expect_error([&] { run_rule(make_crfl, "crfl", crfl_params(), u); }, {"crfl", "global state"});
}

// ------------------------------------------------------------------------------------------------ rlr

TEST(FlRlr, HandComputedSignVote) {
  // n = 4, theta = 3, uniform, P = 4 + 1 buffer.
  // column 0: (1, 1, 1, -1): |sum sign| = 2 < 3 -> -eta; mean 0.5 -> -0.5
  // column 1: (1, 2, 3, 4):  4 >= 3 -> +eta; mean 2.5
  // column 2: (0, 0, 1, 1):  2 < 3 (sign 0 = 0) -> -eta; mean 0.5 -> -0.5
  // column 3: (1, 1, 1, 0):  3 >= 3 (equality keeps +eta) -> mean 0.75
  // column 4 (buffer): (1, 1, 1, -1): plain mean 0.5, never negated.
  Uploads u({{1, 1, 0, 1, 1}, {1, 2, 0, 1, 1}, {1, 3, 1, 1, 1}, {-1, 4, 1, 0, -1}});
  u.P = 4;
  std::map<std::string, ParamValue> given = {{"threshold", 3.0}, {"weighting", std::string("uniform")}};
  const AggregationOutput out = run_rule(make_rlr, "rlr", rlr_params(), u, given);
  expect_near_all(out.update, {-0.5f, 2.5f, -0.5f, 0.75f, 0.5f}, kHandTolerance);
  EXPECT_TRUE(out.flagged.empty());
  // eta 2 doubles the parameter columns only.
  given["eta"] = 2.0;
  expect_near_all(run_rule(make_rlr, "rlr", rlr_params(), u, given).update, {-1.0f, 5.0f, -1.0f, 1.5f, 0.5f},
                  kHandTolerance);
  // Sample weights (1, 1, 1, 5) / 8: column 1 mean (1 + 2 + 3 + 20) / 8 = 3.25.
  u.samples = {100, 100, 100, 500};
  const AggregationOutput weighted = run_rule(make_rlr, "rlr", rlr_params(), u, {{"threshold", 3.0}});
  EXPECT_NEAR(weighted.update[1], 3.25f, kHandTolerance);
  EXPECT_NEAR(weighted.update[0], 0.25f, kHandTolerance);  // -(1 + 1 + 1 - 5) / 8
}

TEST(FlRlr, IdenticalUploadsAndRowPermutation) {
  const std::vector<float> row = {0.5f, -0.25f, 0.0f, 2.0f};
  Uploads same({row, row, row, row, row});
  expect_near_all(run_rule(make_rlr, "rlr", rlr_params(), same).update, row, kHandTolerance);
  Uploads u = Uploads::gaussian(5, 64, 12);
  u.samples = {1, 2, 3, 4, 5};
  expect_permutation_invariant(make_rlr, "rlr", rlr_params(), u, {{"threshold", 3.0}});
}

TEST(FlRlr, RefusesBadParameters) {
  Uploads u({{1}, {2}, {3}});
  expect_error([&] { run_rule(make_rlr, "rlr", rlr_params(), u); }, {"rlr", "threshold 4", "3 uploads"});
  expect_error([] { rule_params("rlr", rlr_params(), {{"threshold", -1.0}}); }, {"server.rlr.threshold"});
  expect_error([] { rule_params("rlr", rlr_params(), {{"eta", -1.0}}); }, {"server.rlr.eta"});
}

// ------------------------------------------------------------------------ rsa-server (SPMC; rsa: test_fl_rsa.cpp)

TEST(FlRsaServer, HandComputedSignStep) {
  // alpha 0.05, lambda 0.1, cap 3, wd 0.001; P = 3 + 1 buffer; global (10, -20, 0 | 9).
  // column 0: 5 positive -> vote 5, clipped to 3: 0.05 * (0.1 * 3 - 0.001 * 10) = 0.0145
  // column 1: (-1, -1, 1, 0, 0) -> vote -1: 0.05 * (-0.1 + 0.001 * 20) = -0.004
  // column 2: (1, 1, -1, -1, 1) -> vote 1: 0.05 * 0.1 = 0.005
  // column 3 (buffer): plain mean of 1..5 = 3
  Uploads u({{1, -1, 1, 1}, {2, -5, 1, 2}, {3, 2, -1, 3}, {4, 0, -1, 4}, {5, 0, 1, 5}});
  u.P = 3;
  u.global = {10, -20, 0, 9};
  const AggregationOutput out = run_rule(make_rsa_server, "rsa-server", rsa_server_params(), u);
  expect_near_all(out.update, {0.0145f, -0.004f, 0.005f, 3.0f}, kHandTolerance);
  EXPECT_TRUE(out.flagged.empty());
  // cap 0 (no clipping): column 0: 0.05 * (0.1 * 5 - 0.01) = 0.0245.
  EXPECT_NEAR(run_rule(make_rsa_server, "rsa-server", rsa_server_params(), u, {{"cap", 0.0}}).update[0], 0.0245f,
              kHandTolerance);
}

TEST(FlRsaServer, IdenticalUploadsGiveABoundedSignStepNotTheUpload) {
  // Two identical uploads (3, -7, 0), global (1, 1, 1): alpha lambda min(2, 3) sign(Delta) - alpha wd w
  // = 0.01 * (1, -1, 0) - 5e-5 = (0.00995, -0.01005, -0.00005).
  Uploads u({{3, -7, 0}, {3, -7, 0}});
  u.global = {1, 1, 1};
  expect_near_all(run_rule(make_rsa_server, "rsa-server", rsa_server_params(), u).update,
                  {0.00995f, -0.01005f, -0.00005f}, kHandTolerance);
}

TEST(FlRsaServer, MagnitudeOfAnUploadDoesNotMatterNorRowOrderWithoutTheCap) {
  Uploads u = Uploads::gaussian(5, 64, 13);
  u.global.assign(64, 0.5f);
  const AggregationOutput a = run_rule(make_rsa_server, "rsa-server", rsa_server_params(), u);
  for (float& v : std::span<float>(u.row(1), 64)) v *= 1e6f;
  EXPECT_EQ(run_rule(make_rsa_server, "rsa-server", rsa_server_params(), u).update, a.update);
  // Without the cap the row order cannot matter; the running cap depends on it (test_fl_rsa.cpp).
  expect_permutation_invariant(make_rsa_server, "rsa-server", rsa_server_params(), u, {{"cap", int64_t{0}}});
}

TEST(FlRsaServer, RefusesBadParameters) {
  expect_error([] { rule_params("rsa-server", rsa_server_params(), {{"alpha", -0.1}}); }, {"server.rsa-server.alpha"});
  expect_error([] { rule_params("rsa-server", rsa_server_params(), {{"cap", -1.0}}); }, {"server.rsa-server.cap"});
  expect_error(
      [] {
        rule_params("rsa-server", rsa_server_params(), {{"weight_decay", -1.0}});
      },
      {"server.rsa-server.weight_decay"});
}

}  // namespace
}  // namespace bastion
