// Flat-vector kernels of kernels/cpu/vector.h: hand-computed examples, the documented edge cases
// (zero vectors, identical rows), and the GEMM-based pairwise distances against a direct double sum.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vector.h"
#include "tensor/error.h"
#include "tensor/random.h"

namespace bastion {
namespace {

constexpr double kUnitRoundoff = 0x1.0p-24;  // float32: u = 2^-24

std::vector<float> randn(int64_t n, Generator& gen, double mean = 0.0, double stddev = 1.0) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(mean + stddev * gen.normal());
  return v;
}

TEST(VectorOps, AxpyAndScale) {
  std::vector<float> y = {1, 2, 3};
  const std::vector<float> x = {1, -1, 0.5f};
  vector_axpy_cpu(y.data(), 2.0f, x.data(), 3);
  EXPECT_EQ(y, (std::vector<float>{3, 0, 4}));
  vector_scale_cpu(y.data(), -0.5f, 3);
  EXPECT_EQ(y, (std::vector<float>{-1.5f, 0, -2}));
  vector_axpy_cpu(y.data(), 1.0f, x.data(), 0);  // D = 0 touches nothing
  EXPECT_EQ(y, (std::vector<float>{-1.5f, 0, -2}));
}

TEST(VectorOps, DotNormDistance) {
  const std::vector<float> a = {1, 2, 3}, b = {4, -5, 6}, c = {4, 6, 3};
  EXPECT_EQ(vector_dot_cpu(a.data(), b.data(), 3), 12.0);  // 4 - 10 + 18
  const std::vector<float> three_four = {3, 4};
  EXPECT_EQ(vector_norm_cpu(three_four.data(), 2), 5.0);
  EXPECT_EQ(vector_squared_distance_cpu(a.data(), c.data(), 3), 25.0);  // 9 + 16 + 0
  EXPECT_EQ(vector_squared_distance_cpu(a.data(), a.data(), 3), 0.0);
  EXPECT_EQ(vector_norm_cpu(a.data(), 0), 0.0);
}

TEST(VectorOps, DotAccumulatesInDouble) {
  // In float, 1e8 + 1 rounds back to 1e8 and the sum comes out 0; in double it is exactly 1.
  const std::vector<float> a = {1e8f, 1.0f, -1e8f}, ones = {1, 1, 1};
  EXPECT_EQ(vector_dot_cpu(a.data(), ones.data(), 3), 1.0);
  // |(1e4, 1)|^2 = 1e8 + 1: representable in double, rounds to 1e8 in float.
  const std::vector<float> big = {1e4f, 1.0f}, origin = {0, 0};
  EXPECT_EQ(vector_squared_distance_cpu(big.data(), origin.data(), 2), 100000001.0);
  EXPECT_EQ(vector_norm_cpu(big.data(), 2), std::sqrt(100000001.0));
}

// The lane-split squared norm against a long double sum, on lengths around the lane count (every tail)
// and a model-sized one (cnn-fedfsa's 1.3 M): within the double rounding bound of the partial sums, and the same bits on a second
// call (a fixed order). Integers make an exact known answer: 1^2 + ... + 100^2 = 338350.
TEST(VectorOps, SquaredNormInLanesMatchesALongDoubleSum) {
  Generator gen(3);
  for (int64_t D : {int64_t{1}, int64_t{31}, kNormLanes, kNormLanes + 1, int64_t{1000}, int64_t{1300000}}) {
    const std::vector<float> x = randn(D, gen);
    long double want = 0.0L;
    for (float v : x) want += static_cast<long double>(v) * v;
    const double got = vector_squared_norm_cpu(x.data(), D);
    // Each lane sums D / 32 positive terms in double: relative error at most (D / 32 + 5) 2^-53.
    const double bound = (static_cast<double>(D) / kNormLanes + 5.0) * 0x1.0p-53;
    EXPECT_NEAR(got, static_cast<double>(want), bound * static_cast<double>(want)) << "D = " << D;
    EXPECT_EQ(got, vector_squared_norm_cpu(x.data(), D)) << "D = " << D;
    EXPECT_EQ(vector_norm_cpu(x.data(), D), std::sqrt(got)) << "D = " << D;
  }
  std::vector<float> integers(100);
  for (int i = 0; i < 100; ++i) integers[i] = static_cast<float>(i + 1);
  EXPECT_EQ(vector_squared_norm_cpu(integers.data(), 100), 338350.0);
  EXPECT_EQ(vector_squared_norm_cpu(integers.data(), 0), 0.0);
}

// The lane order written out element by element: x[d]^2 into lane d mod kNormLanes, then the pairwise tree.
double squared_norm_by_lanes(const float* x, int64_t D) {
  double lanes[kNormLanes] = {};
  for (int64_t d = 0; d < D; ++d) lanes[d % kNormLanes] += static_cast<double>(x[d]) * x[d];
  for (int64_t width = kNormLanes / 2; width > 0; width /= 2)
    for (int64_t j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  return lanes[0];
}

// One pass for the total and the per-tensor norms (a SAM step's clip and perturbation) must give the very
// numbers of separate passes, on parts of every length around the lane count, starting at odd offsets.
TEST(VectorOps, SquaredNormPartsAreTheSeparatePassesBitForBit) {
  Generator gen(11);
  const std::vector<int64_t> offsets = {0, 1, 33, 33, 64, 1000, 1031, 5123, 9000, 9031};
  const int64_t D = offsets.back();
  const std::vector<float> x = randn(D, gen);
  std::vector<double> parts(offsets.size() - 1, -1.0);
  const double total = vector_squared_norm_parts_cpu(parts.data(), x.data(), offsets.data(), 9);
  EXPECT_EQ(total, vector_squared_norm_cpu(x.data(), D));
  EXPECT_EQ(total, squared_norm_by_lanes(x.data(), D));
  for (size_t k = 0; k + 1 < offsets.size(); ++k)
    EXPECT_EQ(parts[k], squared_norm_by_lanes(x.data() + offsets[k], offsets[k + 1] - offsets[k])) << "part " << k;
  EXPECT_EQ(parts[2], 0.0);  // an empty part
}

// The lanes filled run by run at their offsets (the clip after SAM's ascent, summed as the direction is
// written) are the one-pass norm of the whole vector.
TEST(VectorOps, SquaredNormLanesInRunsAreTheWholePass) {
  Generator gen(12);
  const std::vector<float> x = randn(7777, gen);
  double lanes[kNormLanes] = {};
  for (int64_t begin = 0, n = 1; begin < 7777; begin += n, n = n * 3 + 1)
    vector_squared_norm_lanes_cpu(lanes, nullptr, x.data() + begin, std::min<int64_t>(n, 7777 - begin), begin);
  EXPECT_EQ(vector_reduce_norm_lanes(lanes), squared_norm_by_lanes(x.data(), 7777));
}

TEST(VectorOps, CosineKnownAnswersAndZeroVectors) {
  const std::vector<float> e1 = {1, 0}, e2 = {0, 1}, diag = {1, 1}, zero = {0, 0};
  const std::vector<float> a = {1, 2}, twice_a = {2, 4}, minus_a = {-1, -2};
  EXPECT_EQ(vector_cosine_cpu(e1.data(), e2.data(), 2), 0.0);
  EXPECT_NEAR(vector_cosine_cpu(a.data(), twice_a.data(), 2), 1.0, 1e-15);
  EXPECT_NEAR(vector_cosine_cpu(a.data(), minus_a.data(), 2), -1.0, 1e-15);
  EXPECT_NEAR(vector_cosine_cpu(diag.data(), e1.data(), 2), 1.0 / std::sqrt(2.0), 1e-15);
  // Documented: a zero vector has cosine 0 with everything, itself included (not NaN).
  EXPECT_EQ(vector_cosine_cpu(zero.data(), a.data(), 2), 0.0);
  EXPECT_EQ(vector_cosine_cpu(a.data(), zero.data(), 2), 0.0);
  EXPECT_EQ(vector_cosine_cpu(zero.data(), zero.data(), 2), 0.0);
}

TEST(VectorOps, CosineOfAVectorWithItselfNeverExceedsOne) {
  Generator gen(3);
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<float> v = randn(1 + 37 * trial, gen);
    const double c = vector_cosine_cpu(v.data(), v.data(), static_cast<int64_t>(v.size()));
    EXPECT_LE(c, 1.0);
    EXPECT_GE(c, 1.0 - 1e-14);
  }
}

TEST(VectorOps, MeanRowsKnownAnswer) {
  const std::vector<float> X = {1, 2,  //
                                3, 4,  //
                                5, 9};
  std::vector<float> out(2, std::numeric_limits<float>::quiet_NaN());
  vector_mean_rows_cpu(out.data(), X.data(), 3, 2);
  EXPECT_EQ(out, (std::vector<float>{3, 5}));
  vector_mean_rows_cpu(out.data(), X.data(), 1, 2);  // one row: itself
  EXPECT_EQ(out, (std::vector<float>{1, 2}));
  EXPECT_THROW(vector_mean_rows_cpu(out.data(), X.data(), 0, 2), Error);
}

TEST(VectorOps, MeanRowsAcrossColumnBlocks) {  // D spans several 512-column blocks with a partial last one
  Generator gen(4);
  const int64_t n = 5, D = 1300;
  const std::vector<float> X = randn(n * D, gen);
  std::vector<float> out(D, std::numeric_limits<float>::quiet_NaN());
  vector_mean_rows_cpu(out.data(), X.data(), n, D);
  for (int64_t d = 0; d < D; ++d) {
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) total += X[i * D + d];
    const double want = total / n;
    // Summed in double, so only the final rounding to float remains: half an ulp, one ulp with slack.
    ASSERT_NEAR(out[d], want, 2 * kUnitRoundoff * std::abs(want) + 1e-30) << "column " << d;
  }
}

