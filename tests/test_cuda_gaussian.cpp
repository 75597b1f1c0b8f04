// CUDA agreement table, FedCR's Gaussian bottleneck (kernels/cuda/gaussian.h) against its CPU twin
// (kernels/cpu/gaussian.h): gaussian_sample, gaussian_kl and sample_mean, forward and backward, on odd
// sizes with N > 1 and S > 1 (one with N*d above the emulator's 4 x 256 grid-stride threads, so the stride
// is taken), alpha 0 and 0.7, some sigma inputs above softplus' threshold 20 (its identity branch), a
// non-unit upstream KL gradient read from a device scalar, NaN-sentinel outputs; then the three ops
// composed through autograd on both devices. Skipped without a device; the emulated build
// (-DBASTION_CUDA=EMULATE) runs it on CPU threads.
//
// Tolerances (u = 2^-24, float32 unit roundoff). Both twins compute softplus, its slope and every KL term
// in double and round once to float; the double results differ by a few double ulps (CUDA's and glibc's
// exp/log1p), so the floats differ by at most one rounding:
//   kExactTolerance: 0, for sample_mean (same double sum in the same order) and its backward (one float
//     product by the same host-computed 1/S);
//   kRoundedOnceTolerance = 4u of |cpu|: the sample backward (same double sums, slope differs in the last
//     double bits), KL forward (double sums in another order; every term >= 0, no cancellation) and KL
//     backward (floor at 1e-6 of the largest gradient, where a d_sigma whose two terms nearly cancel
//     could amplify the double error; never reached by these inputs, but not excluded by them);
//   kSampleTolerance = 8u of max_i(|mu| + sigma |eps|): z = mu + sigma * eps in float, where sigma may
//     differ by one rounding and nvcc may fuse the product into an FMA (one rounding fewer);
//   kThroughAutogradTolerance = 64u of the largest value: the composition adds cross-entropy (16u of
//     the logit scale, tests/test_cuda_softmax.cpp) to the bottleneck's terms above, with margin.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "autograd/ops.h"
#include "kernels/cpu/gaussian.h"
#include "kernels/cuda/gaussian.h"
#include "tests/cuda_test_support.h"
#include "tests/kernel_test_support.h"
#include "tests/test_support.h"

