// CUDA agreement table, optimiser family (sgd_step_cuda against sgd_step_cpu, kernels/cpu/optim.h):
// plain SGD, weight decay, momentum (the first step that initialises the velocity and the steps after
// it), Nesterov, on odd sizes and on misaligned pointers, several steps in a row from the same states
// and gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/optim.h"
#include "kernels/cuda/optim.h"
#include "tests/cuda_test_support.h"

namespace bastion {
namespace {

using testing::DeviceBuffer;
using testing::expect_agree;
using testing::random_floats;

constexpr int kSteps = 5;
// Each step takes every parameter through up to four multiply-adds (grad + wd*w, mu*v + g, g + mu*v,
// w - lr*g). nvcc contracts them into FMAs; g++ may or may not (it depends on -march and -ffp-contract).
// A contracted and an uncontracted multiply-add differ by at most the rounding of the product plus the
// final rounding, about 2u (u = 2^-24) relative to the values involved (|w| <= 1, |g| <= 1.1, |v| at
// most 1/(1 - mu) = 10, much less for random gradients). Those differences carry over to later steps
// without growth (w moves by lr*g with lr < 1, v is damped by mu < 1), so after kSteps steps the two
// agree within about 4 * 2u * kSteps = 40u relative to max(|value|, 1): checked at 64u = 3.8e-6. A wrong
// operation (e.g. weight decay skipped: lr * wd * w = 1e-3 here) is hundreds of times larger.
constexpr double kFloatRounding = 0x1.0p-24;  // u, the unit roundoff of float32
constexpr double kSgdTolerance = 64.0 * kFloatRounding;

struct SgdCase {
  const char* name;
  SgdStepOptions options;  // first_step is set per step below
};

std::vector<float> range(const std::vector<float>& v, int64_t offset) {
  return std::vector<float>(v.begin() + offset, v.end());
}

// Runs kSteps steps on both sides from the same w, velocity and gradients (velocity starts as NaN: the
// first momentum step must assign it without reading it) and compares w and velocity after each step.
// offset 1 puts every pointer one float past a 16-byte boundary (the scalar path).
void check_steps(const SgdCase& c, int64_t D, int64_t offset, uint64_t seed) {
  SCOPED_TRACE(std::string(c.name) + " D=" + std::to_string(D) + " offset=" + std::to_string(offset));
  Generator gen(seed);
  const bool momentum = c.options.momentum > 0.0f;
  std::vector<float> w = random_floats(D + offset, gen), v = testing::sentinels(D + offset);
  DeviceBuffer<float> w_dev(w), v_dev(v), grad_dev(D + offset);
  for (int step = 0; step < kSteps; ++step) {
    SgdStepOptions options = c.options;
    options.first_step = step == 0;
    const std::vector<float> grad = random_floats(D + offset, gen);
    grad_dev.upload(grad);
    sgd_step_cuda(w_dev.get() + offset, momentum ? v_dev.get() + offset : nullptr, grad_dev.get() + offset, D, options,
                  cuda_stream());
    sgd_step_cpu(w.data() + offset, momentum ? v.data() + offset : nullptr, grad.data() + offset, D, options);
    SCOPED_TRACE("step " + std::to_string(step));
    const std::vector<float> w_got = w_dev.download();
    expect_agree(range(w_got, offset), range(w, offset), kSgdTolerance, "w");
    if (offset == 1) {
      EXPECT_EQ(w_got[0], w[0]) << "the float before the range was written";
    }
    if (momentum) expect_agree(range(v_dev.download(), offset), range(v, offset), kSgdTolerance, "velocity");
  }
  if (!momentum) {  // velocity is neither read nor written: still all NaN
    for (float x : v_dev.download()) ASSERT_TRUE(std::isnan(x)) << "velocity written without momentum";
  }
}

void check_case(const SgdCase& c, uint64_t seed) {
  for (int64_t D : {int64_t{1}, int64_t{7}, int64_t{1001}})
    for (int64_t offset : {int64_t{0}, int64_t{1}}) check_steps(c, D, offset, seed++);
}

TEST(CudaAgreement, SgdPlainStepMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  check_case({"plain", {.lr = 0.1f}}, 31);  // momentum 0: velocity passed as null
}

TEST(CudaAgreement, SgdWeightDecayMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  check_case({"weight decay", {.lr = 0.1f, .weight_decay = 0.01f}}, 41);
}

TEST(CudaAgreement, SgdMomentumFirstAndLaterStepsMatchCpu) {
  BASTION_REQUIRE_CUDA();
  check_case({"momentum", {.lr = 0.05f, .momentum = 0.9f}}, 51);
  check_case({"momentum + weight decay", {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-3f}}, 61);
}

TEST(CudaAgreement, SgdFirstMomentumStepAssignsVelocity) {
  BASTION_REQUIRE_CUDA();
  // Velocity starts as NaN; the first step sets it to the gradient exactly (no weight decay, no
  // arithmetic on it) and w -= lr * grad.
  Generator gen(71);
  constexpr int64_t D = 1001;
  const std::vector<float> w = random_floats(D, gen), grad = random_floats(D, gen);
  DeviceBuffer<float> w_dev(w), v_dev(testing::sentinels(D)), grad_dev(grad);
  const SgdStepOptions options{.lr = 0.1f, .momentum = 0.9f, .first_step = true};
  sgd_step_cuda(w_dev.get(), v_dev.get(), grad_dev.get(), D, options, cuda_stream());
  EXPECT_EQ(v_dev.download(), grad);
  std::vector<float> want = w;
  sgd_step_cpu(want.data(), nullptr, grad.data(), D, {.lr = 0.1f});  // plain SGD takes the same step
  expect_agree(w_dev.download(), want, kSgdTolerance, "w after the first momentum step");
}

TEST(CudaAgreement, SgdNesterovMatchesCpu) {
  BASTION_REQUIRE_CUDA();
  check_case({"nesterov", {.lr = 0.05f, .momentum = 0.9f, .nesterov = true}}, 81);
  check_case({"nesterov + weight decay", {.lr = 0.05f, .momentum = 0.8f, .weight_decay = 1e-2f, .nesterov = true}}, 91);
}

}  // namespace
}  // namespace bastion
