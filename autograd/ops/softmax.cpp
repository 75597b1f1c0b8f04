// Recorded log-softmax, cross-entropy and KL divergence. Math: kernels/cpu/softmax.h; the CUDA twins
// (kernels/cuda/softmax.h) keep the loss and its gradient on the device, so a training step never waits
// for the GPU until the caller asks for the loss value.
#include <memory>

#include "autograd/ops.h"
#include "kernels/cpu/softmax.h"
#include "kernels/cuda/softmax.h"

namespace bastion {

namespace {
// Labels are host int32 (LabelTensor); the CUDA kernels read a device copy that lives as long as the
// backward closure that needs it.
std::shared_ptr<int32_t> labels_on_device(const LabelTensor& y) {
  const size_t bytes = static_cast<size_t>(y.size()) * sizeof(int32_t);
  std::shared_ptr<int32_t> labels(static_cast<int32_t*>(cuda_allocate(bytes)), [](int32_t* p) { cuda_release(p); });
  cuda_copy_to_device(labels.get(), y.data(), bytes, cuda_stream());
  return labels;
}

Tensor cross_entropy_cuda(const Tensor& logits, const LabelTensor& y, int64_t N, int64_t C) {
  std::shared_ptr<int32_t> labels = labels_on_device(y);
  Tensor probs = Tensor::empty(logits.shape(), Device::CUDA), out = Tensor::empty({1}, Device::CUDA);
  cross_entropy_forward_cuda(out.data(), probs.data(), logits.data(), labels.get(), N, C, cuda_stream());
  return record(out, "cross_entropy", {logits}, [probs, labels, N, C](const Tensor& g, const Node&) {
    Tensor dx = Tensor::empty(probs.shape(), Device::CUDA);
    cross_entropy_backward_cuda(dx.data(), probs.data(), labels.get(), g.data(), N, C, cuda_stream());
    return std::vector<Tensor>{dx};
  });
}
}  // namespace

Tensor log_softmax(const Tensor& x) {
  check_rank(x, 2, "log_softmax", "input");
  const int64_t N = x.size(0), C = x.size(1);
  Tensor out = Tensor::empty(x.shape(), x.device());
  switch (x.device()) {
    case Device::CPU:
      log_softmax_forward_cpu(out.data(), x.data(), N, C);
      break;
    case Device::CUDA:
      log_softmax_forward_cuda(out.data(), x.data(), N, C, cuda_stream());
      break;
  }
  const Tensor saved = out.detach();  // not `out`: see relu
  return record(out, "log_softmax", {x}, [saved, N, C](const Tensor& g, const Node&) {
    Tensor dx = Tensor::empty(saved.shape(), saved.device());
    switch (saved.device()) {
      case Device::CPU:
        log_softmax_backward_cpu(dx.data(), g.data(), saved.data(), N, C);
        break;
      case Device::CUDA:
        log_softmax_backward_cuda(dx.data(), g.data(), saved.data(), N, C, cuda_stream());
        break;
    }
    return std::vector<Tensor>{dx};
  });
}

Tensor cross_entropy(const Tensor& logits, const LabelTensor& y) {
  check_rank(logits, 2, "cross_entropy", "logits");
  const int64_t N = logits.size(0), C = logits.size(1);
  BASTION_CHECK(y.size() == N, "cross_entropy: ", y.size(), " labels for logits ", logits.shape());
  BASTION_CHECK(N > 0, "cross_entropy: empty batch");
  y.check_range(C, "cross_entropy");
  if (logits.device() == Device::CUDA) return cross_entropy_cuda(logits, y, N, C);
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
  check_same_device(student_logits, teacher_logits, "kl_div");
  BASTION_CHECK(temperature > 0.0f, "kl_div: temperature ", temperature, " must be positive");
  const int64_t N = student_logits.size(0), C = student_logits.size(1);
  BASTION_CHECK(N > 0, "kl_div: empty batch");
  const Device device = student_logits.device();
  Tensor log_ps = Tensor::empty(student_logits.shape(), device), log_pt = Tensor::empty(student_logits.shape(), device);
  Tensor out;
  switch (device) {
    case Device::CPU:
      out = Tensor::full({1}, static_cast<float>(kl_div_forward_cpu(log_ps.data(), log_pt.data(), student_logits.data(),
                                                                    teacher_logits.data(), temperature, N, C)));
      break;
    case Device::CUDA:
      out = Tensor::empty({1}, Device::CUDA);
      kl_div_forward_cuda(out.data(), log_ps.data(), log_pt.data(), student_logits.data(), teacher_logits.data(),
                          temperature, N, C, cuda_stream());
      break;
  }
  return record(out, "kl_div", {student_logits, teacher_logits},
                [log_ps, log_pt, temperature, N, C, device](const Tensor& g, const Node& node) {
                  Tensor ds = node.needs_grad[0] ? Tensor::empty(log_ps.shape(), device) : Tensor();
                  Tensor dt = node.needs_grad[1] ? Tensor::empty(log_ps.shape(), device) : Tensor();
                  switch (device) {
                    case Device::CPU:
                      kl_div_backward_cpu(data_or_null(ds), data_or_null(dt), log_ps.data(), log_pt.data(), temperature,
                                          g.item(), N, C);
                      break;
                    case Device::CUDA:
                      kl_div_backward_cuda(data_or_null(ds), data_or_null(dt), log_ps.data(), log_pt.data(),
                                           temperature, g.data(), N, C, cuda_stream());
                      break;
                  }
                  return std::vector<Tensor>{ds, dt};
                });
}

}  // namespace bastion
