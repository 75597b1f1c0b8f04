// CUDA agreement table, GEMM family (kernels/cuda/gemm.h): every rung of the ladder against a double
// reference computed here on the CPU (the same reference tests/test_kernels_cpu_gemm.cpp holds gemm_cpu to),
// over the four transpose combinations, odd shapes that cross the 32- and 128-wide tiles, K = 1,
// padded, tight and misaligned operands (the float4 and scalar load paths of rungs 3 and 4), alpha != 1,
// beta = 0 on a NaN-filled C, beta != 0 accumulation, and the K = 0 / alpha = 0 / empty cases.
// The emulated build runs rungs 1-3; rung 4 (TF32 tensor cores) runs only on a real GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cuda/gemm.h"
#include "tensor/error.h"
#include "tests/cuda_test_support.h"
#include "tests/kernel_test_support.h"

namespace bastion {
namespace {

using testing::DeviceBuffer;
using testing::kSentinel;
using testing::random_floats;
using testing::sentinels;
using testing::sum_tolerance;

// TF32 keeps 10 of float32's 23 mantissa bits: each operand is rounded to a relative error of at most
// 2^-11 (round to nearest) or 2^-10 (truncation), so a product a * b is off by up to ~2 * 2^-10 of
// |a b|, and a sum of such products by that much of the sum of |terms|; the float32 accumulation adds
// the usual sum_tolerance(K). Taking the truncation bound keeps the test independent of the rounding
// mode the conversion uses.
constexpr double kTf32ProductError = 2.0 * 0x1.0p-10;

constexpr float kPadSentinel = -12345.0f;  // C outside the (M, N) matrix: must come back untouched

struct GemmShape {
  int64_t M, N, K;
};

// Odd sizes: 67x45x33 crosses 32-wide tiles and leaves partial float4 quads, 1x37x5 is a single row,
// 130x131x129 crosses the 128x128 block tile in M, N and K (17 slices of 8), K = 1 is one product.
const GemmShape kShapes[] = {{67, 45, 33}, {1, 37, 5}, {130, 131, 129}, {33, 17, 1}};

// How a case lays its matrices out in memory.
struct GemmLayout {
  bool round_to_4 = true;  // leading dimensions rounded up to a multiple of 4 (rows 16-byte aligned)
  int64_t pad = 4;         // then this many extra columns, holding NaN in A and B
  int64_t offset = 0;      // floats before each matrix in its buffer (1: not 16-byte aligned)
};
constexpr GemmLayout kPadded{};                  // float4 path, with padding to ignore
constexpr GemmLayout kTightLayout{false, 0, 0};  // ld = minimum: odd, so scalar loads
constexpr GemmLayout kMisaligned{true, 4, 1};    // aligned leading dimensions, misaligned pointers

struct GemmCall {
  int variant;  // 1..4, or 0 for gemm_cuda
  bool trans_a, trans_b;
  GemmShape shape;
  float alpha, beta;
  GemmLayout layout;
};

int64_t leading_dimension(int64_t min_cols, const GemmLayout& layout) {
  const int64_t ld = layout.round_to_4 ? (min_cols + 3) / 4 * 4 : min_cols;
  return std::max<int64_t>(ld + layout.pad, 1);
}

// A rows x cols matrix at `offset` in a buffer of leading dimension ld; everything else is `fill`.
std::vector<float> host_matrix(int64_t rows, int64_t cols, int64_t ld, int64_t offset, float fill, Generator& gen,
                               bool random) {
  std::vector<float> v(static_cast<size_t>(offset + std::max<int64_t>(rows * ld, 1)), fill);
  if (random)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) v[offset + i * ld + j] = static_cast<float>(2.0 * gen.uniform() - 1.0);
  return v;
}

float op_at(const std::vector<float>& X, int64_t offset, int64_t ld, bool trans, int64_t row, int64_t col) {
  return trans ? X[offset + col * ld + row] : X[offset + row * ld + col];
}

// Runs one call on the device and checks it: each element within relative_error * (sum of |terms|)
// of the double reference, and nothing outside C's (M, N) elements written.
void check_call(const GemmCall& c, double relative_error, Generator& gen) {
  const auto [M, N, K] = c.shape;
  SCOPED_TRACE(::testing::Message() << "rung " << c.variant << " trans_a " << c.trans_a << " trans_b " << c.trans_b
                                    << " M " << M << " N " << N << " K " << K << " alpha " << c.alpha << " beta "
                                    << c.beta << " offset " << c.layout.offset);
  const int64_t a_rows = c.trans_a ? K : M, a_cols = c.trans_a ? M : K;
  const int64_t b_rows = c.trans_b ? N : K, b_cols = c.trans_b ? K : N;
  const int64_t lda = leading_dimension(a_cols, c.layout), ldb = leading_dimension(b_cols, c.layout);
  const int64_t ldc = leading_dimension(N, c.layout), off = c.layout.offset;
  const std::vector<float> A = host_matrix(a_rows, a_cols, lda, off, kSentinel, gen, true);
  const std::vector<float> B = host_matrix(b_rows, b_cols, ldb, off, kSentinel, gen, true);
  std::vector<float> C0 = host_matrix(M, N, ldc, off, kPadSentinel, gen, c.beta != 0.0f);
  if (c.beta == 0.0f)  // beta = 0 assigns: C's old NaN must not leak into the result
    for (int64_t i = 0; i < M; ++i) std::fill_n(C0.begin() + off + i * ldc, N, kSentinel);

  std::vector<double> want(M * N), magnitude(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double total = 0.0, mag = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = op_at(A, off, lda, c.trans_a, i, k), b = op_at(B, off, ldb, c.trans_b, k, j);
        const double term = a * b;
        total += term;
        mag += std::abs(term);
      }
      const double old = c.beta == 0.0f ? 0.0 : C0[off + i * ldc + j];
      want[i * N + j] = c.alpha * total + c.beta * old;
      magnitude[i * N + j] = std::abs(c.alpha) * mag + std::abs(c.beta * old);
    }

