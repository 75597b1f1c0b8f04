// CUDA agreement table, ReLU and dropout (kernels/cuda/activation.h) against their CPU twins
// (kernels/cpu/activation.h). Each output element is one comparison or one product of the same floats
// on both sides, so the agreement is exact (tolerance 0; a NaN sentinel left unwritten fails too).
// The sizes are odd and larger than the emulated grid's 4 blocks x 256 threads x 4 floats, so the
// grid-stride loop wraps and the n % 4 tail runs; a view starting one float into its buffer takes the
// scalar (misaligned) path. Skipped without a device; the emulated build runs it on CPU threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cuda/activation.h"
#include "tests/cuda_test_support.h"

namespace bastion {
namespace {

using testing::DeviceBuffer;
using testing::expect_agree;
using testing::OffsetBuffer;
using testing::random_floats;
using testing::sentinels;

// See the top of the file.
constexpr double kExact = 0.0;
constexpr int64_t kSize = 10007;  // odd, n % 4 = 3, and more than one emulated grid stride (4096 floats)
constexpr float kDropP = 0.3f;

// Magnitudes in [0.1, 1] with random signs: no input sits at ReLU's kink.
std::vector<float> away_from_zero(int64_t n, uint64_t seed) {
  Generator gen(seed);
  std::vector<float> v = random_floats(n, gen, 0.1f, 1.0f);
  for (float& x : v)
    if (gen.uniform() < 0.5) x = -x;
  return v;
}

// Runs relu forward and backward with every array at `offset` floats into its buffer.
void expect_relu_agrees(int64_t offset) {
  const std::vector<float> in = away_from_zero(kSize, 1);
  Generator gen(2);
  const std::vector<float> grad_out = random_floats(kSize, gen);
  std::vector<float> out = sentinels(kSize), grad_in = sentinels(kSize);
  relu_forward_cpu(out.data(), in.data(), kSize);
  relu_backward_cpu(grad_in.data(), grad_out.data(), out.data(), kSize);

  OffsetBuffer d_in(in, offset), d_out(sentinels(kSize), offset), d_grad_out(grad_out, offset),
      d_grad_in(sentinels(kSize), offset);
  relu_forward_cuda(d_out.view(), d_in.view(), kSize, cuda_stream());
  relu_backward_cuda(d_grad_in.view(), d_grad_out.view(), d_out.view(), kSize, cuda_stream());
  expect_agree(d_out.download_view(), out, kExact, "relu out");
  expect_agree(d_grad_in.download_view(), grad_in, kExact, "relu grad_in");
}

// dropout_mask from the same uniform draws, then dropout_backward, every array at `offset`.
void expect_dropout_agrees(float p, int64_t offset) {
  Generator gen(3);
  const std::vector<float> uniform01 = random_floats(kSize, gen, 0.0f, 1.0f);
  const std::vector<float> grad_out = random_floats(kSize, gen);
  std::vector<float> mask = sentinels(kSize), grad_in = sentinels(kSize);
  dropout_mask_cpu(mask.data(), uniform01.data(), p, kSize);
  dropout_backward_cpu(grad_in.data(), grad_out.data(), mask.data(), kSize);

  OffsetBuffer d_uniform(uniform01, offset), d_mask(sentinels(kSize), offset), d_grad_out(grad_out, offset),
      d_grad_in(sentinels(kSize), offset);
  dropout_mask_cuda(d_mask.view(), d_uniform.view(), p, kSize, cuda_stream());
  dropout_backward_cuda(d_grad_in.view(), d_grad_out.view(), d_mask.view(), kSize, cuda_stream());
  expect_agree(d_mask.download_view(), mask, kExact, "dropout mask");
  expect_agree(d_grad_in.download_view(), grad_in, kExact, "dropout grad_in");
}

TEST(CudaAgreement, ReluAligned) {
  BASTION_REQUIRE_CUDA();
  expect_relu_agrees(0);
}

TEST(CudaAgreement, ReluMisaligned) {
  BASTION_REQUIRE_CUDA();
  expect_relu_agrees(1);
}

TEST(CudaAgreement, DropoutAligned) {
  BASTION_REQUIRE_CUDA();
  expect_dropout_agrees(kDropP, 0);
}

TEST(CudaAgreement, DropoutMisaligned) {
  BASTION_REQUIRE_CUDA();
  expect_dropout_agrees(kDropP, 1);
}

TEST(CudaAgreement, DropoutEdgeProbabilities) {
  BASTION_REQUIRE_CUDA();
  expect_dropout_agrees(0.0f, 0);  // keeps everything, mask 1
  expect_dropout_agrees(1.0f, 0);  // drops everything, mask 0 (no division by 1 - p)
}

TEST(CudaAgreement, ReluShortTail) {
  BASTION_REQUIRE_CUDA();
  // n = 3: no full float4, only the tail; the vector path still must write all three.
  const std::vector<float> in = {-0.5f, 0.25f, 2.0f};
  DeviceBuffer<float> d_in(in), d_out(sentinels(3));
  relu_forward_cuda(d_out.get(), d_in.get(), 3, cuda_stream());
  EXPECT_EQ(d_out.download(), (std::vector<float>{0.0f, 0.25f, 2.0f}));
}

}  // namespace
}  // namespace bastion
