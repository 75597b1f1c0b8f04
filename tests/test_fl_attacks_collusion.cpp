// Tests for the collusion attacks (lie, min-max, min-sum, ipm), normal_quantile and the NDSS'21 halving
// search: hand-computed small cases, and on random benign rows the defining property of each attack,
// recomputed independently here in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "fl/attacks/attack.h"
#include "fl/attacks/attack_support.h"
#include "fl/registry.h"
#include "tests/fl_test_support.h"
#include "tests/test_support.h"

using namespace bastion;
using namespace bastion::testing;

namespace {

std::vector<float> collude(const Attack& attack, const std::vector<float>& benign, int64_t n, int64_t participants,
                           int64_t malicious) {
  const int64_t D = static_cast<int64_t>(benign.size()) / n;
  CollusionContext context{benign.data(), n, D, participants, malicious, {}, Generator(1), {}};
  std::vector<float> out(static_cast<size_t>(D), -99.0f);
  attack.collude(out, context);
  return out;
}

}  // namespace

// ---------------------------------------------------------------- normal_quantile

TEST(FlAttack, NormalQuantileKnownValues) {
  // Reference values: Python's statistics.NormalDist().inv_cdf (Wichura's AS241, ~1e-16).
  constexpr double kQuantileTolerance = 1e-12;  // the contract: Acklam + one Halley step
  EXPECT_EQ(normal_quantile(0.5), 0.0);
  EXPECT_NEAR(normal_quantile(0.975), 1.959963984540054, kQuantileTolerance);
  EXPECT_NEAR(normal_quantile(0.025), -1.959963984540054, kQuantileTolerance);
  EXPECT_NEAR(normal_quantile(0.001), -3.090232306167813, kQuantileTolerance);
  EXPECT_NEAR(normal_quantile(0.7), 0.5244005127080407, kQuantileTolerance);
  EXPECT_NEAR(normal_quantile(1e-10) / -6.361340902404056, 1.0, kQuantileTolerance);
  // Round trip through Φ(x) = erfc(-x/√2)/2 over both tails and the centre (relative in p).
  for (double p : {1e-300, 1e-12, 1e-5, 0.02, 0.02425, 0.1, 0.3, 0.49, 0.6, 0.9, 0.99, 0.999999}) {
    const double x = normal_quantile(p);
    const double back = p <= 0.5 ? 0.5 * std::erfc(-x / std::sqrt(2.0)) : 1.0 - 0.5 * std::erfc(x / std::sqrt(2.0));
    EXPECT_NEAR(back / p, 1.0, 1e-12) << "p = " << p;
    // Symmetry where 1 - p is (nearly) exact; below 0.01 rounding 1 - p changes p itself noticeably.
    if (p >= 0.01) {
      EXPECT_NEAR(normal_quantile(1.0 - p), -x, 1e-14) << p;
    }
  }
  for (double bad : {0.0, 1.0, -0.1, 1.5, std::numeric_limits<double>::quiet_NaN()})
    expect_error([bad] { normal_quantile(bad); }, {"normal_quantile: p must lie in (0, 1)"});
}

// ---------------------------------------------------------------- lie

namespace {
// 3 benign rows, D = 4: mean (3, 2, 0, 2), sample std (2, 0, 0, 3).
const std::vector<float> kLieRows = {1, 2, 0, 5,   //
                                     3, 2, 0, -1,  //
                                     5, 2, 0, 2};
std::vector<float> mean_plus(double z) {
  return {static_cast<float>(3 + 2 * z), 2.0f, 0.0f, static_cast<float>(2 + 3 * z)};
}
void expect_floats(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t j = 0; j < got.size(); ++j) EXPECT_FLOAT_EQ(got[j], want[j]) << "coordinate " << j;
}
}  // namespace