  const DeviceBuffer<float> dA(A), dB(B), dC(C0);
  if (c.variant == 0)
    gemm_cuda(c.trans_a, c.trans_b, M, N, K, c.alpha, dA.get() + off, lda, dB.get() + off, ldb, c.beta, dC.get() + off,
              ldc, cuda_stream());
  else
    gemm_cuda_variant(c.variant, c.trans_a, c.trans_b, M, N, K, c.alpha, dA.get() + off, lda, dB.get() + off, ldb,
                      c.beta, dC.get() + off, ldc, cuda_stream());
  const std::vector<float> C = dC.download();

  int failures = 0, outside_written = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      const float got = C[off + i * ldc + j];
      const double bound = relative_error * magnitude[i * N + j] + 1e-30;
      if (!(std::abs(got - want[i * N + j]) <= bound) && failures++ < 5)  // also catches NaN
        ADD_FAILURE() << "C[" << i << "][" << j << "] = " << got << ", want " << want[i * N + j] << " +- " << bound;
    }
  for (size_t e = 0; e < C.size(); ++e) {
    const int64_t i = (static_cast<int64_t>(e) - off) / ldc, j = (static_cast<int64_t>(e) - off) % ldc;
    const bool inside = static_cast<int64_t>(e) >= off && i < M && j < N;
    if (!inside) outside_written += C[e] != C0[e];
  }
  EXPECT_EQ(failures, 0) << failures << " of " << M * N << " elements disagree";
  EXPECT_EQ(outside_written, 0) << "elements written outside C's (M, N) part";
}

// Every transpose combination on every shape, alpha = 0.5 and beta = 0 on a NaN-filled C.
void check_rung_on_shapes(int variant, double extra_error, const GemmLayout& layout) {
  Generator gen(100 + variant);
  for (const GemmShape& shape : kShapes)
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true})
        check_call({variant, trans_a, trans_b, shape, 0.5f, 0.0f, layout}, extra_error + sum_tolerance(shape.K), gen);
}

