// CUDA agreement table, flat-vector family (kernels/cuda/vector.h against kernels/cpu/vector.h): axpy
// and scale (float4 and scalar paths), the one-block double reductions with the CPU's edge cases, the
// GEMM-based pairwise distances and the row mean. Outputs start as NaN sentinels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/vector.h"
#include "kernels/cuda/vector.h"
#include "tests/cuda_test_support.h"
#include "tests/kernel_test_support.h"

namespace bastion {
namespace {

using testing::DeviceBuffer;
using testing::expect_agree;
using testing::random_floats;
using testing::sentinels;

// scale and mean_rows do on the GPU exactly the float (scale) or double (mean, rows in order) operations
// of the CPU, with nothing to contract into an FMA: bitwise equal.
constexpr double kExact = 0.0;
constexpr double kFloatRounding = 0x1.0p-24;   // unit roundoff of float32
constexpr double kDoubleRounding = 0x1.0p-53;  // unit roundoff of float64
// axpy: nvcc fuses y + a*x into one FMA, g++ may round a*x first. The two differ by at most the rounding
// of a*x (u |a x|) plus one rounding of the result on each side (u |y + a x| each), u = kFloatRounding.
// With |y|, |x| <= 1 and |a| < 1 that is <= 3u relative to max(|result|, 1): checked at 4u.
constexpr double kContractionTolerance = 4.0 * kFloatRounding;
// Double reductions summed in two orders (sequential on the CPU, strided + tree on the GPU) differ by at
// most 2 (D + 2) kDoubleRounding times the sum of |terms| (Higham §3.1 for each order, +1 for the product
// or difference rounded into each term and +1 for a sqrt or a division).
double reorder_bound(int64_t D, double magnitude) {
  return 2.0 * static_cast<double>(D + 2) * kDoubleRounding * magnitude;
}

const std::vector<int64_t> kSizes = {1, 7, 1001};
const std::vector<int64_t> kReductionSizes = {1, 7, 1001, 20011};  // 20011: ~39 terms per thread of the block

double run_double(void (*op)(double*, const float*, const float*, int64_t, CudaStream), const std::vector<float>& a,
                  const std::vector<float>& b) {
  DeviceBuffer<float> a_dev(a), b_dev(b);
  DeviceBuffer<double> out(std::vector<double>{std::numeric_limits<double>::quiet_NaN()});
  op(out.get(), a_dev.get(), b_dev.get(), static_cast<int64_t>(a.size()), cuda_stream());
  return out.download()[0];
}

double run_norm(const std::vector<float>& x) {
  DeviceBuffer<float> x_dev(x);
  DeviceBuffer<double> out(std::vector<double>{std::numeric_limits<double>::quiet_NaN()});
  vector_norm_cuda(out.get(), x_dev.get(), static_cast<int64_t>(x.size()), cuda_stream());
  return out.download()[0];
}

TEST(CudaAgreement, VectorAxpyAndScaleMatchCpu) {
  BASTION_REQUIRE_CUDA();
  Generator gen(21);
  constexpr float kA = 0.61f;
  for (int64_t D : kSizes) {
    for (int64_t offset : {0, 1}) {  // offset 1: pointers one float past a 16-byte boundary, scalar path
      SCOPED_TRACE("D=" + std::to_string(D) + " offset=" + std::to_string(offset));
      const std::vector<float> y = random_floats(D + offset, gen), x = random_floats(D + offset, gen);
      DeviceBuffer<float> y_dev(y), x_dev(x);
      vector_axpy_cuda(y_dev.get() + offset, kA, x_dev.get() + offset, D, cuda_stream());
      std::vector<float> want = y;
      vector_axpy_cpu(want.data() + offset, kA, x.data() + offset, D);
      expect_agree(y_dev.download(), want, kContractionTolerance, "axpy");

      vector_scale_cuda(x_dev.get() + offset, -kA, D, cuda_stream());
      want = x;
      vector_scale_cpu(want.data() + offset, -kA, D);
      expect_agree(x_dev.download(), want, kExact, "scale");
    }
  }
}

TEST(CudaAgreement, VectorReductionsMatchCpu) {
  BASTION_REQUIRE_CUDA();
  Generator gen(22);
  for (int64_t D : kReductionSizes) {
    SCOPED_TRACE("D=" + std::to_string(D));
    const std::vector<float> a = random_floats(D, gen), b = random_floats(D, gen);
    double dot_magnitude = 0.0;
    for (int64_t d = 0; d < D; ++d) dot_magnitude += std::abs(static_cast<double>(a[d]) * b[d]);

    const double dot = vector_dot_cpu(a.data(), b.data(), D);
    EXPECT_NEAR(run_double(vector_dot_cuda, a, b), dot, reorder_bound(D, dot_magnitude)) << "dot";
    const double norm = vector_norm_cpu(a.data(), D);
    EXPECT_NEAR(run_norm(a), norm, reorder_bound(D, norm)) << "norm";
    const double distance = vector_squared_distance_cpu(a.data(), b.data(), D);
    EXPECT_NEAR(run_double(vector_squared_distance_cuda, a, b), distance, reorder_bound(D, distance)) << "distance";
    // cosine: sum |a_d b_d| <= |a| |b| (Cauchy-Schwarz), so each of the three sums is off by at most
    // reorder_bound(D, 1) relative to |a| |b|, |a|^2 or |b|^2: 3 bounds in absolute terms.
    const double cosine = vector_cosine_cpu(a.data(), b.data(), D);
    EXPECT_NEAR(run_double(vector_cosine_cuda, a, b), cosine, 3.0 * reorder_bound(D, 1.0)) << "cosine";
  }
}

TEST(CudaAgreement, VectorCosineEdgeCasesMatchCpu) {
  BASTION_REQUIRE_CUDA();
  Generator gen(23);
  constexpr int64_t D = 1001;
  const std::vector<float> a = random_floats(D, gen), zero(D, 0.0f);
  std::vector<float> minus_a(D);
  for (int64_t d = 0; d < D; ++d) minus_a[d] = -a[d];
  // A zero vector is unrelated to everything, itself included: exactly 0, not NaN.
  EXPECT_EQ(run_double(vector_cosine_cuda, zero, a), 0.0);
  EXPECT_EQ(run_double(vector_cosine_cuda, a, zero), 0.0);
  EXPECT_EQ(run_double(vector_cosine_cuda, zero, zero), 0.0);
  // Parallel and antiparallel: within rounding of +-1, never beyond (the clamp).
  const double self = run_double(vector_cosine_cuda, a, a), opposite = run_double(vector_cosine_cuda, a, minus_a);
  EXPECT_LE(self, 1.0);
  EXPECT_NEAR(self, vector_cosine_cpu(a.data(), a.data(), D), 3.0 * reorder_bound(D, 1.0));
  EXPECT_GE(opposite, -1.0);
  EXPECT_NEAR(opposite, vector_cosine_cpu(a.data(), minus_a.data(), D), 3.0 * reorder_bound(D, 1.0));
  // D = 0: every sum is empty, the results are written as 0.
  EXPECT_EQ(run_double(vector_dot_cuda, {}, {}), 0.0);
  EXPECT_EQ(run_norm({}), 0.0);
}

// The CPU and GPU centre the rows identically (bitwise) and differ only inside the GEMM, whose float32
// Gram entries each carry an error of at most sum_tolerance(D) |C_i| |C_j| (tests/kernel_test_support.h).
// d(i, j) = G_ii + G_jj - 2 G_ij is then off by sum_tolerance(D) (|C_i| + |C_j|)^2 on each side.
void check_pairwise(int64_t n, int64_t D, uint64_t seed) {
  SCOPED_TRACE("n=" + std::to_string(n) + " D=" + std::to_string(D));
  Generator gen(seed);
  const std::vector<float> X = random_floats(n * D, gen);
  const int64_t workspace_floats = vector_pairwise_workspace_floats(n, D);
  DeviceBuffer<float> X_dev(X), out(sentinels(n * n)), workspace(sentinels(workspace_floats));
  vector_pairwise_squared_distances_cuda(out.get(), workspace.get(), X_dev.get(), n, D, cuda_stream());
  const std::vector<float> got = out.download();

  std::vector<float> cpu(n * n), cpu_workspace(workspace_floats);
  vector_pairwise_squared_distances_cpu(cpu.data(), cpu_workspace.data(), X.data(), n, D);
  std::vector<double> centred_norm(n, 0.0);  // |C_i|, centred on the mean row, in double
  for (int64_t d = 0; d < D; ++d) {
    double mean = 0.0;
    for (int64_t i = 0; i < n; ++i) mean += X[i * D + d];
    mean /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) centred_norm[i] += (X[i * D + d] - mean) * (X[i * D + d] - mean);
  }
  for (double& norm : centred_norm) norm = std::sqrt(norm);
  std::vector<double> want(cpu.begin(), cpu.end()), magnitude(n * n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) magnitude[i * n + j] = 2.0 * std::pow(centred_norm[i] + centred_norm[j], 2);
  testing::expect_close(got, want, magnitude, D, "pairwise");
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(got[i * n + i], 0.0f) << "diagonal " << i;
    for (int64_t j = 0; j < i; ++j) EXPECT_EQ(got[i * n + j], got[j * n + i]) << "symmetry " << i << ", " << j;
  }
}

TEST(CudaAgreement, VectorPairwiseSquaredDistancesMatchCpu) {
  BASTION_REQUIRE_CUDA();
  check_pairwise(7, 1001, 24);
  check_pairwise(5, kPairwiseBlockColumns + 5, 25);  // two column blocks: the second GEMM accumulates (beta = 1)
  check_pairwise(1, 3, 26);                          // a single row: only the diagonal
}

TEST(CudaAgreement, VectorMeanRowsMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  Generator gen(27);
  for (auto [n, D] : std::vector<std::pair<int64_t, int64_t>>{{1, 7}, {7, 1001}, {3, 1}}) {
    SCOPED_TRACE("n=" + std::to_string(n) + " D=" + std::to_string(D));
    const std::vector<float> X = random_floats(n * D, gen);
    DeviceBuffer<float> X_dev(X), out(sentinels(D));
    vector_mean_rows_cuda(out.get(), X_dev.get(), n, D, cuda_stream());
    std::vector<float> want(D);
    vector_mean_rows_cpu(want.data(), X.data(), n, D);
    expect_agree(out.download(), want, kExact, "mean_rows");
  }
}

}  // namespace
}  // namespace bastion
