// kernels/cpu/sam.h: the fused SAM passes give bit for bit what the unfused passes gave (each product
// rounded before the sum), on random inputs of an odd length, with d and e the same array, distinct, or e
// not kept; and kernels/cpu/optim.h's sgd_step_from_cpu gives what a copy and sgd_step_cpu give.
// The references round through a volatile, so this file's own compilation cannot fuse them either.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/optim.h"
#include "kernels/cpu/sam.h"
#include "kernels/cpu/vector.h"
#include "tests/kernel_test_support.h"

namespace bastion {
namespace {

using testing::bitwise_equal;
using testing::randn;

constexpr int64_t kLength = 1031;  // odd: the vector loops' remainder runs too

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

  std::vector<float> w_no_e = w0, saved_no_e(kLength, testing::kNaN);  // e not kept: same w and saved
  sam_perturb_cpu(w_no_e.data(), saved_no_e.data(), nullptr, d.data(), scale, kLength);
  EXPECT_TRUE(bitwise_equal(w_no_e, want_w));
  EXPECT_TRUE(bitwise_equal(saved_no_e, w0));
}

// Writing w + e elsewhere gives the very values of perturbing in place, and leaves w alone.
TEST(SamKernels, PerturbIntoAnotherBufferIsThePerturbationInPlace) {
  Generator gen(9);
  const std::vector<float> w0 = randn(kLength, gen), d = randn(kLength, gen, 1e-3);
  std::vector<float> in_place = w0, saved(kLength), e_in_place(kLength);
  sam_perturb_cpu(in_place.data(), saved.data(), e_in_place.data(), d.data(), 0.37f, kLength);
  for (const bool keep_e : {true, false}) {
    std::vector<float> w = w0, out(kLength, testing::kNaN), e(kLength, testing::kNaN);
    sam_perturb_into_cpu(out.data(), w.data(), keep_e ? e.data() : nullptr, d.data(), 0.37f, kLength);
    EXPECT_TRUE(bitwise_equal(out, in_place));
    EXPECT_TRUE(bitwise_equal(w, w0));
    if (keep_e) {
      EXPECT_TRUE(bitwise_equal(e, e_in_place));
    }
  }
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

// The direction written with its norm summed in the same pass: the same g as sam_direction_cpu and the
// lanes of vector_squared_norm_cpu over it, over more than one chunk and from an offset.
TEST(SamKernels, DirectionWithNormIsTheDirectionThenTheNormPass) {
  Generator gen(13);
  const int64_t D = 2 * kSamChunk + kLength, first = 37;
  const std::vector<float> g0 = randn(D, gen), linear = randn(D, gen, 0.1);
  std::vector<float> want = g0;
  sam_direction_cpu(want.data(), linear.data(), 0.1f, D);
  std::vector<float> head(first, 0.5f), whole = head;  // a run of 37 before: the lanes start mid-way
  whole.insert(whole.end(), want.begin(), want.end());
  std::vector<float> g = g0;
  double lanes[kNormLanes] = {};
  vector_squared_norm_lanes_cpu(lanes, nullptr, head.data(), first, 0);
  sam_direction_norm_cpu(g.data(), linear.data(), 0.1f, D, lanes, first);
  EXPECT_TRUE(bitwise_equal(g, want));
  EXPECT_EQ(vector_reduce_norm_lanes(lanes), vector_squared_norm_cpu(whole.data(), first + D));
}

// Every case of the SGD step (plain, momentum on the first and a later step, Nesterov; weight decay on):
// stepping from saved weights equals copying them into w and stepping in place, bit for bit, and the
// saved weights are not written.
TEST(SamKernels, SgdStepFromSavedWeightsIsTheCopyThenTheStep) {
  Generator gen(13);
  const std::vector<float> saved = randn(kLength, gen), grad = randn(kLength, gen), v0 = randn(kLength, gen);
  const std::vector<float> perturbed = randn(kLength, gen);  // what w holds before the step (w + e)
  const SgdStepOptions cases[] = {{.lr = 0.1f, .weight_decay = 1e-3f},
                                  {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-3f, .first_step = true},
                                  {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-3f},
                                  {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-3f, .nesterov = true}};
  for (const SgdStepOptions& options : cases) {
    std::vector<float> want_w = saved, want_v = v0;
    sgd_step_cpu(want_w.data(), want_v.data(), grad.data(), kLength, options);
    std::vector<float> w = perturbed, v = v0;
    std::vector<float> start = saved;
    sgd_step_from_cpu(w.data(), start.data(), v.data(), grad.data(), kLength, options);
    EXPECT_TRUE(bitwise_equal(w, want_w)) << "momentum " << options.momentum << " nesterov " << options.nesterov;
    EXPECT_TRUE(bitwise_equal(v, want_v));
    EXPECT_TRUE(bitwise_equal(start, saved));
  }
}

// The perturbation that zeroes d as it reads it: the out of sam_perturb_into_cpu, and d all zeros.
TEST(SamKernels, PerturbIntoThatZeroesTheDirectionWritesTheSamePerturbation) {
  Generator gen(15);
  const std::vector<float> w = randn(kLength, gen), d0 = randn(kLength, gen, 1e-3);
  std::vector<float> want(kLength);
  sam_perturb_into_cpu(want.data(), w.data(), nullptr, d0.data(), 0.37f, kLength);
  std::vector<float> out(kLength, testing::kNaN), d = d0;
  sam_perturb_into_zeroing_cpu(out.data(), w.data(), d.data(), 0.37f, kLength);
  EXPECT_TRUE(bitwise_equal(out, want));
  EXPECT_TRUE(bitwise_equal(d, std::vector<float>(kLength, 0.0f)));
}

}  // namespace
}  // namespace bastion