// beta = 1 (accumulate) and beta = -2 with alpha = -1.5, all transposes, one shape.
void check_rung_with_beta(int variant, double extra_error) {
  Generator gen(200 + variant);
  const GemmShape shape{67, 45, 33};
  for (const bool trans_a : {false, true})
    for (const bool trans_b : {false, true}) {
      check_call({variant, trans_a, trans_b, shape, 1.0f, 1.0f, kPadded}, extra_error + sum_tolerance(shape.K), gen);
      check_call({variant, trans_a, trans_b, shape, -1.5f, -2.0f, kPadded}, extra_error + sum_tolerance(shape.K), gen);
    }
}

TEST(CudaAgreement, GemmRung1NaiveAgreesWithDoubleReference) {
  BASTION_REQUIRE_CUDA();
  check_rung_on_shapes(1, 0.0, kPadded);
  check_rung_with_beta(1, 0.0);
}

TEST(CudaAgreement, GemmRung2SmemTiledAgreesWithDoubleReference) {
  BASTION_REQUIRE_CUDA();
  check_rung_on_shapes(2, 0.0, kPadded);
  check_rung_with_beta(2, 0.0);
}

TEST(CudaAgreement, GemmRung3Register2dAgreesWithDoubleReference) {
  BASTION_REQUIRE_CUDA();
  check_rung_on_shapes(3, 0.0, kPadded);
  check_rung_with_beta(3, 0.0);
}

// Rungs 3 and 4 choose float4 loads only for 16-byte-aligned pointers and leading dimensions that are
// multiples of 4; odd leading dimensions and pointers one float off must take the scalar path.
TEST(CudaAgreement, GemmTightAndMisalignedOperandsUseScalarLoads) {
  BASTION_REQUIRE_CUDA();
  Generator gen(300);
  for (const GemmShape& shape : {GemmShape{67, 45, 33}, GemmShape{130, 131, 129}})
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true})
        for (const GemmLayout& layout : {kTightLayout, kMisaligned})
          check_call({3, trans_a, trans_b, shape, 0.5f, 0.0f, layout}, sum_tolerance(shape.K), gen);
}

TEST(CudaAgreement, GemmRung4Tf32AgreesWithinTf32Rounding) {
  BASTION_REQUIRE_CUDA();
  if (cuda_emulated()) GTEST_SKIP() << "rung 4 uses tensor cores, which the emulator does not have";
  check_rung_on_shapes(4, kTf32ProductError, kPadded);
  check_rung_on_shapes(4, kTf32ProductError, kTightLayout);
  check_rung_on_shapes(4, kTf32ProductError, kMisaligned);
  check_rung_with_beta(4, kTf32ProductError);
}

// Split K (gemm_cuda_split_k): C of one tile over a deep K is cut into slices whose partial products are
// added afterwards; every transpose, the float4 and scalar load paths, alpha and beta != 0.
TEST(CudaAgreement, GemmSplitKAgreesWithDoubleReference) {
  BASTION_REQUIRE_CUDA();
  const GemmShape shape{70, 50, 2100};
  const GemmSplitK split = gemm_cuda_split_k(shape.M, shape.N, shape.K);
  ASSERT_EQ(split.slices, 4);  // K / 512, the last slice shorter (2100 = 3 x 528 + 516)
  ASSERT_EQ(split.k_chunk, 528);
  Generator gen(400);
  for (const int variant : {3, 4}) {
    if (variant == 4 && cuda_emulated()) continue;  // no tensor cores in the emulator
    const double extra_error = variant == 4 ? kTf32ProductError : 0.0;
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true})
        for (const GemmLayout& layout : {kPadded, kTightLayout, kMisaligned})
          check_call({variant, trans_a, trans_b, shape, -1.5f, 0.5f, layout}, extra_error + sum_tolerance(shape.K),
                     gen);
  }
}

