// CUDA agreement table, elementwise family (kernels/cuda/elementwise.h against kernels/cpu/elementwise.h):
// every op on odd sizes, the float4 path (aligned buffers) and the scalar path (pointers one float past
// a 16-byte boundary), outputs pre-filled with NaN sentinels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/elementwise.h"
#include "tests/cuda_test_support.h"
#include "tests/kernel_test_support.h"

namespace bastion {
namespace {

using testing::DeviceBuffer;
using testing::expect_agree;
using testing::OffsetBuffer;
using testing::random_floats;
using testing::sentinels;

// add, sub, mul, scale, row bias and scale-by-device-scalar are one correctly rounded float operation
// per element on both sides (nothing for nvcc to contract into an FMA): the results must be bitwise equal.
constexpr double kElementwiseExact = 0.0;

// 1 and 7 are all tail (fewer than one float4, or one float4 and three scalars); 1001 = 250 float4 + 1.
const std::vector<int64_t> kSizes = {1, 7, 1001};

using BinaryCuda = void (*)(float*, const float*, const float*, int64_t, CudaStream);
using BinaryCpu = void (*)(float*, const float*, const float*, int64_t);
struct BinaryOp {
  const char* name;
  BinaryCuda cuda;
  BinaryCpu cpu;
};
const std::vector<BinaryOp> kBinaryOps = {
    {"add", add_cuda, add_cpu}, {"sub", sub_cuda, sub_cpu}, {"mul", mul_cuda, mul_cpu}};

TEST(CudaAgreement, ElementwiseBinaryOpsMatchCpu) {
  BASTION_REQUIRE_CUDA();
  Generator gen(11);
  for (int64_t n : kSizes) {
    const std::vector<float> a = random_floats(n, gen), b = random_floats(n, gen);
    DeviceBuffer<float> a_dev(a), b_dev(b);
    for (const BinaryOp& op : kBinaryOps) {
      SCOPED_TRACE(std::string(op.name) + " n=" + std::to_string(n));
      DeviceBuffer<float> out(sentinels(n));
      op.cuda(out.get(), a_dev.get(), b_dev.get(), n, cuda_stream());
      std::vector<float> want(n);
      op.cpu(want.data(), a.data(), b.data(), n);
      expect_agree(out.download(), want, kElementwiseExact, op.name);
    }
  }
}

TEST(CudaAgreement, ElementwiseScaleAndAddInplaceMatchCpu) {
  BASTION_REQUIRE_CUDA();
  Generator gen(12);
  constexpr float kAlpha = -0.37f;
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<float> in = random_floats(n, gen), other = random_floats(n, gen);
    DeviceBuffer<float> in_dev(in), other_dev(other), out(sentinels(n));
    scale_cuda(out.get(), in_dev.get(), kAlpha, n, cuda_stream());
    std::vector<float> want(n);
    scale_cpu(want.data(), in.data(), kAlpha, n);
    expect_agree(out.download(), want, kElementwiseExact, "scale");

    add_inplace_cuda(in_dev.get(), other_dev.get(), n, cuda_stream());
    want = in;
    add_inplace_cpu(want.data(), other.data(), n);
    expect_agree(in_dev.download(), want, kElementwiseExact, "add_inplace");
  }
}

TEST(CudaAgreement, ElementwiseMisalignedPointersTakeTheScalarPath) {
  BASTION_REQUIRE_CUDA();
  Generator gen(13);
  constexpr int64_t n = 1001;
  const std::vector<float> a = random_floats(n, gen), b = random_floats(n, gen);
  OffsetBuffer a_dev(a, 1), b_dev(b, 1);  // one float in: 4-byte but not 16-byte aligned
  std::vector<float> want(n);
  for (const BinaryOp& op : kBinaryOps) {
    OffsetBuffer out(sentinels(n), 1);
    op.cuda(out.view(), a_dev.view(), b_dev.view(), n, cuda_stream());
    op.cpu(want.data(), a.data(), b.data(), n);
    expect_agree(out.download_view(), want, kElementwiseExact, op.name);
  }
  // One misaligned pointer among aligned ones is enough to leave the float4 path.
  DeviceBuffer<float> aligned_out(sentinels(n));
  scale_cuda(aligned_out.get(), a_dev.view(), 3.0f, n, cuda_stream());
  scale_cpu(want.data(), a.data(), 3.0f, n);
  expect_agree(aligned_out.download(), want, kElementwiseExact, "scale (input misaligned)");

  add_inplace_cuda(a_dev.view(), b_dev.view(), n, cuda_stream());
  std::vector<float> a_plus_b = a;
  add_inplace_cpu(a_plus_b.data(), b.data(), n);
  expect_agree(a_dev.download_view(), a_plus_b, kElementwiseExact, "add_inplace (misaligned)");
}

// sum_cuda adds in double in another order than sum_cpu, then rounds to float: the two differ by the
// float rounding of the result (kFloatRounding relative) plus the double reordering error, at most
// 2 (n + 1) kDoubleRounding sum|x| (Higham §3.1, for each of the two orders).
constexpr double kFloatRounding = 0x1.0p-24;   // unit roundoff of float32
constexpr double kDoubleRounding = 0x1.0p-53;  // unit roundoff of float64
double sum_bound(const std::vector<float>& x, double cpu) {
  double magnitude = 0.0;
  for (float v : x) magnitude += std::abs(v);
  return kFloatRounding * std::abs(cpu) + 2.0 * (static_cast<double>(x.size()) + 1.0) * kDoubleRounding * magnitude;
}

TEST(CudaAgreement, ElementwiseSumMatchesSumCpu) {
  BASTION_REQUIRE_CUDA();
  Generator gen(14);
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1001}, int64_t{100003}}) {
    const std::vector<float> x = random_floats(n, gen);
    DeviceBuffer<float> x_dev(x), out(sentinels(1));
    sum_cuda(out.get(), x_dev.get(), n, cuda_stream());
    const double want = sum_cpu(x.data(), n);
    EXPECT_NEAR(out.download()[0], want, sum_bound(x, want)) << "n = " << n;
  }
  DeviceBuffer<float> empty_out(sentinels(1));
  sum_cuda(empty_out.get(), nullptr, 0, cuda_stream());
  EXPECT_EQ(empty_out.download()[0], 0.0f) << "the empty sum is written as 0";
}

