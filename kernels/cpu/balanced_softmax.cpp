#include "kernels/cpu/balanced_softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace bastion {

namespace {
// out = s - logsumexp(s) with s = row + log_prior, from the row maximum of s. An entry of s that is -inf
// gives exp(-inf - max) = 0 and out = -inf; max is finite because the caller keeps one s finite.
template <typename T>
void balanced_log_softmax_row(T* out, const T* row, const T* log_prior, int64_t C) {
  T max_value = -std::numeric_limits<T>::infinity();
  for (int64_t c = 0; c < C; ++c) max_value = std::max(max_value, row[c] + log_prior[c]);
  double total = 0.0;
  for (int64_t c = 0; c < C; ++c) total += std::exp(static_cast<double>(row[c] + log_prior[c] - max_value));
  const T log_total = max_value + static_cast<T>(std::log(total));
  for (int64_t c = 0; c < C; ++c) out[c] = row[c] + log_prior[c] - log_total;
}
}  // namespace

template <typename T>
double balanced_softmax_forward_cpu(T* probs, const T* x, const int32_t* y, const T* log_prior, int64_t N,
                                    int64_t C) {
  double loss = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    T* p = probs + n * C;
    balanced_log_softmax_row(p, x + n * C, log_prior, C);
    loss -= p[y[n]];
    for (int64_t c = 0; c < C; ++c) p[c] = std::exp(p[c]);
  }
  return N > 0 ? loss / static_cast<double>(N) : 0.0;
}

template <typename T>
void balanced_softmax_backward_cpu(T* dx, const T* probs, const int32_t* y, T grad, int64_t N, int64_t C) {
  const T scale = N > 0 ? grad / static_cast<T>(N) : T(0);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) dx[n * C + c] = probs[n * C + c] * scale;
    dx[n * C + y[n]] -= scale;
  }
}

template double balanced_softmax_forward_cpu<float>(float*, const float*, const int32_t*, const float*, int64_t,
                                                    int64_t);
template double balanced_softmax_forward_cpu<double>(double*, const double*, const int32_t*, const double*, int64_t,
                                                     int64_t);
template void balanced_softmax_backward_cpu<float>(float*, const float*, const int32_t*, float, int64_t, int64_t);
template void balanced_softmax_backward_cpu<double>(double*, const double*, const int32_t*, double, int64_t, int64_t);

}  // namespace bastion