// The slices are added in a fixed order, so a split product is the same bits on every run.
TEST(CudaAgreement, GemmSplitKIsBitwiseRepeatable) {
  BASTION_REQUIRE_CUDA();
  const int64_t M = 40, N = 36, K = 3000;
  ASSERT_GT(gemm_cuda_split_k(M, N, K).slices, 1);
  Generator gen(401);
  const DeviceBuffer<float> A(host_matrix(M, K, K, 0, 0.0f, gen, true)), B(host_matrix(K, N, N, 0, 0.0f, gen, true));
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 3; ++run) {
    const DeviceBuffer<float> C(static_cast<size_t>(M * N));
    gemm_cuda(false, false, M, N, K, 1.0f, A.get(), K, B.get(), N, 0.0f, C.get(), N, cuda_stream());
    runs.push_back(C.download());
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
}

TEST(CudaAgreement, GemmSplitKPolicy) {
  BASTION_REQUIRE_CUDA();
  EXPECT_EQ(gemm_cuda_split_k(4096, 4096, 4096).slices, 1);  // 1024 tiles fill the GPU
  EXPECT_EQ(gemm_cuda_split_k(64, 576, 1000).slices, 1);     // too shallow for two 512-deep slices
  EXPECT_EQ(gemm_cuda_split_k(0, 576, 100000).slices, 1);    // empty C
  // ResNet18's first-stage weight gradient at batch 128: 64 x 576 is 5 tiles, K = 128 x 32 x 32.
  const GemmSplitK wgrad = gemm_cuda_split_k(64, 576, 131072);
  EXPECT_EQ(wgrad.slices, 52);  // 264 blocks / 5 tiles
  for (const GemmSplitK s : {wgrad, gemm_cuda_split_k(1, 1, 1 << 30), gemm_cuda_split_k(130, 1000, 99999)}) {
    EXPECT_EQ(s.k_chunk % 16, 0);
    EXPECT_LE(s.slices, 64);
  }
  EXPECT_EQ(gemm_cuda_split_k(1, 1, 1 << 30).slices, 64);
}

// K = 0 is C = beta * C (0 when beta = 0, whatever C held); alpha = 0 reads neither A nor B (here all
// NaN); M = 0 or N = 0 writes nothing. Every rung, since each goes through the same dispatch.
TEST(CudaAgreement, GemmZeroKZeroAlphaAndEmptyShapes) {
  BASTION_REQUIRE_CUDA();
  const std::vector<float> nan_operand = sentinels(64);
  const DeviceBuffer<float> dA(nan_operand), dB(nan_operand);
  for (int variant = 1; variant <= gemm_cuda_variant_count(); ++variant) {
    SCOPED_TRACE(::testing::Message() << "rung " << variant);
    DeviceBuffer<float> nan_c(sentinels(15));
    gemm_cuda_variant(variant, false, false, 3, 5, 0, 1.0f, dA.get(), 1, dB.get(), 5, 0.0f, nan_c.get(), 5,
                      cuda_stream());
    for (float x : nan_c.download()) EXPECT_EQ(x, 0.0f) << "K = 0, beta = 0 must assign 0";

    const std::vector<float> ones(15, 1.0f);
    DeviceBuffer<float> c(ones);
    gemm_cuda_variant(variant, true, false, 3, 5, 0, 1.0f, dA.get(), 3, dB.get(), 5, 2.0f, c.get(), 5, cuda_stream());
    for (float x : c.download()) EXPECT_EQ(x, 2.0f) << "K = 0 scales C by beta";

    c.upload(ones);
    gemm_cuda_variant(variant, false, true, 3, 5, 4, 0.0f, dA.get(), 4, dB.get(), 4, -3.0f, c.get(), 5, cuda_stream());
    for (float x : c.download()) EXPECT_EQ(x, -3.0f) << "alpha = 0 must not read A or B";

    c.upload(ones);
    gemm_cuda_variant(variant, false, false, 0, 5, 4, 1.0f, dA.get(), 4, dB.get(), 5, 0.0f, c.get(), 5, cuda_stream());
    gemm_cuda_variant(variant, false, false, 3, 0, 4, 1.0f, dA.get(), 4, dB.get(), 1, 0.0f, c.get(), 1, cuda_stream());
    for (float x : c.download()) EXPECT_EQ(x, 1.0f) << "M = 0 or N = 0 writes nothing";
  }
}

