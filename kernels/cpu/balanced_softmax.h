// balanced_softmax: the balanced-softmax cross-entropy (Ren et al., NeurIPS'20 "Balanced Meta-Softmax";
// FedRoD's loss on its generic head, PFL-FACTS §8) over an (N, C) row-major matrix of logits:
//   loss = mean_n(-log softmax(x[n] + log_prior)[y[n]]),   log_prior[c] = log n_c   (class counts)
// y: (N) int32 in [0, C); log_prior: (C), finite or -inf (a class with n_c = 0).
//
// balanced_softmax_forward: writes probs (N, C) = softmax(x + log_prior) (max-shifted, sums accumulated in
//   double, as cross_entropy_forward in kernels/cpu/softmax.h); returns the loss (accumulated in double).
// balanced_softmax_backward: ASSIGNS dx = (probs - onehot(y)) * g / N   (g = upstream scalar gradient):
//   the prior is a constant shift of the logits, so the gradient has cross-entropy's form on its probs.
//
// Absent classes (log_prior = -inf, PFLlib's log 0): their shifted logit is -inf, so their probability is
// exactly 0 and their gradient exactly 0, with no NaN, PROVIDED each row has a finite shifted logit. The
// op (autograd/ops/balanced_softmax.cpp) guarantees it by refusing a label whose class has log_prior -inf
// (that sample's loss would be +inf). +inf and NaN priors are refused there too.
//
// Templated on float and double (explicit instantiations in the .cpp): the engine runs float32, the
// finite-difference test runs the same code in double.
// PyTorch equivalent: F.cross_entropy(x + log_prior, y, reduction="mean")
#pragma once

#include <cstdint>

namespace bastion {

template <typename T>
double balanced_softmax_forward_cpu(T* probs, const T* x, const int32_t* y, const T* log_prior, int64_t N,
                                    int64_t C);
template <typename T>
void balanced_softmax_backward_cpu(T* dx, const T* probs, const int32_t* y, T grad, int64_t N, int64_t C);

}  // namespace bastion
