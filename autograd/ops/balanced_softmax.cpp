// Recorded balanced-softmax cross-entropy (Ren et al., NeurIPS'20 "Balanced Meta-Softmax"; FedRoD's loss on
// its generic head, PFL-FACTS §8): cross-entropy on the logits shifted by the log class prior,
//   loss = mean_n(-log softmax(x[n] + log_prior)[y[n]]);  logits (N, C), y (N), log_prior (C) on the host,
//   log_prior[c] = log n_c (class counts; -inf for a class with n_c = 0, PFLlib's log 0).
// Built from `add` and `cross_entropy` (their kernels, CPU and CUDA): the prior is a constant shift, so the
// gradient is cross-entropy's dx = (probs - onehot(y)) * g / N on the shifted probabilities, and no
// gradient reaches the prior. An absent class has a shifted logit of -inf: the softmax kernels give it
// probability exactly 0 and gradient exactly 0, provided each row keeps one finite shifted logit, which
// the checks below guarantee before any kernel runs:
//   log_prior has C entries, each finite or -inf, and
//   no label is a class whose log_prior is -inf (its loss would be +inf: the counts do not cover the data).
// PyTorch equivalent: F.cross_entropy(x + log_prior, y, reduction="mean")
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "autograd/ops.h"

namespace bastion {

namespace {
void check_prior(std::span<const float> log_prior, const LabelTensor& y, int64_t C) {
  BASTION_CHECK(static_cast<int64_t>(log_prior.size()) == C, "balanced_softmax_cross_entropy: log_prior of ",
                log_prior.size(), " classes for logits of ", C);
  for (size_t c = 0; c < log_prior.size(); ++c)
    BASTION_CHECK(std::isfinite(log_prior[c]) || log_prior[c] == -std::numeric_limits<float>::infinity(),
                  "balanced_softmax_cross_entropy: log_prior[", c, "] = ", log_prior[c], " (must be finite or -inf)");
  for (int64_t n = 0; n < y.size(); ++n)
    BASTION_CHECK(std::isfinite(log_prior[static_cast<size_t>(y[n])]), "balanced_softmax_cross_entropy: sample ", n,
                  " has label ", y[n],
                  ", a class with no count (log prior -inf): its loss would be infinite; the class "
                  "counts must cover every label trained on");
}

// The prior repeated over the N rows, on `device`: a constant (no gradient), so `add` passes g to the logits.
Tensor prior_rows(std::span<const float> log_prior, int64_t N, Device device) {
  const int64_t C = static_cast<int64_t>(log_prior.size());
  std::vector<float> rows(static_cast<size_t>(N * C));
  for (int64_t n = 0; n < N; ++n) std::copy(log_prior.begin(), log_prior.end(), rows.begin() + n * C);
  return Tensor::from_vector({N, C}, rows).to(device);
}
}  // namespace

Tensor balanced_softmax_cross_entropy(const Tensor& logits, const LabelTensor& y, std::span<const float> log_prior) {
  check_rank(logits, 2, "balanced_softmax_cross_entropy", "logits");
  const int64_t N = logits.size(0), C = logits.size(1);
  BASTION_CHECK(y.size() == N, "balanced_softmax_cross_entropy: ", y.size(), " labels for logits ", logits.shape());
  BASTION_CHECK(N > 0, "balanced_softmax_cross_entropy: empty batch");
  y.check_range(C, "balanced_softmax_cross_entropy");
  check_prior(log_prior, y, C);
  return cross_entropy(add(logits, prior_rows(log_prior, N, logits.device())), y);
}

std::vector<float> balanced_softmax_log_prior(std::span<const int64_t> counts) {
  std::vector<float> log_prior(counts.size());
  for (size_t c = 0; c < counts.size(); ++c) {
    BASTION_CHECK(counts[c] >= 0, "balanced_softmax_log_prior: class ", c, " has count ", counts[c]);
    log_prior[c] = counts[c] > 0 ? static_cast<float>(std::log(static_cast<double>(counts[c])))
                                 : -std::numeric_limits<float>::infinity();
  }
  return log_prior;
}

}  // namespace bastion