const std::vector<std::pair<int64_t, int64_t>> kShapes = {{1, 1}, {3, 7}, {17, 33}, {5, 1001}};

TEST(CudaAgreement, ElementwiseAddRowBiasMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  Generator gen(15);
  for (auto [rows, cols] : kShapes) {
    const std::vector<float> y = random_floats(rows * cols, gen), bias = random_floats(cols, gen);
    DeviceBuffer<float> out(y), bias_dev(bias);
    add_row_bias_cuda(out.get(), bias_dev.get(), rows, cols, cuda_stream());
    std::vector<float> want = y;
    add_row_bias_cpu(want.data(), bias.data(), rows, cols);
    expect_agree(out.download(), want, kElementwiseExact, "add_row_bias");
  }
}

// sum_rows_cpu adds the rows in float, sum_rows_cuda in double: they differ by the CPU's float rounding,
// bounded by sum_tolerance(rows) * sum_r |grad[r, c]| (tests/kernel_test_support.h).
TEST(CudaAgreement, ElementwiseSumRowsMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  Generator gen(16);
  for (auto [rows, cols] : kShapes) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    const std::vector<float> grad = random_floats(rows * cols, gen);
    DeviceBuffer<float> grad_dev(grad), out(sentinels(cols));
    sum_rows_cuda(out.get(), grad_dev.get(), rows, cols, cuda_stream());
    std::vector<float> cpu(cols);
    sum_rows_cpu(cpu.data(), grad.data(), rows, cols);
    std::vector<double> want(cpu.begin(), cpu.end()), magnitude(cols, 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) magnitude[c] += std::abs(grad[r * cols + c]);
    testing::expect_close(out.download(), want, magnitude, rows, "sum_rows");
  }
}

TEST(CudaAgreement, ElementwiseScaleByDeviceScalarMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  Generator gen(17);
  constexpr float kAlpha = -1.75f, kFactor = 1.0f / 7.0f;
  DeviceBuffer<float> alpha(std::vector<float>{kAlpha});
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<float> in = random_floats(n, gen);
    std::vector<float> want(n);
    scale_cpu(want.data(), in.data(), kFactor * kAlpha, n);  // the kernel also forms factor * alpha first

    DeviceBuffer<float> in_dev(in), out(sentinels(n));
    scale_by_device_scalar_cuda(out.get(), in_dev.get(), alpha.get(), kFactor, n, cuda_stream());
    expect_agree(out.download(), want, kElementwiseExact, "scale_by_device_scalar");

    OffsetBuffer in_offset(in, 1), out_offset(sentinels(n), 1);
    scale_by_device_scalar_cuda(out_offset.view(), in_offset.view(), alpha.get(), kFactor, n, cuda_stream());
    expect_agree(out_offset.download_view(), want, kElementwiseExact, "scale_by_device_scalar (misaligned)");
  }
}

}  // namespace
}  // namespace bastion