TEST(FlAttack, LieZRulesOnAHandMadeMatrix) {
  // m = 10, f = 3: s = 3 in every rule.
  expect_floats(collude(*build_attack("lie"), kLieRows, 3, 10, 3), mean_plus(-0.5244005127080407));  // Φ⁻¹(7/10)
  expect_floats(collude(*build_attack("lie", {{"z_rule", std::string("fedcap")}}), kLieRows, 3, 10, 3),
                mean_plus(-0.18001236979270493));  // Φ⁻¹(4/7)
  expect_floats(collude(*build_attack("lie", {{"z_rule", std::string("spmc")}}), kLieRows, 3, 10, 3),
                mean_plus(+0.00015467125214517168));  // exp(-9) √(2π) / 2, added (SPMC's quirk)
  expect_floats(collude(*build_attack("lie", {{"z", 1.5}}), kLieRows, 3, 10, 3), mean_plus(-1.5));
}

TEST(FlAttack, LieClampsTheProbabilityAndHandlesOneBenignRow) {
  // m = 4, f = 4: s = -1, (m - s) / m = 1.25 -> clamped to 1 - 1e-6.
  expect_floats(collude(*build_attack("lie"), kLieRows, 3, 4, 4), mean_plus(-normal_quantile(1.0 - 1e-6)));
  // One benign row: std 0, the row itself.
  const std::vector<float> row = {0.5f, -1.0f, 2.0f};
  EXPECT_EQ(collude(*build_attack("lie"), row, 1, 5, 1), row);
}

// ---------------------------------------------------------------- ipm

TEST(FlAttack, IpmPointsAgainstTheBenignMeanWithNormRatioEpsilon) {
  Generator gen(4);
  std::vector<float> rows(5 * 20);
  for (float& v : rows) v = static_cast<float>(0.3 + gen.normal());
  std::vector<float> mean(20, 0.0f);
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 20; ++j) mean[j] += rows[i * 20 + j] / 5.0f;
  for (const auto& [epsilon, expected] : std::vector<std::pair<double, double>>{{0.1, 0.1}, {0.0, 7.0}}) {
    const std::vector<float> out = collude(*build_attack("ipm", {{"epsilon", epsilon}}), rows, 5, 7, 2);
    double dot = 0.0, out_sq = 0.0, mean_sq = 0.0;
    for (int64_t j = 0; j < 20; ++j) {
      dot += static_cast<double>(out[j]) * mean[j];
      out_sq += static_cast<double>(out[j]) * out[j];
      mean_sq += static_cast<double>(mean[j]) * mean[j];
    }
    EXPECT_NEAR(dot / std::sqrt(out_sq * mean_sq), -1.0, 1e-6) << epsilon;
    EXPECT_NEAR(std::sqrt(out_sq / mean_sq), expected, 1e-5 * expected) << epsilon;
  }
}

// ---------------------------------------------------------------- halving search

TEST(FlAttack, HalvingSearchBracketsTheLargestFeasibleGamma) {
  for (double boundary : {0.0123, 0.7071, 3.3, 9.99, 10.0, 17.25}) {
    for (double tolerance : {1e-5, 1e-2}) {
      const double gamma = halving_gamma_search(10.0, tolerance, [&](double g) { return g <= boundary; });
      EXPECT_LE(gamma, boundary);
      EXPECT_LT(boundary - gamma, 2.0 * tolerance) << boundary << " " << tolerance;
    }
  }
  EXPECT_EQ(halving_gamma_search(10.0, 1e-5, [](double) { return false; }), 0.0);
  const double saturated = halving_gamma_search(10.0, 1e-5, [](double) { return true; });
  EXPECT_GT(saturated, 20.0 - 2e-5);  // never beyond 2 gamma0
  EXPECT_LT(saturated, 20.0);
  EXPECT_NEAR(halving_gamma_search(10.0, 0.0, [](double g) { return g <= 1.0; }), 1.0, 1e-12);  // ends
  EXPECT_EQ(halving_gamma_search(0.0, 1e-5, [](double) { return true; }), 0.0);
}

// ---------------------------------------------------------------- min-max / min-sum

