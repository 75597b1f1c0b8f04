// Recorded elementwise ops and reductions. Kernels: kernels/cpu/elementwise.cpp.
#include "autograd/ops.h"
#include "kernels/cpu/elementwise.h"

namespace bastion {

void require_cpu(const Tensor& t, const char* op) {
  BASTION_CHECK(t.device() == Device::CPU, op, ": no CUDA kernel yet for this op (CUDA backend issue)");
}

namespace {
void check_binary(const Tensor& a, const Tensor& b, const char* op) {
  check_same_shape(a, b, op);
  check_same_device(a, b, op);
  require_cpu(a, op);
}
}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  check_binary(a, b, "add");
  Tensor out = Tensor::empty(a.shape());
  add_cpu(out.data(), a.data(), b.data(), a.numel());
  return record(out, "add", {a, b}, [](const Tensor& g, const Node&) { return std::vector<Tensor>{g, g}; });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  check_binary(a, b, "sub");
  Tensor out = Tensor::empty(a.shape());
  sub_cpu(out.data(), a.data(), b.data(), a.numel());
  return record(out, "sub", {a, b}, [](const Tensor& g, const Node& node) {
    Tensor neg;
    if (node.needs_grad[1]) {
      neg = Tensor::empty(g.shape());
      scale_cpu(neg.data(), g.data(), -1.0f, g.numel());
    }
    return std::vector<Tensor>{g, neg};
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  check_binary(a, b, "mul");
  Tensor out = Tensor::empty(a.shape());
  mul_cpu(out.data(), a.data(), b.data(), a.numel());
  return record(out, "mul", {a, b}, [a, b](const Tensor& g, const Node& node) {
    Tensor da, db;
    if (node.needs_grad[0]) {
      da = Tensor::empty(g.shape());
      mul_cpu(da.data(), g.data(), b.data(), g.numel());
    }
    if (node.needs_grad[1]) {
      db = Tensor::empty(g.shape());
      mul_cpu(db.data(), g.data(), a.data(), g.numel());
    }
    return std::vector<Tensor>{da, db};
  });
}

Tensor scale(const Tensor& a, float alpha) {
  require_cpu(a, "scale");
  Tensor out = Tensor::empty(a.shape());
  scale_cpu(out.data(), a.data(), alpha, a.numel());
  return record(out, "scale", {a}, [alpha](const Tensor& g, const Node&) {
    Tensor da = Tensor::empty(g.shape());
    scale_cpu(da.data(), g.data(), alpha, g.numel());
    return std::vector<Tensor>{da};
  });
}

Tensor sum(const Tensor& a) {
  require_cpu(a, "sum");
  Tensor out = Tensor::full({1}, static_cast<float>(sum_cpu(a.data(), a.numel())));
  const Shape shape = a.shape();
  return record(out, "sum", {a}, [shape](const Tensor& g, const Node&) {
    return std::vector<Tensor>{Tensor::full(shape, g.item())};
  });
}

Tensor mean(const Tensor& a) {
  BASTION_CHECK(a.numel() > 0, "mean: empty tensor of shape ", a.shape());
  return scale(sum(a), 1.0f / static_cast<float>(a.numel()));
}

Tensor reshape(const Tensor& a, const Shape& shape) {
  Tensor out = a.view(shape);  // shares storage; checks numel
  const Shape original = a.shape();
  return record(out, "reshape", {a}, [original](const Tensor& g, const Node&) {
    return std::vector<Tensor>{g.view(original)};
  });
}

Tensor flatten(const Tensor& a) {
  BASTION_CHECK(a.rank() >= 1, "flatten: needs a batch dimension, got shape ", a.shape());
  const int64_t n = a.size(0);
  return reshape(a, {n, n == 0 ? 0 : a.numel() / n});
}

}  // namespace bastion