// ---- pairwise squared distances through GEMM --------------------------------------------------
// Error model (see vector.h): |computed - exact| <= e(D) * (|C_i|^2 + |C_j|^2) for the centred rows
// C = X - mean row. G[i, j] carries the float32 GEMM error of a D-term dot product (worst case D*u*|C_i||C_j|,
// in practice ~sqrt(D)*u with blocked sums: we allow 8*sqrt(D)*u, ten standard deviations of that random
// walk, capped by the worst case), counted twice (G[i,i] + G[j,j] - 2 G[i,j] holds 2|C_i||C_j| worth
// of products), plus u for the rounding of the centred values and of the result. Since
// 2|C_i||C_j| <= |C_i|^2 + |C_j|^2, e(D) = (2 min(D, 8 sqrt(D)) + 3) * u.
double pairwise_tolerance(int64_t D) {
  const double d = static_cast<double>(D);
  return (2.0 * std::min(d, 8.0 * std::sqrt(d)) + 3.0) * kUnitRoundoff;
}

std::vector<float> pairwise(const std::vector<float>& X, int64_t n, int64_t D) {
  std::vector<float> out(n * n, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> workspace(vector_pairwise_workspace_floats(n, D), std::numeric_limits<float>::quiet_NaN());
  vector_pairwise_squared_distances_cpu(out.data(), workspace.data(), X.data(), n, D);
  return out;
}

// The direct double-precision reference, and the bound above, for every pair.
void expect_pairwise_matches_direct(const std::vector<float>& X, int64_t n, int64_t D) {
  const std::vector<float> out = pairwise(X, n, D);
  std::vector<double> mean(D, 0.0), centred_norm(n, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < D; ++d) mean[d] += X[i * D + d] / static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < D; ++d) centred_norm[i] += std::pow(X[i * D + d] - mean[d], 2);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(out[i * n + i], 0.0f) << "diagonal " << i;
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_EQ(out[i * n + j], out[j * n + i]) << "not symmetric at " << i << ", " << j;
      EXPECT_GE(out[i * n + j], 0.0f);
      if (i == j) continue;
      const double want = vector_squared_distance_cpu(X.data() + i * D, X.data() + j * D, D);
      const double bound = pairwise_tolerance(D) * (centred_norm[i] + centred_norm[j]) + 1e-30;
      EXPECT_NEAR(out[i * n + j], want, bound) << i << ", " << j;
    }
  }
}

