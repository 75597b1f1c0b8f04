// The GEMMs of kernels/cpu: gemm_blocked_cpu, gemm_openblas_cpu, gemm_cpu's dispatch and the small-batch path
// in each instruction set the CPU has, against a double-precision reference and each other; gemm_cpu's rules
// for the small path; thread-count determinism. Output buffers start as NaN (or a sentinel) so an element a
// kernel forgot to write shows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_small.h"
#include "tensor/random.h"
#include "tests/kernel_test_support.h"

namespace bastion {
namespace {

using testing::bitwise_equal;
using testing::expect_close;
using testing::kNaN;
using testing::randn;
using testing::sum_tolerance;
using testing::ThreadCountGuard;

struct GemmCase {
  int64_t M, N, K;
};

// Element (row, col) of op(X), where X is stored row-major with leading dimension ld.
float op_at(const std::vector<float>& X, int64_t ld, bool trans, int64_t row, int64_t col) {
  return trans ? X[col * ld + row] : X[row * ld + col];
}

void check_gemm(bool trans_a, bool trans_b, const GemmCase& c, float alpha, float beta, Generator& gen) {
  SCOPED_TRACE(::testing::Message() << "trans_a " << trans_a << " trans_b " << trans_b << " M " << c.M << " N " << c.N
                                    << " K " << c.K << " alpha " << alpha << " beta " << beta);
  // Leading dimensions larger than needed; the padding holds NaN, so a kernel that reads it fails.
  const int64_t a_rows = trans_a ? c.K : c.M, a_cols = trans_a ? c.M : c.K, lda = a_cols + 3;
  const int64_t b_rows = trans_b ? c.N : c.K, b_cols = trans_b ? c.K : c.N, ldb = b_cols + 5;
  const int64_t ldc = c.N + 2;
  constexpr float kPadSentinel = -12345.0f;  // C's padding columns: must come back untouched
  std::vector<float> A(std::max<int64_t>(a_rows * lda, 1), kNaN), B(std::max<int64_t>(b_rows * ldb, 1), kNaN);
  for (int64_t i = 0; i < a_rows; ++i)
    for (int64_t j = 0; j < a_cols; ++j) A[i * lda + j] = static_cast<float>(gen.normal());
  for (int64_t i = 0; i < b_rows; ++i)
    for (int64_t j = 0; j < b_cols; ++j) B[i * ldb + j] = static_cast<float>(gen.normal());
  std::vector<float> C0(c.M * ldc, kPadSentinel);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) C0[i * ldc + j] = beta == 0.0f ? kNaN : static_cast<float>(gen.normal());

  // Reference in double, and the magnitude sum |alpha a b| + |beta c| for the tolerance.
  std::vector<double> want(c.M * c.N), magnitude(c.M * c.N);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      double total = 0.0, mag = 0.0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double term = static_cast<double>(op_at(A, lda, trans_a, i, k)) * op_at(B, ldb, trans_b, k, j);
        total += term;
        mag += std::abs(term);
      }
      const double old = beta == 0.0f ? 0.0 : C0[i * ldc + j];
      want[i * c.N + j] = alpha * total + beta * old;
      magnitude[i * c.N + j] = std::abs(alpha) * mag + std::abs(beta * old);
    }

  auto run_and_check = [&](auto gemm, const char* name) -> std::vector<float> {
    std::vector<float> C = C0;
    gemm(trans_a, trans_b, c.M, c.N, c.K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
    std::vector<float> got(c.M * c.N);
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) got[i * c.N + j] = C[i * ldc + j];
    int64_t padding_written = 0;
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = c.N; j < ldc; ++j) padding_written += C[i * ldc + j] != kPadSentinel;
    EXPECT_EQ(padding_written, 0) << name << " wrote into C's padding columns";
    expect_close(got, want, magnitude, c.K, name);
    return got;
  };
  const std::vector<float> blocked = run_and_check(gemm_blocked_cpu, "gemm_blocked_cpu");
  run_and_check(gemm_cpu, "gemm_cpu");  // the dispatch everyone calls, with its panel split
  // The small-batch path on every shape, not only those gemm_cpu sends it, in each instruction set this CPU
  // runs: its blocks have edge cases (rows, vectors, lanes of K) that any shape can hit. Its sums are no
  // longer than a sequential one (16 or 8 lanes of K/16 or K/8 terms, then a 4- or 3-level tree), so the
  // same sum_tolerance(K) bounds it.
  if (gemm_small_supports(trans_a, trans_b)) {
    if (gemm_small_avx512_available()) run_and_check(gemm_small_avx512_cpu, "gemm_small_avx512_cpu");
    if (gemm_small_avx2_available()) run_and_check(gemm_small_avx2_cpu, "gemm_small_avx2_cpu");
  }
  if (!gemm_has_openblas()) return;
  const std::vector<float> openblas = run_and_check(gemm_openblas_cpu, "gemm_openblas_cpu");
  // The two implementations agree with each other within twice the reference tolerance.
  const double rel = 2.0 * sum_tolerance(c.K);
  for (size_t i = 0; i < blocked.size(); ++i)
    ASSERT_LE(std::abs(blocked[i] - openblas[i]), rel * magnitude[i] + 1e-30) << "element " << i;
}

