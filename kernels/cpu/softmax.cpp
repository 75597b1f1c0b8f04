#include "kernels/cpu/softmax.h"

#include <algorithm>
#include <cmath>

namespace bastion {

namespace {
// out = row/scale - logsumexp(row/scale), computed from the row maximum.
void log_softmax_row(float* out, const float* row, float inv_scale, int64_t C) {
  float max_value = row[0] * inv_scale;
  for (int64_t c = 1; c < C; ++c) max_value = std::max(max_value, row[c] * inv_scale);
  double total = 0.0;
  for (int64_t c = 0; c < C; ++c) total += std::exp(static_cast<double>(row[c] * inv_scale - max_value));
  const float log_total = max_value + static_cast<float>(std::log(total));
  for (int64_t c = 0; c < C; ++c) out[c] = row[c] * inv_scale - log_total;
}
}  // namespace

void log_softmax_forward_cpu(float* out, const float* x, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) log_softmax_row(out + n * C, x + n * C, 1.0f, C);
}

void log_softmax_backward_cpu(float* dx, const float* grad_out, const float* out, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const float* g = grad_out + n * C;
    const float* o = out + n * C;
    double total = 0.0;
    for (int64_t c = 0; c < C; ++c) total += g[c];
    for (int64_t c = 0; c < C; ++c) dx[n * C + c] = g[c] - std::exp(o[c]) * static_cast<float>(total);
  }
}

double cross_entropy_forward_cpu(float* probs, const float* x, const int32_t* y, int64_t N, int64_t C) {
  double loss = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    float* p = probs + n * C;
    log_softmax_row(p, x + n * C, 1.0f, C);
    loss -= p[y[n]];
    for (int64_t c = 0; c < C; ++c) p[c] = std::exp(p[c]);
  }
  return N > 0 ? loss / static_cast<double>(N) : 0.0;
}

void cross_entropy_backward_cpu(float* dx, const float* probs, const int32_t* y, float grad, int64_t N, int64_t C) {
  const float scale = N > 0 ? grad / static_cast<float>(N) : 0.0f;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) dx[n * C + c] = probs[n * C + c] * scale;
    dx[n * C + y[n]] -= scale;
  }
}

double kl_div_forward_cpu(float* log_ps, float* log_pt, const float* student, const float* teacher, float T, int64_t N,
                          int64_t C) {
  double loss = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    log_softmax_row(log_ps + n * C, student + n * C, 1.0f / T, C);
    log_softmax_row(log_pt + n * C, teacher + n * C, 1.0f / T, C);
    for (int64_t c = 0; c < C; ++c) {
      const double lt = log_pt[n * C + c];
      loss += std::exp(lt) * (lt - log_ps[n * C + c]);
    }
  }
  return N > 0 ? loss * T * T / static_cast<double>(N) : 0.0;
}

void kl_div_backward_cpu(float* d_student, float* d_teacher, const float* log_ps, const float* log_pt, float T,
                         float grad, int64_t N, int64_t C) {
  const float scale = N > 0 ? grad * T / static_cast<float>(N) : 0.0f;
  for (int64_t n = 0; n < N; ++n) {
    const float* ls = log_ps + n * C;
    const float* lt = log_pt + n * C;
    double kl = 0.0;
    for (int64_t c = 0; c < C; ++c) kl += std::exp(static_cast<double>(lt[c])) * (lt[c] - ls[c]);
    for (int64_t c = 0; c < C; ++c) {
      const float pt = std::exp(lt[c]);
      if (d_student) d_student[n * C + c] = scale * (std::exp(ls[c]) - pt);
      if (d_teacher) d_teacher[n * C + c] = scale * pt * ((lt[c] - ls[c]) - static_cast<float>(kl));
    }
  }
}

}  // namespace bastion
