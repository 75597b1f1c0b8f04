// Recorded elementwise ops and reductions. Kernels: kernels/cpu/elementwise.cpp, kernels/cuda/elementwise.cu.
#include "autograd/ops.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/elementwise.h"

namespace bastion {

void require_cpu(const Tensor& t, const char* op) {
  BASTION_CHECK(t.device() == Device::CPU, op, ": runs on the CPU only; got a ", device_name(t.device()), " tensor");
}

namespace {
void check_binary(const Tensor& a, const Tensor& b, const char* op) {
  check_same_shape(a, b, op);
  check_same_device(a, b, op);
}

// out = a (+|-|*) b on the tensors' device.
enum class Binary { Add, Sub, Mul };
void binary_kernel(Binary kind, const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t n = out.numel();
  switch (out.device()) {
    case Device::CPU:
      if (kind == Binary::Add) add_cpu(out.data(), a.data(), b.data(), n);
      if (kind == Binary::Sub) sub_cpu(out.data(), a.data(), b.data(), n);
      if (kind == Binary::Mul) mul_cpu(out.data(), a.data(), b.data(), n);
      break;
    case Device::CUDA:
      if (kind == Binary::Add) add_cuda(out.data(), a.data(), b.data(), n, cuda_stream());
      if (kind == Binary::Sub) sub_cuda(out.data(), a.data(), b.data(), n, cuda_stream());
      if (kind == Binary::Mul) mul_cuda(out.data(), a.data(), b.data(), n, cuda_stream());
      break;
  }
}

Tensor binary(Binary kind, const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(a.shape(), a.device());
  binary_kernel(kind, out, a, b);
  return out;
}

Tensor scaled(const Tensor& a, float alpha) {
  Tensor out = Tensor::empty(a.shape(), a.device());
  switch (a.device()) {
    case Device::CPU:
      scale_cpu(out.data(), a.data(), alpha, a.numel());
      break;
    case Device::CUDA:
      scale_cuda(out.data(), a.data(), alpha, a.numel(), cuda_stream());
      break;
  }
  return out;
}
}  // namespace

void add_inplace(const Tensor& dst, const Tensor& src) {
  BASTION_CHECK(dst.numel() == src.numel(), "add_inplace: ", src.shape(), " into ", dst.shape());
  check_same_device(dst, src, "add_inplace");
  switch (dst.device()) {
    case Device::CPU:
      add_inplace_cpu(dst.data(), src.data(), dst.numel());
      break;
    case Device::CUDA:
      add_inplace_cuda(dst.data(), src.data(), dst.numel(), cuda_stream());
      break;
  }
}

Tensor add_values(const Tensor& a, const Tensor& b) {
  BASTION_CHECK(a.numel() == b.numel(), "add_values: ", a.shape(), " + ", b.shape());
  check_same_device(a, b, "add_values");
  return binary(Binary::Add, a, b);
}

Tensor add(const Tensor& a, const Tensor& b) {
  check_binary(a, b, "add");
  Tensor out = binary(Binary::Add, a, b);
  return record(out, "add", {a, b}, [](const Tensor& g, const Node&) { return std::vector<Tensor>{g, g}; });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  check_binary(a, b, "sub");
  Tensor out = binary(Binary::Sub, a, b);
  return record(out, "sub", {a, b}, [](const Tensor& g, const Node& node) {
    return std::vector<Tensor>{g, node.needs_grad[1] ? scaled(g, -1.0f) : Tensor()};
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  check_binary(a, b, "mul");
  Tensor out = binary(Binary::Mul, a, b);
  return record(out, "mul", {a, b}, [a, b](const Tensor& g, const Node& node) {
    Tensor da = node.needs_grad[0] ? binary(Binary::Mul, g, b) : Tensor();
    Tensor db = node.needs_grad[1] ? binary(Binary::Mul, g, a) : Tensor();
    return std::vector<Tensor>{da, db};
  });
}

Tensor scale(const Tensor& a, float alpha) {
  Tensor out = scaled(a, alpha);
  return record(out, "scale", {a},
                [alpha](const Tensor& g, const Node&) { return std::vector<Tensor>{scaled(g, alpha)}; });
}

Tensor sum(const Tensor& a) {
  Tensor out;
  switch (a.device()) {
    case Device::CPU:
      out = Tensor::full({1}, static_cast<float>(sum_cpu(a.data(), a.numel())));
      break;
    case Device::CUDA:
      out = Tensor::empty({1}, Device::CUDA);
      sum_cuda(out.data(), a.data(), a.numel(), cuda_stream());
      break;
  }
  const Shape shape = a.shape();
  return record(out, "sum", {a}, [shape](const Tensor& g, const Node&) {
    Tensor da = Tensor::empty(shape, g.device());
    switch (g.device()) {
      case Device::CPU:
        da.fill(g.item());
        break;
      case Device::CUDA: {
        // da = g broadcast: scale a ones tensor by the device scalar (no host synchronisation).
        Tensor ones = Tensor::empty(shape, Device::CUDA);
        ones.fill(1.0f);
        scale_by_device_scalar_cuda(da.data(), ones.data(), g.data(), 1.0f, da.numel(), cuda_stream());
        break;
      }
    }
    return std::vector<Tensor>{da};
  });
}

Tensor mean(const Tensor& a) {
  BASTION_CHECK(a.numel() > 0, "mean: empty tensor of shape ", a.shape());
  return scale(sum(a), 1.0f / static_cast<float>(a.numel()));
}

Tensor reshape(const Tensor& a, const Shape& shape) {
  Tensor out = a.view(shape);  // shares storage; checks numel
  const Shape original = a.shape();
  return record(out, "reshape", {a},
                [original](const Tensor& g, const Node&) { return std::vector<Tensor>{g.view(original)}; });
}

Tensor flatten(const Tensor& a) {
  BASTION_CHECK(a.rank() >= 1, "flatten: needs a batch dimension, got shape ", a.shape());
  const int64_t n = a.size(0);
  return reshape(a, {n, n == 0 ? 0 : a.numel() / n});
}

}  // namespace bastion