TEST(KernelsCpuGemm, BlockedAndOpenBlasAgreeWithDoubleReference) {
  Generator gen(1);
  // The last two are big enough for gemm_cpu to split C into column panels (512 + 512 + 76) and row
  // panels (128 + 128 + 44).
  const GemmCase cases[] = {{1, 1, 1},    {7, 13, 5}, {65, 33, 129},  {200, 3, 300},
                            {3, 600, 17}, {4, 5, 0},  {16, 1100, 40}, {300, 50, 30}};
  for (const GemmCase& c : cases)
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true})
        for (const float beta : {0.0f, 1.0f, -2.0f}) check_gemm(trans_a, trans_b, c, 0.5f, beta, gen);
  // alpha = 1 with beta = 0, the call every conv and linear layer makes.
  check_gemm(false, true, {31, 47, 70}, 1.0f, 0.0f, gen);
  if (!gemm_has_openblas()) GTEST_SKIP() << "built without OpenBLAS: only the blocked GEMM was checked";
}

// The small-batch path's own shapes: FedFSA's linear layers at batch 48 and odd neighbours that leave
// partial register blocks in every dimension (AVX-512: 3 x 8 dot blocks, 6 rows x 4 vectors of 16 in the
// broadcast form; AVX2: 3 x 4 and 6 x 2 vectors of 8; K not a multiple of 16 or 8), at the three trans
// combinations it serves; K deeper than one copied slice of B (AVX2's broadcast slices are 256 rows, both
// dot slices 1024 floats); a convolution's weight gradient (6 rows, K in the tens of thousands).
TEST(KernelsCpuGemm, SmallPathAgreesWithDoubleReference) {
  if (!gemm_small_available()) GTEST_SKIP() << "no AVX2 + FMA on this CPU: the small path is never chosen";
  Generator gen(2);
  const GemmCase forward[] = {{48, 1024, 192}, {47, 1031, 193}, {49, 10, 1024}, {1, 9, 17},   {2, 7, 15},
                              {128, 40, 300},  {82, 37, 257},   {13, 6, 2100},  {6, 25, 9000}};  // 128, 82: evaluation
  const GemmCase input_grad[] = {{48, 192, 1024}, {47, 193, 1030}, {10, 1024, 10},
                                 {5, 65, 3},      {1, 1, 1},       {25, 70, 530}};
  const GemmCase weight_grad[] = {{1024, 192, 48}, {1031, 193, 47}, {10, 1024, 48}, {7, 17, 1}, {3, 100, 9}};
  for (const float beta : {0.0f, 1.0f, -2.0f})
    for (const float alpha : {1.0f, 0.5f}) {
      for (const GemmCase& c : forward) check_gemm(false, true, c, alpha, beta, gen);
      for (const GemmCase& c : input_grad) check_gemm(false, false, c, alpha, beta, gen);
      for (const GemmCase& c : weight_grad) check_gemm(true, false, c, alpha, beta, gen);
    }
}

// gemm_cpu's rule sends the evaluation's forwards (y = x W^T, up to 128 rows, K >= 256) to the small path
// and keeps thinner ones (K = 192: cnn-fedfsa's fc1, where OpenBLAS won) on OpenBLAS: the dispatched result
// is the small path's bit for bit only where the rule takes it.
TEST(KernelsCpuGemm, EvaluationForwardsUpTo128RowsTakeTheSmallPathWhereDeep) {
  if (gemm_small_isa() != GemmSmallIsa::avx512 || !gemm_has_openblas())
    GTEST_SKIP() << "needs the AVX-512 small path and OpenBLAS";
  Generator gen(3);
  auto same_as_small = [&](int64_t M, int64_t N, int64_t K) {
    const std::vector<float> A = randn(M * K, gen), B = randn(N * K, gen);
    std::vector<float> dispatched(M * N), small(M * N);
    gemm_cpu(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, dispatched.data(), N);
    gemm_small_cpu(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, small.data(), N);
    return bitwise_equal(dispatched, small);
  };
  EXPECT_TRUE(same_as_small(128, 64, 1024));  // cnn-fedfsa's fc2 at the evaluation's batch
  EXPECT_TRUE(same_as_small(82, 64, 1024));   // and its last batch
  EXPECT_TRUE(same_as_small(48, 64, 192));    // a training batch: the small path at any depth
  EXPECT_FALSE(same_as_small(128, 64, 192));  // fc1 at the evaluation's batch stays on OpenBLAS
  EXPECT_FALSE(same_as_small(129, 64, 1024));
}

