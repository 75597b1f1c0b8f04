// softmax family over rows of an (N, C) row-major matrix. All use the max-shifted form, so large
// logits do not overflow.
//
// log_softmax_forward:  out[n, c] = x[n, c] - log sum_j exp(x[n, j])          PyTorch: F.log_softmax(x, 1)
// log_softmax_backward: ASSIGNS dx = g - exp(out) * sum_c g   (uses the saved output)
//
// cross_entropy_forward: loss = mean_n(-log softmax(x)[n, y[n]]); y int32 in [0, C)
//   writes probs (N, C) = softmax(x) for the backward; returns the loss (accumulated in double).
//   PyTorch: F.cross_entropy(x, y, reduction="mean")
// cross_entropy_backward: ASSIGNS dx = (probs - onehot(y)) * g / N   (g = upstream scalar gradient)
//
// kl_div_forward (distillation, temperature T):
//   loss = T^2 * mean_n sum_c pt[n,c] * (log pt[n,c] - log ps[n,c]),  ps = softmax(s/T), pt = softmax(t/T)
//   writes log_ps and log_pt (N, C) for the backward. The T^2 factor keeps gradient magnitudes
//   independent of T (Hinton et al. 2015).
//   PyTorch: F.kl_div(F.log_softmax(s/T,1), F.softmax(t/T,1), reduction="batchmean") * T * T
// kl_div_backward: ASSIGNS (either may be null)
//   ds = g * T * (ps - pt) / N
//   dt = g * T * pt * ((log pt - log ps) - kl_n) / N,   kl_n = sum_c pt (log pt - log ps)
#pragma once

#include <cstdint>

namespace bastion {

void log_softmax_forward_cpu(float* out, const float* x, int64_t N, int64_t C);
void log_softmax_backward_cpu(float* dx, const float* grad_out, const float* out, int64_t N, int64_t C);

double cross_entropy_forward_cpu(float* probs, const float* x, const int32_t* y, int64_t N, int64_t C);
void cross_entropy_backward_cpu(float* dx, const float* probs, const int32_t* y, float grad, int64_t N, int64_t C);

double kl_div_forward_cpu(float* log_ps, float* log_pt, const float* student, const float* teacher, float T, int64_t N,
                          int64_t C);
void kl_div_backward_cpu(float* d_student, float* d_teacher, const float* log_ps, const float* log_pt, float T,
                         float grad, int64_t N, int64_t C);

}  // namespace bastion
