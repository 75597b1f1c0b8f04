// linear: y = x @ W^T + b        x (N, in), W (out, in), b (out)       PyTorch: F.linear(x, W, b)
// backward: dx = dy @ W;  dW = dy^T @ x;  db = sum_n dy   (assigned into fresh tensors, except that dW
// is ADDED straight into a leaf weight's existing .grad: what the engine's accumulation would do, minus a
// temporary of the weight's size and three passes over it; add_inplace_cpu alone was 4.6 % of a cnn-fedfsa
// step, with its 1024x1024 fc2, in perf before this change)
// Kernels: kernels/{cpu,cuda}/gemm and elementwise.
#include "autograd/flops.h"
#include "autograd/ops.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm.h"

namespace bastion {

namespace {
// C = op(A) @ op(B) + beta C on the tensors' device.
void gemm(Device device, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
          const float* B, int64_t ldb, float* C, int64_t ldc, float beta = 0.0f) {
  switch (device) {
    case Device::CPU:
      gemm_cpu(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
      break;
    case Device::CUDA:
      gemm_cuda(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc, cuda_stream());
      break;
  }
}

// The leaf weight's gradient buffer when the weight gradient can be added into it directly.
Tensor accumulation_target(const Tensor& weight) {
  if (!weight.is_leaf()) return Tensor();
  Tensor grad = weight.grad();
  const bool usable = grad.defined() && grad.numel() == weight.numel() && grad.device() == weight.device();
  return usable ? grad : Tensor();
}
}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_rank(x, 2, "linear", "input");
  check_rank(weight, 2, "linear", "weight");
  check_same_device(x, weight, "linear");
  const int64_t N = x.size(0), in = x.size(1), out_features = weight.size(0);
  BASTION_CHECK(weight.size(1) == in, "linear: input ", x.shape(), " does not match weight ", weight.shape());
  if (bias.defined()) {
    check_rank(bias, 1, "linear", "bias");
    check_same_device(x, bias, "linear");
    BASTION_CHECK(bias.size(0) == out_features, "linear: bias ", bias.shape(), " for weight ", weight.shape());
  }
  const Device device = x.device();
  count_flops(linear_flops(N, in, out_features));
  Tensor y = Tensor::empty({N, out_features}, device);
  gemm(device, false, true, N, out_features, in, x.data(), in, weight.data(), in, y.data(), out_features);
  if (bias.defined()) {
    switch (device) {
      case Device::CPU:
        add_row_bias_cpu(y.data(), bias.data(), N, out_features);
        break;
      case Device::CUDA:
        add_row_bias_cuda(y.data(), bias.data(), N, out_features, cuda_stream());
        break;
    }
  }
  return record(y, "linear", {x, weight, bias}, [x, weight, device](const Tensor& g, const Node& node) {
    const int64_t N = x.size(0), in = x.size(1), out_features = weight.size(0);
    Tensor dx, dw, db;
    if (node.needs_grad[0]) {
      dx = Tensor::empty(x.shape(), device);
      gemm(device, false, false, N, in, out_features, g.data(), out_features, weight.data(), in, dx.data(), in);
    }
    if (node.needs_grad[1]) {
      if (Tensor target = accumulation_target(weight); target.defined()) {
        gemm(device, true, false, out_features, in, N, g.data(), out_features, x.data(), in, target.data(), in, 1.0f);
      } else {
        dw = Tensor::empty(weight.shape(), device);
        gemm(device, true, false, out_features, in, N, g.data(), out_features, x.data(), in, dw.data(), in);
      }
    }
    if (node.needs_grad[2]) {
      db = Tensor::empty({out_features}, device);
      switch (device) {
        case Device::CPU:
          sum_rows_cpu(db.data(), g.data(), N, out_features);
          break;
        case Device::CUDA:
          sum_rows_cuda(db.data(), g.data(), N, out_features, cuda_stream());
          break;
      }
    }
    count_flops(linear_flops(N, in, out_features) * ((node.needs_grad[0] ? 1 : 0) + (node.needs_grad[1] ? 1 : 0)));
    return std::vector<Tensor>{dx, dw, db};
  });
}

}  // namespace bastion