TEST(FlAttack, MinMaxAndMinSumOnTwoPointsInOneDimension) {
  // Rows -1 and 1: mean 0, p = std = √2. Min-max: max_i (√2 γ ± 1)² <= 4 gives √2 γ <= 1; min-sum:
  // (√2 γ + 1)² + (√2 γ - 1)² = 4γ² + 2 <= 0 + 4 gives the same γ = 1/√2. Either way out = -1.
  const std::vector<float> rows = {-1.0f, 1.0f};
  const double tolerance = 1e-6;
  for (const std::string name : {"min-max", "min-sum"}) {
    const std::vector<float> out = collude(*build_attack(name, {{"tolerance", tolerance}}), rows, 2, 4, 2);
    EXPECT_GE(out[0], -1.0f - 1e-6f) << name;  // γ <= 1/√2 up to float rounding
    EXPECT_NEAR(out[0], -1.0, 2.0 * tolerance * std::sqrt(2.0) + 1e-6) << name;
  }
}

namespace {

// 8 benign rows, D = 50: a shared direction (so the mean, unit and sign deviations are not degenerate)
// plus per-row noise.
constexpr int64_t kRows = 8, kD = 50;
std::vector<float> random_benign() {
  Generator gen(21);
  std::vector<double> shared(kD);
  for (double& v : shared) v = gen.normal();
  std::vector<float> rows(kRows * kD);
  for (int64_t i = 0; i < kRows; ++i)
    for (int64_t j = 0; j < kD; ++j) rows[i * kD + j] = static_cast<float>(shared[j] + 0.5 * gen.normal());
  return rows;
}

// The attack's reference quantities, recomputed here in double from the definitions.
struct Reference {
  std::vector<double> mean, p;
};
Reference reference(const std::vector<float>& rows, const std::string& deviation) {
  Reference r{std::vector<double>(kD, 0.0), std::vector<double>(kD, 0.0)};
  for (int64_t i = 0; i < kRows; ++i)
    for (int64_t j = 0; j < kD; ++j) r.mean[j] += rows[i * kD + j] / static_cast<double>(kRows);
  double norm = 0.0;
  for (double m : r.mean) norm += m * m;
  norm = std::sqrt(norm);
  for (int64_t j = 0; j < kD; ++j) {
    double sq = 0.0;
    for (int64_t i = 0; i < kRows; ++i) sq += (rows[i * kD + j] - r.mean[j]) * (rows[i * kD + j] - r.mean[j]);
    r.p[j] = deviation == "std"    ? std::sqrt(sq / (kRows - 1))
             : deviation == "unit" ? r.mean[j] / norm
                                   : static_cast<double>((r.mean[j] > 0) - (r.mean[j] < 0));
  }
  return r;
}

double distance(const std::vector<double>& a, const float* b, bool squared) {
  double sq = 0.0;
  for (int64_t j = 0; j < kD; ++j) sq += (a[j] - b[j]) * (a[j] - b[j]);
  return squared ? sq : std::sqrt(sq);
}

// The criterion minus its bound: <= 0 means feasible. min-max: max_i d(v, X_i) - max_{i,j} d(X_i, X_j);
// min-sum: sum_i d(v, X_i) - (max or min)_i sum_j d(X_i, X_j).
double excess(const std::vector<double>& v, const std::vector<float>& rows, bool min_max, bool squared,
              bool bound_max) {
  double criterion = 0.0, bound = min_max || bound_max ? 0.0 : std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < kRows; ++i) {
    const double d = distance(v, &rows[i * kD], squared);
    criterion = min_max ? std::max(criterion, d) : criterion + d;
    std::vector<double> xi(rows.begin() + i * kD, rows.begin() + (i + 1) * kD);
    double score = 0.0;
    for (int64_t j = 0; j < kRows; ++j) {
      const double dij = distance(xi, &rows[j * kD], squared);
      score = min_max ? std::max(score, dij) : score + dij;
    }
    bound = min_max || bound_max ? std::max(bound, score) : std::min(bound, score);
  }
  return criterion - bound;
}

}  // namespace