// Restores FP32 however the test ends, so the other tests see the default.
struct PrecisionGuard {
  ~PrecisionGuard() { gemm_cuda_set_precision(GemmPrecision::FP32); }
};

TEST(CudaAgreement, GemmCudaIsFp32ByDefaultAndSwitchesToTf32) {
  BASTION_REQUIRE_CUDA();
  PrecisionGuard guard;
  EXPECT_EQ(gemm_cuda_precision(), GemmPrecision::FP32);
  Generator gen(400);
  const GemmShape shape{130, 131, 129};
  check_call({0, false, true, shape, 1.0f, 0.0f, kPadded}, sum_tolerance(shape.K), gen);

  // gemm_cuda's FP32 path is rung 3, bit for bit.
  const int64_t M = shape.M, N = shape.N, K = shape.K;
  const DeviceBuffer<float> dA(random_floats(M * K, gen)), dB(random_floats(K * N, gen));
  DeviceBuffer<float> c_default(sentinels(M * N)), c_rung3(sentinels(M * N)), c_tf32(sentinels(M * N));
  gemm_cuda(false, false, M, N, K, 1.0f, dA.get(), K, dB.get(), N, 0.0f, c_default.get(), N, cuda_stream());
  gemm_cuda_variant(3, false, false, M, N, K, 1.0f, dA.get(), K, dB.get(), N, 0.0f, c_rung3.get(), N, cuda_stream());
  EXPECT_EQ(c_default.download(), c_rung3.download());

  gemm_cuda_set_precision(GemmPrecision::TF32);
  EXPECT_EQ(gemm_cuda_precision(), GemmPrecision::TF32);
  check_call({0, true, false, shape, 1.0f, 0.0f, kPadded}, kTf32ProductError + sum_tolerance(shape.K), gen);
  gemm_cuda(false, false, M, N, K, 1.0f, dA.get(), K, dB.get(), N, 0.0f, c_tf32.get(), N, cuda_stream());
  if (cuda_emulated()) {  // no tensor cores: TF32 runs the FP32 kernel
    EXPECT_EQ(c_tf32.download(), c_rung3.download());
  }

  gemm_cuda_set_precision(GemmPrecision::FP32);
  EXPECT_EQ(gemm_cuda_precision(), GemmPrecision::FP32);
}

TEST(CudaAgreement, GemmVariantNamesAndArgumentChecks) {
  BASTION_REQUIRE_CUDA();
  ASSERT_EQ(gemm_cuda_variant_count(), 4);
  EXPECT_STREQ(gemm_cuda_variant_name(1), "naive");
  EXPECT_STREQ(gemm_cuda_variant_name(3), "register-2d");
  EXPECT_TRUE(gemm_cuda_variant_emulated(3));
  EXPECT_FALSE(gemm_cuda_variant_emulated(4));
  EXPECT_THROW(gemm_cuda_variant_name(5), Error);
  // Preconditions fail before any launch, so null pointers are fine here.
  EXPECT_THROW(gemm_cuda(false, false, 4, 4, 4, 1.0f, nullptr, 3, nullptr, 4, 0.0f, nullptr, 4, cuda_stream()), Error);
  EXPECT_THROW(gemm_cuda(true, false, 4, 4, 4, 1.0f, nullptr, 4, nullptr, 4, 0.0f, nullptr, 3, cuda_stream()), Error);
  EXPECT_THROW(gemm_cuda(false, false, -1, 4, 4, 1.0f, nullptr, 4, nullptr, 4, 0.0f, nullptr, 4, cuda_stream()), Error);
  EXPECT_THROW(
      gemm_cuda_variant(0, false, false, 1, 1, 1, 1.0f, nullptr, 1, nullptr, 1, 0.0f, nullptr, 1, cuda_stream()),
      Error);
}

}  // namespace
}  // namespace bastion