// Without AVX-512, gemm_cpu's rule takes the AVX2 path for the dot form only (y = x W^T, and a convolution's
// weight gradient), up to 48 rows and K >= 256: the dispatched result is the AVX2 path's bit for bit there
// and OpenBLAS's elsewhere (the two sum in different orders, so they differ in the last bits on these inputs).
TEST(KernelsCpuGemm, WithoutAvx512OnlyDeepDotFormsUpTo48RowsTakeTheAvx2Path) {
  if (gemm_small_isa() != GemmSmallIsa::avx2 || !gemm_has_openblas())
    GTEST_SKIP() << "needs the AVX2 small path (a CPU with AVX2 but not AVX-512F) and OpenBLAS";
  Generator gen(4);
  auto same_as_avx2 = [&](bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K) {
    const std::vector<float> A = randn(M * K, gen), B = randn(N * K, gen);
    const int64_t lda = trans_a ? M : K, ldb = trans_b ? K : N;
    std::vector<float> dispatched(M * N), small(M * N), openblas(M * N);
    gemm_cpu(trans_a, trans_b, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, dispatched.data(), N);
    gemm_small_avx2_cpu(trans_a, trans_b, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, small.data(), N);
    gemm_openblas_cpu(trans_a, trans_b, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, openblas.data(), N);
    EXPECT_FALSE(bitwise_equal(small, openblas)) << "inputs that cannot tell the two paths apart";
    return bitwise_equal(dispatched, small);
  };
  EXPECT_TRUE(same_as_avx2(false, true, 48, 64, 1024));    // cnn-fedfsa's fc2 forward at batch 48
  EXPECT_TRUE(same_as_avx2(false, true, 6, 25, 4096));     // a convolution's weight gradient
  EXPECT_FALSE(same_as_avx2(false, true, 49, 64, 1024));   // more rows
  EXPECT_FALSE(same_as_avx2(false, true, 48, 64, 192));    // fc1's shallow forward
  EXPECT_FALSE(same_as_avx2(false, false, 48, 64, 1024));  // the broadcast forms stay on OpenBLAS
  EXPECT_FALSE(same_as_avx2(true, false, 64, 64, 48));
}

TEST(KernelsCpuGemm, TwoByTwoKnownAnswer) {
  const float A[] = {1, 2, 3, 4}, B[] = {5, 6, 7, 8};
  float C[4] = {kNaN, kNaN, kNaN, kNaN};
  gemm_cpu(false, false, 2, 2, 2, 1.0f, A, 2, B, 2, 0.0f, C, 2);
  EXPECT_EQ(std::vector<float>(C, C + 4), (std::vector<float>{19, 22, 43, 50}));
  gemm_cpu(true, false, 2, 2, 2, 1.0f, A, 2, B, 2, 1.0f, C, 2);  // C += A^T B = [[26, 30], [38, 44]]
  EXPECT_EQ(std::vector<float>(C, C + 4), (std::vector<float>{45, 52, 81, 94}));
}

// The small path and gemm_cpu on the small path's shapes, each big enough to go parallel (kMinParallelWork
// in gemm_small_blocks.h is 2^18 multiply-adds) with partial blocks at the edges; beta = 1 as the weight
// gradient accumulates.
TEST(KernelsCpuDeterminism, SmallGemmDoesNotDependOnThreadCount) {
  if (!gemm_small_available()) GTEST_SKIP() << "no AVX2 + FMA on this CPU: the small path is never chosen";
  ThreadCountGuard guard;
  struct Shape {
    bool trans_a, trans_b;
    int64_t M, N, K;
  };
  const Shape shapes[] = {{false, true, 47, 1031, 193}, {false, false, 47, 193, 1030}, {true, false, 1031, 193, 47}};
  Generator gen(101);
  for (const Shape& s : shapes) {
    const std::vector<float> A = randn(s.M * s.K, gen), B = randn(s.K * s.N, gen), C0 = randn(s.M * s.N, gen);
    const int64_t lda = s.trans_a ? s.M : s.K, ldb = s.trans_b ? s.K : s.N;
    auto run = [&](auto gemm, int threads) {
      set_num_threads(threads);
      std::vector<float> C = C0;
      gemm(s.trans_a, s.trans_b, s.M, s.N, s.K, 1.0f, A.data(), lda, B.data(), ldb, 1.0f, C.data(), s.N);
      return C;
    };
    SCOPED_TRACE(::testing::Message() << "trans_a " << s.trans_a << " trans_b " << s.trans_b << " M " << s.M);
    if (gemm_small_avx512_available()) {
      EXPECT_TRUE(bitwise_equal(run(gemm_small_avx512_cpu, 1), run(gemm_small_avx512_cpu, 2))) << "AVX-512";
    }
    if (gemm_small_avx2_available()) {
      EXPECT_TRUE(bitwise_equal(run(gemm_small_avx2_cpu, 1), run(gemm_small_avx2_cpu, 2))) << "AVX2";
    }
    EXPECT_TRUE(bitwise_equal(run(gemm_cpu, 1), run(gemm_cpu, 2))) << "gemm_cpu";
  }
}

}  // namespace
}  // namespace bastion
