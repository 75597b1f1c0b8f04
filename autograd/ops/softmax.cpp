// Recorded log-softmax, cross-entropy and KL divergence. Math: kernels/cpu/softmax.h.
#include "autograd/ops.h"
#include "kernels/cpu/softmax.h"

namespace bastion {

Tensor log_softmax(const Tensor& x) {
  check_rank(x, 2, "log_softmax", "input");
  require_cpu(x, "log_softmax");
  const int64_t N = x.size(0), C = x.size(1);
  Tensor out = Tensor::empty(x.shape());
  log_softmax_forward_cpu(out.data(), x.data(), N, C);
  const Tensor saved = out.detach();  // not `out`: see relu
  return record(out, "log_softmax", {x}, [saved, N, C](const Tensor& g, const Node&) {
    Tensor dx = Tensor::empty(saved.shape());
    log_softmax_backward_cpu(dx.data(), g.data(), saved.data(), N, C);
    return std::vector<Tensor>{dx};
  });
}

Tensor cross_entropy(const Tensor& logits, const LabelTensor& y) {
  check_rank(logits, 2, "cross_entropy", "logits");
  require_cpu(logits, "cross_entropy");
  const int64_t N = logits.size(0), C = logits.size(1);
  BASTION_CHECK(y.size() == N, "cross_entropy: ", y.size(), " labels for logits ", logits.shape());
  BASTION_CHECK(N > 0, "cross_entropy: empty batch");
  y.check_range(C, "cross_entropy");
  Tensor probs = Tensor::empty(logits.shape());
  const double loss = cross_entropy_forward_cpu(probs.data(), logits.data(), y.data(), N, C);
  Tensor out = Tensor::full({1}, static_cast<float>(loss));
  return record(out, "cross_entropy", {logits}, [probs, y, N, C](const Tensor& g, const Node&) {
    Tensor dx = Tensor::empty(probs.shape());
    cross_entropy_backward_cpu(dx.data(), probs.data(), y.data(), g.item(), N, C);
    return std::vector<Tensor>{dx};
  });
}

Tensor kl_div(const Tensor& student_logits, const Tensor& teacher_logits, float temperature) {
  check_rank(student_logits, 2, "kl_div", "student logits");
  check_same_shape(student_logits, teacher_logits, "kl_div");
  require_cpu(student_logits, "kl_div");
  require_cpu(teacher_logits, "kl_div");
  BASTION_CHECK(temperature > 0.0f, "kl_div: temperature ", temperature, " must be positive");
  const int64_t N = student_logits.size(0), C = student_logits.size(1);
  BASTION_CHECK(N > 0, "kl_div: empty batch");
  Tensor log_ps = Tensor::empty(student_logits.shape()), log_pt = Tensor::empty(student_logits.shape());
  const double loss = kl_div_forward_cpu(log_ps.data(), log_pt.data(), student_logits.data(), teacher_logits.data(),
                                         temperature, N, C);
  Tensor out = Tensor::full({1}, static_cast<float>(loss));
  return record(out, "kl_div", {student_logits, teacher_logits},
                [log_ps, log_pt, temperature, N, C](const Tensor& g, const Node& node) {
                  Tensor ds = node.needs_grad[0] ? Tensor::empty(log_ps.shape()) : Tensor();
                  Tensor dt = node.needs_grad[1] ? Tensor::empty(log_ps.shape()) : Tensor();
                  kl_div_backward_cpu(ds.defined() ? ds.data() : nullptr, dt.defined() ? dt.data() : nullptr,
                                      log_ps.data(), log_pt.data(), temperature, g.item(), N, C);
                  return std::vector<Tensor>{ds, dt};
                });
}

}  // namespace bastion