TEST(FlAttack, MinMaxAndMinSumFindTheLargestFeasibleGammaForEveryOption) {
  // The attack's bound uses GEMM pairwise distances (< 1e-6 relative, vector.h) and its output is
  // rounded to float, so feasibility is checked with a relative slack of 1e-5 of the bound; the search
  // tolerance 1e-4 makes "3 tolerances above gamma_succ" (past the < 2-tolerance bracket) a clear
  // violation, well beyond that slack.
  constexpr double kSearchTolerance = 1e-4, kRelativeSlack = 1e-5;
  const std::vector<float> rows = random_benign();
  for (const std::string attack : {"min-max", "min-sum"}) {
    for (const std::string deviation : {"std", "unit", "sign"}) {
      for (const std::string dist : {"squared", "l2"}) {
        for (const std::string bound : {"max", "min"}) {
          if (attack == "min-max" && bound == "min") continue;  // min-max has no bound option
          std::map<std::string, ParamValue> given = {
              {"deviation", deviation}, {"distance", dist}, {"tolerance", kSearchTolerance}};
          if (attack == "min-sum") given["bound"] = bound;
          const std::string label = attack + " " + deviation + " " + dist + " " + bound;
          const std::vector<float> out = collude(*build_attack(attack, given), rows, kRows, 10, 2);
          const Reference r = reference(rows, deviation);
          double num = 0.0, den = 0.0;  // gamma = ((mean - out).p) / (p.p)
          for (int64_t j = 0; j < kD; ++j) {
            num += (r.mean[j] - out[j]) * r.p[j];
            den += r.p[j] * r.p[j];
          }
          const double gamma = num / den;
          EXPECT_GT(gamma, 0.0) << label;
          EXPECT_LT(gamma, 20.0 - 1e-3) << label << ": the search saturated; raise gamma0 in the test";
          for (int64_t j = 0; j < kD; ++j) ASSERT_NEAR(out[j], r.mean[j] - gamma * r.p[j], 1e-5) << label;
          const bool min_max = attack == "min-max", squared = dist == "squared", bound_max = bound == "max";
          std::vector<double> at(out.begin(), out.end());
          const double scale = std::abs(excess(r.mean, rows, min_max, squared, bound_max)) + 1.0;
          EXPECT_LE(excess(at, rows, min_max, squared, bound_max), kRelativeSlack * scale) << label << " infeasible";
          std::vector<double> above(kD);
          for (int64_t j = 0; j < kD; ++j) above[j] = r.mean[j] - (gamma + 3.0 * kSearchTolerance) * r.p[j];
          EXPECT_GT(excess(above, rows, min_max, squared, bound_max), kRelativeSlack * scale)
              << label << " not maximal";
        }
      }
    }
  }
}

TEST(FlAttack, MinMaxWithOneBenignRowSendsThatRow) {
  // One row: std 0 (p = 0), and for unit/sign the bound 0 rejects every gamma > 0.
  const std::vector<float> row = {0.5f, -1.0f, 2.0f};
  for (const std::string deviation : {"std", "unit", "sign"}) {
    EXPECT_EQ(collude(*build_attack("min-max", {{"deviation", deviation}}), row, 1, 3, 2), row) << deviation;
    EXPECT_EQ(collude(*build_attack("min-sum", {{"deviation", deviation}}), row, 1, 3, 2), row) << deviation;
  }
}

TEST(FlAttack, CollusionRejectsAMismatchedOutput) {
  const std::vector<float> rows = {1.0f, 2.0f, 3.0f, 4.0f};
  CollusionContext context{rows.data(), 2, 2, 4, 2, {}, Generator(1), {}};
  std::vector<float> out(3);
  for (const std::string name : {"lie", "min-max", "min-sum", "ipm"})
    expect_error([&] { build_attack(name)->collude(out, context); }, {"attack " + name, "D = 2"});
}
