// kernels/cpu/sam.h: the fused SAM passes give bit for bit what the unfused passes gave (each product
// rounded before the sum), on random inputs of an odd length, with d and e the same array or not.
// The references round through a volatile, so this file's own compilation cannot fuse them either.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/sam.h"
#include "tests/kernel_test_support.h"

namespace bastion {
namespace {

using testing::randn;

constexpr int64_t kLength = 1031;  // odd: the vector loops' remainder runs too

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(SamKernels, PerturbRoundsTheStepBeforeAddingItAsTwoPassesDo) {
  Generator gen(7);
  const std::vector<float> w0 = randn(kLength, gen), d = randn(kLength, gen, 1e-3);
  const float scale = 0.37f;
  std::vector<float> want_w(kLength), want_e(kLength);
  for (int64_t i = 0; i < kLength; ++i) {
    volatile float e = scale * d[i];  // the scaling pass stored e
    want_e[i] = e;
    want_w[i] = w0[i] + e;  // the adding pass
  }
  std::vector<float> w = w0, saved(kLength, testing::kNaN), e(kLength, testing::kNaN);
  sam_perturb_cpu(w.data(), saved.data(), e.data(), d.data(), scale, kLength);
  EXPECT_TRUE(bitwise_equal(w, want_w));
  EXPECT_TRUE(bitwise_equal(e, want_e));
  EXPECT_TRUE(bitwise_equal(saved, w0));

  std::vector<float> w_alias = w0, saved_alias(kLength), e_is_d = d;  // FedSMOO: d computed into e
  sam_perturb_cpu(w_alias.data(), saved_alias.data(), e_is_d.data(), e_is_d.data(), scale, kLength);
  EXPECT_TRUE(bitwise_equal(w_alias, want_w));
  EXPECT_TRUE(bitwise_equal(e_is_d, want_e));
}

TEST(SamKernels, DirectionScalesThenAddsTheLinearTerm) {
  Generator gen(11);
  const std::vector<float> g0 = randn(kLength, gen), linear = randn(kLength, gen, 0.1);
  const float alpha = 0.1f;
  std::vector<float> want_scaled(kLength), want_sum(kLength);
  for (int64_t i = 0; i < kLength; ++i) {
    volatile float scaled = alpha * g0[i];
    want_scaled[i] = scaled;
    want_sum[i] = scaled + linear[i];
  }
  std::vector<float> g = g0;
  sam_direction_cpu(g.data(), linear.data(), alpha, kLength);
  EXPECT_TRUE(bitwise_equal(g, want_sum));
  g = g0;
  sam_direction_cpu(g.data(), nullptr, alpha, kLength);
  EXPECT_TRUE(bitwise_equal(g, want_scaled));
}

}  // namespace
}  // namespace bastion