namespace bastion {
namespace {

using testing::DeviceBuffer;
using testing::expect_agree;
using testing::expect_error;
using testing::kUnitRoundoff;
using testing::max_abs;
using testing::random_floats;
using testing::sentinels;

constexpr double kExactTolerance = 0.0;
constexpr double kRoundedOnceTolerance = 4 * kUnitRoundoff;
constexpr double kSampleTolerance = 8 * kUnitRoundoff;
constexpr double kThroughAutogradTolerance = 64 * kUnitRoundoff;
constexpr double kCancellationFloor = 1e-6;  // of the largest KL gradient; see the header
constexpr float kUpstreamGrad = 0.7f;

struct Sizes {
  int64_t S, N, d;
  float alpha;
};
const Sizes kSmall{3, 7, 37, 0.0f};
const Sizes kStrided{2, 5, 301, 0.7f};  // N*d = 1505 > 4 blocks x 256 threads of the emulator

// E (N, 2d): mu in [-2, 2]; sigma inputs in [-3, 3], every 11th at 21 to 25 (softplus = identity there).
std::vector<float> random_encoding(Sizes s, uint64_t seed) {
  Generator gen(seed);
  std::vector<float> e = random_floats(s.N * 2 * s.d, gen, -2.0f, 2.0f);
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t j = 0; j < s.d; ++j) {
      float& pre = e[n * 2 * s.d + s.d + j];
      pre = (n * s.d + j) % 11 == 5 ? 23.0f + pre : 1.5f * pre;
    }
  return e;
}

// Uniform in +-[0.05, 2.5]: non-zero, of a standard normal's size.
std::vector<float> random_noise(int64_t count, uint64_t seed) {
  Generator gen(seed);
  std::vector<float> v = random_floats(count, gen, 0.05f, 2.5f);
  for (size_t i = 0; i < v.size(); i += 2) v[i] = -v[i];
  return v;
}

// max over (s, n, j) of |mu| + sigma |eps|: the size of the terms z adds.
double sample_term_scale(Sizes s, const std::vector<float>& e, const std::vector<float>& eps) {
  std::vector<float> mu(s.N * s.d), sigma(s.N * s.d);
  gaussian_params_cpu(mu.data(), sigma.data(), e.data(), s.N, s.d, s.alpha);
  double scale = 0.0;
  for (int64_t k = 0; k < static_cast<int64_t>(eps.size()); ++k) {
    const int64_t i = k % (s.N * s.d);
    scale = std::max(scale, std::abs(static_cast<double>(mu[i])) + sigma[i] * std::abs(static_cast<double>(eps[k])));
  }
  return scale;
}

TEST(CudaAgreement, GaussianSampleForward) {
  BASTION_REQUIRE_CUDA();
  for (Sizes s : {kSmall, kStrided}) {
    const std::vector<float> e = random_encoding(s, 51), eps = random_noise(s.S * s.N * s.d, 52);
    std::vector<float> want = sentinels(eps.size());
    gaussian_sample_forward_cpu(want.data(), e.data(), eps.data(), s.S, s.N, s.d, s.alpha);
    DeviceBuffer<float> d_e(e), d_eps(eps), d_z(sentinels(eps.size()));
    gaussian_sample_forward_cuda(d_z.get(), d_e.get(), d_eps.get(), s.S, s.N, s.d, s.alpha, cuda_stream());
    expect_agree(d_z.download(), want, kSampleTolerance, "gaussian_sample z", sample_term_scale(s, e, eps));
  }
}

TEST(CudaAgreement, GaussianSampleBackward) {
  BASTION_REQUIRE_CUDA();
  for (Sizes s : {kSmall, kStrided}) {
    const std::vector<float> e = random_encoding(s, 53), eps = random_noise(s.S * s.N * s.d, 54);
    const std::vector<float> gz = random_noise(eps.size(), 55);
    std::vector<float> want = sentinels(e.size());
    gaussian_sample_backward_cpu(want.data(), gz.data(), e.data(), eps.data(), s.S, s.N, s.d, s.alpha);
    DeviceBuffer<float> d_e(e), d_eps(eps), d_gz(gz), d_de(sentinels(e.size()));
    gaussian_sample_backward_cuda(d_de.get(), d_gz.get(), d_e.get(), d_eps.get(), s.S, s.N, s.d, s.alpha,
                                  cuda_stream());
    expect_agree(d_de.download(), want, kRoundedOnceTolerance, "gaussian_sample dE", 1e-30);
  }
}

struct Prior {
  std::vector<float> mu, sigma;
};

// mu in [-1, 1], sigma in [0.5, 1.5] (as the label Gaussians of the fedcr rule, away from the 1e-8 clamp).
Prior random_prior(Sizes s, uint64_t seed) {
  Generator gen(seed);
  return {random_floats(s.N * s.d, gen, -1.0f, 1.0f), random_floats(s.N * s.d, gen, 0.5f, 1.5f)};
}

TEST(CudaAgreement, GaussianKlForward) {
  BASTION_REQUIRE_CUDA();
  for (Sizes s : {kSmall, kStrided}) {
    const std::vector<float> e = random_encoding(s, 56);
    const Prior p = random_prior(s, 57);
    const double want = gaussian_kl_forward_cpu(e.data(), p.mu.data(), p.sigma.data(), s.N, s.d, s.alpha);
    DeviceBuffer<float> d_e(e), d_pm(p.mu), d_ps(p.sigma), d_loss(sentinels(1));
    gaussian_kl_forward_cuda(d_loss.get(), d_e.get(), d_pm.get(), d_ps.get(), s.N, s.d, s.alpha, cuda_stream());
    expect_agree(d_loss.download(), {static_cast<float>(want)}, kRoundedOnceTolerance, "gaussian_kl loss", 1e-30);
  }
}

TEST(CudaAgreement, GaussianKlBackward) {
  BASTION_REQUIRE_CUDA();
  for (Sizes s : {kSmall, kStrided}) {
    const std::vector<float> e = random_encoding(s, 58);
    const Prior p = random_prior(s, 59);
    std::vector<float> want = sentinels(e.size());
    gaussian_kl_backward_cpu(want.data(), e.data(), p.mu.data(), p.sigma.data(), kUpstreamGrad, s.N, s.d, s.alpha);
    DeviceBuffer<float> d_e(e), d_pm(p.mu), d_ps(p.sigma), d_grad(std::vector<float>{kUpstreamGrad});
    DeviceBuffer<float> d_de(sentinels(e.size()));
    gaussian_kl_backward_cuda(d_de.get(), d_e.get(), d_pm.get(), d_ps.get(), d_grad.get(), s.N, s.d, s.alpha,
                              cuda_stream());
    expect_agree(d_de.download(), want, kRoundedOnceTolerance, "gaussian_kl dE", kCancellationFloor * max_abs(want));
  }
}

TEST(CudaAgreement, SampleMeanForwardAndBackward) {
  BASTION_REQUIRE_CUDA();
  for (Sizes s : {kSmall, kStrided}) {
    const int64_t C = s.d;  // (S*N, C) logits; reuse the odd widths
    const std::vector<float> in = random_noise(s.S * s.N * C, 60), g = random_noise(s.N * C, 61);
    std::vector<float> want_out = sentinels(g.size()), want_dx = sentinels(in.size());
    sample_mean_forward_cpu(want_out.data(), in.data(), s.S, s.N, C);
    sample_mean_backward_cpu(want_dx.data(), g.data(), s.S, s.N, C);
    DeviceBuffer<float> d_in(in), d_g(g), d_out(sentinels(g.size())), d_dx(sentinels(in.size()));
    sample_mean_forward_cuda(d_out.get(), d_in.get(), s.S, s.N, C, cuda_stream());
    sample_mean_backward_cuda(d_dx.get(), d_g.get(), s.S, s.N, C, cuda_stream());
    expect_agree(d_out.download(), want_out, kExactTolerance, "sample_mean out");
    expect_agree(d_dx.download(), want_dx, kExactTolerance, "sample_mean dx");
  }
}

// The three ops end to end through autograd on the device (eps and priors uploaded, the KL loss and its
// upstream gradient as device scalars) against the same graph on the CPU: encoding -> z -> mean over the
// samples -> cross-entropy over d classes, plus 0.5 KL, as the fedcr rule's loss.
TEST(CudaAgreement, GaussianOpsThroughAutograd) {
  BASTION_REQUIRE_CUDA();
  const Sizes s = kSmall;
  const std::vector<float> e = random_encoding(s, 62), eps = random_noise(s.S * s.N * s.d, 63);
  const Prior p = random_prior(s, 64);
  LabelTensor y(s.N);
  for (int64_t n = 0; n < s.N; ++n) y[n] = static_cast<int32_t>((5 * n + 3) % s.d);
  auto loss_on = [&](Device device, Tensor& leaf) {
    leaf = Tensor::from_vector({s.N, 2 * s.d}, e).to(device).set_requires_grad(true);
    const Tensor noise = Tensor::from_vector({s.S, s.N, s.d}, eps).to(device);
    const Tensor pm = Tensor::from_vector({s.N, s.d}, p.mu).to(device),
                 ps = Tensor::from_vector({s.N, s.d}, p.sigma).to(device);
    const Tensor logits = sample_mean(gaussian_sample(leaf, noise, s.alpha), s.S);
    Tensor loss = add(cross_entropy(logits, y), scale(gaussian_kl(leaf, pm, ps, s.alpha), 0.5f));
    loss.backward();
    return loss.to(Device::CPU).item();
  };
  Tensor cpu, gpu;
  const float cpu_loss = loss_on(Device::CPU, cpu), gpu_loss = loss_on(Device::CUDA, gpu);
  EXPECT_EQ(gpu.grad().device(), Device::CUDA);
  expect_agree({gpu_loss}, {cpu_loss}, kThroughAutogradTolerance, "loss");
  const std::vector<float> want = cpu.grad().to_vector();
  expect_agree(gpu.grad().to(Device::CPU).to_vector(), want, kThroughAutogradTolerance, "op dE", max_abs(want));
}

// A device tensor beside a host one is refused with the devices named (no silent copy).
TEST(CudaAgreement, GaussianOpsRefuseMixedDevices) {
  BASTION_REQUIRE_CUDA();
  const Tensor e = Tensor::zeros({2, 6}, Device::CUDA);
  expect_error([&] { gaussian_sample(e, Tensor::zeros({1, 2, 3}), 0.0f); }, {"different devices"});
  expect_error([&] { gaussian_kl(e, Tensor::zeros({2, 3}), Tensor::full({2, 3}, 1.0f), 0.0f); }, {"different devices"});
}

}  // namespace
}  // namespace bastion
