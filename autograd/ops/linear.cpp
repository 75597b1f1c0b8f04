// linear: y = x @ W^T + b        x (N, in), W (out, in), b (out)       PyTorch: F.linear(x, W, b)
// backward: dx = dy @ W;  dW = dy^T @ x;  db = sum_n dy   (all assigned into fresh tensors)
// Kernels: kernels/cpu/gemm.cpp, kernels/cpu/elementwise.cpp.
#include "autograd/ops.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"

namespace bastion {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_rank(x, 2, "linear", "input");
  check_rank(weight, 2, "linear", "weight");
  check_same_device(x, weight, "linear");
  require_cpu(x, "linear");
  const int64_t N = x.size(0), in = x.size(1), out_features = weight.size(0);
  BASTION_CHECK(weight.size(1) == in, "linear: input ", x.shape(), " does not match weight ", weight.shape());
  if (bias.defined()) {
    check_rank(bias, 1, "linear", "bias");
    BASTION_CHECK(bias.size(0) == out_features, "linear: bias ", bias.shape(), " for weight ", weight.shape());
  }
  Tensor y = Tensor::empty({N, out_features});
  gemm_cpu(false, true, N, out_features, in, 1.0f, x.data(), in, weight.data(), in, 0.0f, y.data(), out_features);
  if (bias.defined()) add_row_bias_cpu(y.data(), bias.data(), N, out_features);
  return record(y, "linear", {x, weight, bias}, [x, weight](const Tensor& g, const Node& node) {
    const int64_t N = x.size(0), in = x.size(1), out_features = weight.size(0);
    Tensor dx, dw, db;
    if (node.needs_grad[0]) {
      dx = Tensor::empty(x.shape());
      gemm_cpu(false, false, N, in, out_features, 1.0f, g.data(), out_features, weight.data(), in, 0.0f, dx.data(),
               in);
    }
    if (node.needs_grad[1]) {
      dw = Tensor::empty(weight.shape());
      gemm_cpu(true, false, out_features, in, N, 1.0f, g.data(), out_features, x.data(), in, 0.0f, dw.data(), in);
    }
    if (node.needs_grad[2]) {
      db = Tensor::empty({out_features});
      sum_rows_cpu(db.data(), g.data(), N, out_features);
    }
    return std::vector<Tensor>{dx, dw, db};
  });
}

}  // namespace bastion
