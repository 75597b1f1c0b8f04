// Differentiable ops: each checks shapes and devices, allocates its output, calls the kernel for the
// tensors' device, and records a backward node (autograd/engine.h) when an input requires grad.
// One file per op family in autograd/ops/, sharing its base name with kernels/cpu/<family>.cpp and
// kernels/cuda/<family>.cu; each op picks the kernel with one visible `switch (device)`. Outputs and
// gradients live on the inputs' device; CUDA kernels run on the engine stream (cuda_stream()).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "autograd/engine.h"
#include "tensor/tensor.h"

namespace bastion {

// ---- elementwise.cpp ----
Tensor add(const Tensor& a, const Tensor& b);  // same shapes
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& a, float alpha);
Tensor sum(const Tensor& a);                          // -> shape (1)
Tensor mean(const Tensor& a);                         // -> shape (1)
Tensor reshape(const Tensor& a, const Shape& shape);  // contiguous, same numel; shares storage
Tensor flatten(const Tensor& a);                      // (N, ...) -> (N, rest)

// ---- activation.cpp ----
Tensor relu(const Tensor& x);
// Inverted dropout with probability p; identity when !training or p == 0. Draws from `gen`.
Tensor dropout(const Tensor& x, float p, bool training, Generator& gen);

// ---- linear.cpp ----
// y = x @ weight^T + bias; x (N, in), weight (out, in), bias (out) or undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// ---- conv.cpp ----
// x (N, C, H, W), weight (K, C, R, S), bias (K) or undefined -> (N, K, OH, OW).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding);

// ---- pool.cpp ----
Tensor max_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding = 0);
Tensor avg_pool2d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding = 0);
Tensor global_avg_pool2d(const Tensor& x);  // (N, C, H, W) -> (N, C, 1, 1), AdaptiveAvgPool2d(1)

// ---- batchnorm.cpp ----
// x (N, C) or (N, C, H, W). Training: normalise with the batch statistics (biased variance) and update
// running_mean/var in place with `momentum` (unbiased variance, as PyTorch). Eval: use running stats.
Tensor batch_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                  const Tensor& running_var, bool training, float momentum, float eps);

// ---- softmax.cpp ----
Tensor log_softmax(const Tensor& x);                                                           // (N, C)
Tensor cross_entropy(const Tensor& logits, const LabelTensor& y);                              // mean over N -> (1)
Tensor kl_div(const Tensor& student_logits, const Tensor& teacher_logits, float temperature);  // -> (1)

// ---- balanced_softmax.cpp ----
// Balanced-softmax cross-entropy: mean_n CE(logits[n] + log_prior, y[n]) -> (1); log_prior (C) on the host,
// finite or -inf (absent class); a label whose class has log_prior -inf is an error (FedRoD, PFL-FACTS §8).
Tensor balanced_softmax_cross_entropy(const Tensor& logits, const LabelTensor& y, std::span<const float> log_prior);
// log_prior[c] = log(counts[c]), -inf where counts[c] == 0 (PFLlib's log 0); counts must be >= 0.
std::vector<float> balanced_softmax_log_prior(std::span<const int64_t> counts);
// ---- gaussian.cpp (FedCR's stochastic bottleneck; contracts in kernels/cpu/gaussian.h, CUDA twins in
// kernels/cuda/gaussian.h; every argument on the encoding's device) ----
// encoding E (N, 2d): mu = E[:, :d], sigma = softplus(E[:, d:] - alpha).
// z (S*N, d), row s*N + n = mu[n] + sigma[n] * eps[s, n]; eps (S, N, d) is a constant (seeded draws).
Tensor gaussian_sample(const Tensor& encoding, const Tensor& eps, float alpha);
// mean_n KL(N(prior_mu[n], prior_sigma[n]) || N(mu[n], sigma[n])) -> (1); priors (N, d) are constants.
Tensor gaussian_kl(const Tensor& encoding, const Tensor& prior_mu, const Tensor& prior_sigma, float alpha);
// (S*N, C) with row s*N + n -> (N, C), the mean over the S stacked copies.
Tensor sample_mean(const Tensor& x, int64_t samples);

// Throws a clear error when `t` is not on the CPU (for code paths that have no CUDA kernel).
void require_cpu(const Tensor& t, const char* op);

// ---- untracked helpers on either device (no autograd) ----
void add_inplace(const Tensor& dst, const Tensor& src);  // dst += src, same numel and device
Tensor add_values(const Tensor& a, const Tensor& b);     // a + b into a fresh tensor
// The kernels' convention for optional outputs and inputs: null when the tensor is undefined.
inline float* data_or_null(const Tensor& t) { return t.defined() ? t.data() : nullptr; }

}  // namespace bastion
