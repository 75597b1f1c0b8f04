// CUDA agreement table, softmax family: log-softmax, cross-entropy and KL distillation (forward and
// backward, kernels/cuda/softmax.h) against their CPU twins (kernels/cpu/softmax.h). Odd N and C, C below
// and far above a warp's 32 lanes, large logits (rows shifted by +-500, where exp overflows without the
// max shift), a non-unit upstream gradient read from a device scalar, NaN-sentinel outputs.
// Skipped without a device; the emulated build runs it on CPU threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/softmax.h"
#include "kernels/cuda/softmax.h"
#include "tests/cuda_test_support.h"
#include "tests/kernel_test_support.h"

namespace bastion {
namespace {

using testing::absolute;
using testing::DeviceBuffer;
using testing::expect_agree;
using testing::kUnitRoundoff;
using testing::max_abs;
using testing::random_floats;
using testing::sentinels;

// ---- tolerances ----
// A log-probability x - log_total carries a few roundings of the row's largest logit: log_total is
// rounded to float next to max|x|, and the CUDA twin's expf (<= 2 ulp) where the CPU uses exp in double
// moves the sum by ~2.4e-7 relative, i.e. log_total by ~2.4e-7 absolute; on a GPU a fused
// multiply-add in x/T - log_total adds an ulp of the logit. So log-probabilities (and
// the losses, means of log-probabilities) are compared against max(|cpu|, largest |logit|, 1) with 16
// unit roundoffs (~1e-6): a wrong row maximum, a missed column or a wrong label moves them by far more.
constexpr double kLogProbTolerance = 16 * kUnitRoundoff;
// Gradients: a few float operations on terms no larger than the array's largest component (plus the
// expf and fused multiply-add differences above); compared against max(|cpu|, largest |cpu|) with the
// same 16 unit roundoffs, since components that cancel to near zero keep the error of their terms.
constexpr double kGradTolerance = 16 * kUnitRoundoff;
// An upstream gradient that is not 1, so a kernel that ignores *grad fails.
constexpr float kUpstreamGrad = 0.7f;

struct SoftmaxShape {
  int64_t N, C;
};
const SoftmaxShape kNarrow{37, 10};  // C below a warp: most lanes idle, rows spread over 5 blocks
const SoftmaxShape kWide{5, 1000};   // C far above a warp: each lane strides over ~31 columns

// Random logits of scale `spread`; with `shift`, row n is also moved by +shift or -shift alternately.
std::vector<float> random_logits(SoftmaxShape s, uint64_t seed, float spread, float shift = 0.0f) {
  Generator gen(seed);
  std::vector<float> x = random_floats(s.N * s.C, gen, -spread, spread);
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t c = 0; c < s.C; ++c) x[n * s.C + c] += n % 2 == 0 ? shift : -shift;
  return x;
}

std::vector<int32_t> random_labels(SoftmaxShape s, uint64_t seed) {
  Generator gen(seed);
  std::vector<int32_t> y(s.N);
  for (int32_t& label : y) label = static_cast<int32_t>(gen.below(static_cast<uint64_t>(s.C)));
  return y;
}

// A null output is not written through: its buffer still holds only sentinels.
void expect_untouched(const DeviceBuffer<float>& buffer, const char* what) {
  for (float v : buffer.download()) ASSERT_TRUE(std::isnan(v)) << what << " written though it was passed as null";
}

float download_scalar(const DeviceBuffer<float>& scalar) { return scalar.download()[0]; }

// ---- log-softmax ----

void expect_log_softmax_forward_agrees(SoftmaxShape s, const std::vector<float>& x) {
  std::vector<float> want = sentinels(x.size());
  log_softmax_forward_cpu(want.data(), x.data(), s.N, s.C);
  DeviceBuffer<float> d_x(x), d_out(sentinels(x.size()));
  log_softmax_forward_cuda(d_out.get(), d_x.get(), s.N, s.C, cuda_stream());
  expect_agree(d_out.download(), want, kLogProbTolerance, "log_softmax", std::max(1.0, max_abs(x)));
}

TEST(CudaAgreement, SoftmaxLogForward) {
  BASTION_REQUIRE_CUDA();
  expect_log_softmax_forward_agrees(kNarrow, random_logits(kNarrow, 1, 3.0f));
  expect_log_softmax_forward_agrees(kWide, random_logits(kWide, 2, 3.0f));
}

TEST(CudaAgreement, SoftmaxLogForwardLargeLogits) {
  BASTION_REQUIRE_CUDA();
  expect_log_softmax_forward_agrees(kNarrow, random_logits(kNarrow, 3, 40.0f, 500.0f));
  expect_log_softmax_forward_agrees(kWide, random_logits(kWide, 4, 40.0f, 500.0f));
}

TEST(CudaAgreement, SoftmaxLogBackward) {
  BASTION_REQUIRE_CUDA();
  for (SoftmaxShape s : {kNarrow, kWide}) {
    const std::vector<float> x = random_logits(s, 5, 3.0f);
    std::vector<float> out = sentinels(x.size()), want = sentinels(x.size());
    log_softmax_forward_cpu(out.data(), x.data(), s.N, s.C);
    Generator gen(6);
    const std::vector<float> grad_out = random_floats(x.size(), gen);
    log_softmax_backward_cpu(want.data(), grad_out.data(), out.data(), s.N, s.C);
    DeviceBuffer<float> d_grad_out(grad_out), d_out(out), d_dx(sentinels(x.size()));
    log_softmax_backward_cuda(d_dx.get(), d_grad_out.get(), d_out.get(), s.N, s.C, cuda_stream());
    expect_agree(d_dx.download(), want, kGradTolerance, "log_softmax dx", max_abs(want));
  }
}

// ---- cross-entropy ----

void expect_cross_entropy_forward_agrees(SoftmaxShape s, const std::vector<float>& x, uint64_t seed) {
  const std::vector<int32_t> y = random_labels(s, seed);
  std::vector<float> probs = sentinels(x.size());
  const double loss = cross_entropy_forward_cpu(probs.data(), x.data(), y.data(), s.N, s.C);
  DeviceBuffer<float> d_x(x), d_probs(sentinels(x.size())), d_loss(sentinels(1));
  DeviceBuffer<int32_t> d_y(y);
  cross_entropy_forward_cuda(d_loss.get(), d_probs.get(), d_x.get(), d_y.get(), s.N, s.C, cuda_stream());
  const double logit_scale = std::max(1.0, max_abs(x));
  // A probability is exp of a log-probability: its relative error is the log-probability's absolute
  // error. The floor 1e-30 sits far above float's denormals, where relative precision is lost.
  expect_agree(d_probs.download(), probs, kLogProbTolerance * logit_scale, "probs", 1e-30);
  EXPECT_NEAR(download_scalar(d_loss), loss, kLogProbTolerance * std::max(logit_scale, std::abs(loss)));
}

TEST(CudaAgreement, CrossEntropyForward) {
  BASTION_REQUIRE_CUDA();
  expect_cross_entropy_forward_agrees(kNarrow, random_logits(kNarrow, 7, 3.0f), 8);
  expect_cross_entropy_forward_agrees(kWide, random_logits(kWide, 9, 3.0f), 10);
}

TEST(CudaAgreement, CrossEntropyForwardLargeLogits) {
  BASTION_REQUIRE_CUDA();
  expect_cross_entropy_forward_agrees(kNarrow, random_logits(kNarrow, 11, 40.0f, 500.0f), 12);
  expect_cross_entropy_forward_agrees(kWide, random_logits(kWide, 13, 40.0f, 500.0f), 14);
}

TEST(CudaAgreement, CrossEntropyBackward) {
  BASTION_REQUIRE_CUDA();
  for (SoftmaxShape s : {kNarrow, kWide}) {
    const std::vector<float> x = random_logits(s, 15, 3.0f);
    const std::vector<int32_t> y = random_labels(s, 16);
    std::vector<float> probs = sentinels(x.size()), want = sentinels(x.size());
    cross_entropy_forward_cpu(probs.data(), x.data(), y.data(), s.N, s.C);
    cross_entropy_backward_cpu(want.data(), probs.data(), y.data(), kUpstreamGrad, s.N, s.C);
    DeviceBuffer<float> d_probs(probs), d_grad(std::vector<float>{kUpstreamGrad}), d_dx(sentinels(x.size()));
    DeviceBuffer<int32_t> d_y(y);
    cross_entropy_backward_cuda(d_dx.get(), d_probs.get(), d_y.get(), d_grad.get(), s.N, s.C, cuda_stream());
    expect_agree(d_dx.download(), want, kGradTolerance, "cross_entropy dx", max_abs(want));
  }
}

// ---- KL distillation ----

struct KlCase {
  SoftmaxShape s;
  float T;
};
const KlCase kKlCases[] = {{kNarrow, 2.5f}, {kWide, 4.0f}};

TEST(CudaAgreement, KlDivForward) {
  BASTION_REQUIRE_CUDA();
  for (const KlCase& k : kKlCases) {
    const std::vector<float> student = random_logits(k.s, 17, 6.0f), teacher = random_logits(k.s, 18, 6.0f);
    std::vector<float> log_ps = sentinels(student.size()), log_pt = sentinels(student.size());
    const double loss =
        kl_div_forward_cpu(log_ps.data(), log_pt.data(), student.data(), teacher.data(), k.T, k.s.N, k.s.C);
    DeviceBuffer<float> d_s(student), d_t(teacher), d_log_ps(sentinels(student.size())),
        d_log_pt(sentinels(student.size())), d_loss(sentinels(1));
    kl_div_forward_cuda(d_loss.get(), d_log_ps.get(), d_log_pt.get(), d_s.get(), d_t.get(), k.T, k.s.N, k.s.C,
                        cuda_stream());
    const double logit_scale = std::max(1.0, std::max(max_abs(student), max_abs(teacher)) / k.T);
    expect_agree(d_log_ps.download(), log_ps, kLogProbTolerance, "log_ps", logit_scale);
    expect_agree(d_log_pt.download(), log_pt, kLogProbTolerance, "log_pt", logit_scale);
    // kl_n = sum_c pt (log pt - log ps) with sum_c pt = 1 moves by at most the error of two
    // log-probabilities, and the loss is T^2 times their mean.
    EXPECT_NEAR(download_scalar(d_loss), loss, 2 * kLogProbTolerance * logit_scale * k.T * k.T);
  }
}

// Which of d_student, d_teacher the backward is asked for (the other passed as null).
void expect_kl_backward_agrees(const KlCase& k, bool want_student, bool want_teacher) {
  const std::vector<float> student = random_logits(k.s, 19, 6.0f), teacher = random_logits(k.s, 20, 6.0f);
  const size_t size = student.size();
  std::vector<float> log_ps = sentinels(size), log_pt = sentinels(size), ds = sentinels(size), dt = sentinels(size);
  kl_div_forward_cpu(log_ps.data(), log_pt.data(), student.data(), teacher.data(), k.T, k.s.N, k.s.C);
  kl_div_backward_cpu(ds.data(), dt.data(), log_ps.data(), log_pt.data(), k.T, kUpstreamGrad, k.s.N, k.s.C);
  DeviceBuffer<float> d_log_ps(log_ps), d_log_pt(log_pt), d_grad(std::vector<float>{kUpstreamGrad});
  DeviceBuffer<float> d_ds(sentinels(size)), d_dt(sentinels(size));
  kl_div_backward_cuda(want_student ? d_ds.get() : nullptr, want_teacher ? d_dt.get() : nullptr, d_log_ps.get(),
                       d_log_pt.get(), k.T, d_grad.get(), k.s.N, k.s.C, cuda_stream());
  if (want_student) expect_agree(d_ds.download(), ds, kGradTolerance, "d_student", max_abs(ds));
  if (want_teacher) expect_agree(d_dt.download(), dt, kGradTolerance, "d_teacher", max_abs(dt));
  if (!want_student) expect_untouched(d_ds, "d_student");
  if (!want_teacher) expect_untouched(d_dt, "d_teacher");
}

TEST(CudaAgreement, KlDivBackward) {
  BASTION_REQUIRE_CUDA();
  for (const KlCase& k : kKlCases) expect_kl_backward_agrees(k, true, true);
}

TEST(CudaAgreement, KlDivBackwardOneOutputNull) {
  BASTION_REQUIRE_CUDA();
  expect_kl_backward_agrees(kKlCases[0], /*want_student=*/true, /*want_teacher=*/false);
  expect_kl_backward_agrees(kKlCases[1], /*want_student=*/false, /*want_teacher=*/true);
}

}  // namespace
}  // namespace bastion
