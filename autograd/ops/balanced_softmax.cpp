// Recorded balanced-softmax cross-entropy (FedRoD's generic-head loss). Math and the handling of absent
// classes: kernels/cpu/balanced_softmax.h; CUDA twin: kernels/cuda/balanced_softmax.h.
//   loss = mean_n(-log softmax(x[n] + log_prior)[y[n]]);  logits (N, C), y (N), log_prior (C) on the host
// Saves probs (N, C); the backward ASSIGNS dx = (probs - onehot(y)) * g / N. No gradient reaches the
// prior (it is data: the client's class counts).
// Checked before any kernel runs, so neither the loss nor the gradient can be NaN or +inf from the prior:
//   log_prior has C entries, each finite or -inf (a class with no sample), and
//   no label is a class whose log_prior is -inf (its loss would be +inf: the counts do not cover the data).
#include <cmath>
#include <limits>
#include <memory>

#include "autograd/ops.h"
#include "kernels/cpu/balanced_softmax.h"
#include "kernels/cuda/balanced_softmax.h"

namespace bastion {

namespace {
// A device copy of `count` host values that lives as long as the backward closure that reads it.
template <typename T>
std::shared_ptr<T> device_copy(const T* values, int64_t count) {
  const size_t bytes = static_cast<size_t>(count) * sizeof(T);
  std::shared_ptr<T> copy(static_cast<T*>(cuda_allocate(bytes)), [](T* p) { cuda_release(p); });
  cuda_copy_to_device(copy.get(), values, bytes, cuda_stream());
  return copy;
}

void check_prior(std::span<const float> log_prior, const LabelTensor& y, int64_t C) {
  BASTION_CHECK(static_cast<int64_t>(log_prior.size()) == C, "balanced_softmax_cross_entropy: log_prior of ",
                log_prior.size(), " classes for logits of ", C);
  for (size_t c = 0; c < log_prior.size(); ++c)
    BASTION_CHECK(std::isfinite(log_prior[c]) || log_prior[c] == -std::numeric_limits<float>::infinity(),
                  "balanced_softmax_cross_entropy: log_prior[", c, "] = ", log_prior[c], " (must be finite or -inf)");
  for (int64_t n = 0; n < y.size(); ++n)
    BASTION_CHECK(std::isfinite(log_prior[static_cast<size_t>(y[n])]), "balanced_softmax_cross_entropy: sample ", n,
                  " has label ", y[n], ", a class with no count (log prior -inf): its loss would be infinite; the class "
                  "counts must cover every label trained on");
}

Tensor balanced_softmax_cuda(const Tensor& logits, const LabelTensor& y, std::span<const float> log_prior, int64_t N,
                             int64_t C) {
  std::shared_ptr<int32_t> labels = device_copy(y.data(), N);
  const std::shared_ptr<float> prior = device_copy(log_prior.data(), C);
  Tensor probs = Tensor::empty(logits.shape(), Device::CUDA), out = Tensor::empty({1}, Device::CUDA);
  balanced_softmax_forward_cuda(out.data(), probs.data(), logits.data(), labels.get(), prior.get(), N, C, cuda_stream());
  return record(out, "balanced_softmax_cross_entropy", {logits}, [probs, labels, N, C](const Tensor& g, const Node&) {
    Tensor dx = Tensor::empty(probs.shape(), Device::CUDA);
    balanced_softmax_backward_cuda(dx.data(), probs.data(), labels.get(), g.data(), N, C, cuda_stream());
    return std::vector<Tensor>{dx};
  });
}
}  // namespace

Tensor balanced_softmax_cross_entropy(const Tensor& logits, const LabelTensor& y, std::span<const float> log_prior) {
  check_rank(logits, 2, "balanced_softmax_cross_entropy", "logits");
  const int64_t N = logits.size(0), C = logits.size(1);
  BASTION_CHECK(y.size() == N, "balanced_softmax_cross_entropy: ", y.size(), " labels for logits ", logits.shape());
  BASTION_CHECK(N > 0, "balanced_softmax_cross_entropy: empty batch");
  y.check_range(C, "balanced_softmax_cross_entropy");
  check_prior(log_prior, y, C);
  if (logits.device() == Device::CUDA) return balanced_softmax_cuda(logits, y, log_prior, N, C);
  Tensor probs = Tensor::empty(logits.shape());
  const double loss = balanced_softmax_forward_cpu(probs.data(), logits.data(), y.data(), log_prior.data(), N, C);
  Tensor out = Tensor::full({1}, static_cast<float>(loss));
  return record(out, "balanced_softmax_cross_entropy", {logits}, [probs, y, N, C](const Tensor& g, const Node&) {
    Tensor dx = Tensor::empty(probs.shape());
    balanced_softmax_backward_cpu(dx.data(), probs.data(), y.data(), g.item(), N, C);
    return std::vector<Tensor>{dx};
  });
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