TEST(VectorOps, PairwiseHandComputed) {
  const std::vector<float> X = {0, 0,  //
                                3, 4,  //
                                1, 1};
  // |(3,4)|^2 = 25; |(1,1)|^2 = 2; |(3,4) - (1,1)|^2 = 4 + 9 = 13. The centred rows are thirds, so the
  // result is exact only to float rounding.
  const std::vector<float> out = pairwise(X, 3, 2);
  const float want[] = {0, 25, 2, 25, 0, 13, 2, 13, 0};
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(out[i], want[i], 8 * kUnitRoundoff * 50) << i;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i * 3 + i], 0.0f);
  EXPECT_EQ(pairwise(X, 1, 2), (std::vector<float>{0.0f}));     // one row
  EXPECT_EQ(pairwise(X, 2, 0), (std::vector<float>(4, 0.0f)));  // D = 0: all rows are the empty vector
}

TEST(VectorOps, PairwiseViaGemmMatchesDirectDoubleSum) {
  Generator gen(5);
  // D = 5000 spans three column blocks of the workspace (2048 + 2048 + 904).
  for (const int64_t D : {1, 7, 1000, 5000, 40000}) {
    SCOPED_TRACE(::testing::Message() << "D " << D);
    const int64_t n = 9;
    std::vector<float> X = randn(n * D, gen);
    for (int64_t d = 0; d < D; ++d) X[3 * D + d] *= 10.0f;               // rows of different sizes
    std::copy(X.begin() + 1 * D, X.begin() + 2 * D, X.begin() + 5 * D);  // row 5 duplicates row 1
    expect_pairwise_matches_direct(X, n, D);
    const std::vector<float> out = pairwise(X, n, D);
    EXPECT_LE(out[1 * n + 5], pairwise_tolerance(D) * 2 * vector_dot_cpu(&X[D], &X[D], D)) << "duplicate rows";
  }
}

