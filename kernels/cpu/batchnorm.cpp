#include "kernels/cpu/batchnorm.h"

#include <cmath>

#include "kernels/cpu/parallel.h"

namespace bastion {

namespace {
// Calls fn(value pointer, length) for each of the N runs of channel c.
template <typename Fn>
void for_channel(const float* base, const BatchNormGeometry& g, int64_t c, Fn fn) {
  for (int64_t n = 0; n < g.N; ++n) fn(base + (n * g.C + c) * g.L, n);
}
}  // namespace

void batch_norm_forward_cpu(float* y, float* save_mean, float* save_invstd, const float* x, const float* gamma,
                            const float* beta, float* running_mean, float* running_var, const BatchNormGeometry& g,
                            bool training, float momentum, float eps) {
  const int64_t M = g.N * g.L;
#pragma omp parallel for schedule(static) if (g.N * g.C * g.L >= kParallelMinWork)
  for (int64_t c = 0; c < g.C; ++c) {
    double mean = 0.0, var = 0.0;
    if (training) {
      for_channel(x, g, c, [&](const float* run, int64_t) {
        for (int64_t i = 0; i < g.L; ++i) mean += run[i];
      });
      mean /= static_cast<double>(M);
      for_channel(x, g, c, [&](const float* run, int64_t) {
        for (int64_t i = 0; i < g.L; ++i) var += (run[i] - mean) * (run[i] - mean);
      });
      var /= static_cast<double>(M);
      const double unbiased = M > 1 ? var * M / (M - 1) : var;
      running_mean[c] = static_cast<float>((1.0 - momentum) * running_mean[c] + momentum * mean);
      running_var[c] = static_cast<float>((1.0 - momentum) * running_var[c] + momentum * unbiased);
    } else {
      mean = running_mean[c];
      var = running_var[c];
    }
    const float invstd = static_cast<float>(1.0 / std::sqrt(var + eps));
    save_mean[c] = static_cast<float>(mean);
    save_invstd[c] = invstd;
    const float a = gamma[c] * invstd, b = beta[c] - static_cast<float>(mean) * a;
    for (int64_t n = 0; n < g.N; ++n) {
      const float* src = x + (n * g.C + c) * g.L;
      float* dst = y + (n * g.C + c) * g.L;
      for (int64_t i = 0; i < g.L; ++i) dst[i] = src[i] * a + b;
    }
  }
}

void batch_norm_backward_cpu(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                             const float* gamma, const float* save_mean, const float* save_invstd,
                             const BatchNormGeometry& g, bool training) {
  const int64_t M = g.N * g.L;
#pragma omp parallel for schedule(static) if (g.N * g.C * g.L >= kParallelMinWork)
  for (int64_t c = 0; c < g.C; ++c) {
    const float mean = save_mean[c], invstd = save_invstd[c];
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int64_t n = 0; n < g.N; ++n) {
      const float* d = dy + (n * g.C + c) * g.L;
      const float* v = x + (n * g.C + c) * g.L;
      for (int64_t i = 0; i < g.L; ++i) {
        sum_dy += d[i];
        sum_dy_xhat += d[i] * (v[i] - mean) * invstd;
      }
    }
    if (dbeta) dbeta[c] = static_cast<float>(sum_dy);
    if (dgamma) dgamma[c] = static_cast<float>(sum_dy_xhat);
    if (!dx) continue;
    const float k = gamma[c] * invstd;
    const float mean_dy = training ? static_cast<float>(sum_dy / M) : 0.0f;
    const float mean_dy_xhat = training ? static_cast<float>(sum_dy_xhat / M) : 0.0f;
    for (int64_t n = 0; n < g.N; ++n) {
      const float* d = dy + (n * g.C + c) * g.L;
      const float* v = x + (n * g.C + c) * g.L;
      float* out = dx + (n * g.C + c) * g.L;
      for (int64_t i = 0; i < g.L; ++i) out[i] = k * (d[i] - mean_dy - (v[i] - mean) * invstd * mean_dy_xhat);
    }
  }
}

}  // namespace bastion