// Rows close together far from the origin: without centring, |X_i|^2 + |X_j|^2 - 2 X_i.X_j cancels to
// ~1e-6 of its terms and float GEMM error swamps it (the uncentred formula, computed here with gemm_cpu
// for comparison, is off by ~16%); the centred kernel keeps the relative error near float rounding.
TEST(VectorOps, PairwiseCloseRowsFarFromTheOrigin) {
  Generator gen(6);
  const int64_t n = 6, D = 4000;
  const std::vector<float> base = randn(D, gen);
  std::vector<float> X(n * D);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < D; ++d) X[i * D + d] = base[d] + static_cast<float>(1e-3 * gen.normal());
  expect_pairwise_matches_direct(X, n, D);

  const std::vector<float> out = pairwise(X, n, D);
  std::vector<float> gram(n * n);
  gemm_cpu(false, true, n, n, D, 1.0f, X.data(), D, X.data(), D, 0.0f, gram.data(), n);
  double worst = 0.0, worst_uncentred = 0.0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) {
      const double want = vector_squared_distance_cpu(X.data() + i * D, X.data() + j * D, D);
      const double uncentred = static_cast<double>(gram[i * n + i]) + gram[j * n + j] - 2.0 * gram[i * n + j];
      worst = std::max(worst, std::abs(out[i * n + j] - want) / want);
      worst_uncentred = std::max(worst_uncentred, std::abs(uncentred - want) / want);
    }
  // The centred rows are ~1e-3 and their distances ~2 |C_i|^2, so the bound above is ~1e-4 relative
  // at most; measured ~1e-7.
  EXPECT_LT(worst, 1e-4);
  std::ostringstream measured;
  measured << std::scientific << "centred " << worst << ", uncentred " << worst_uncentred;
  RecordProperty("worst_relative_errors", measured.str());
}

}  // namespace
}  // namespace bastion
