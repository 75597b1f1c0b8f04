// Recorded conv2d. Math, layouts and the im2col+GEMM plan: kernels/cpu/conv.h, kernels/cuda/conv.h.
#include "autograd/flops.h"
#include "autograd/ops.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/conv_blocked.h"
#include "kernels/cpu/conv_direct.h"
#include "kernels/cpu/conv_winograd.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cuda/conv.h"

namespace bastion {

namespace {

// One pass (forward, input gradient or weight gradient) multiplies every output by C R S weights.
int64_t conv2d_pass_flops(const Conv2dGeometry& g) { return 2 * g.N * g.K * g.crs() * g.out_plane(); }

void count_conv2d_backward_flops(const Conv2dGeometry& g, const Node& node) {
  count_flops(conv2d_pass_flops(g) * ((node.needs_grad[0] ? 1 : 0) + (node.needs_grad[1] ? 1 : 0)));
}

// One of the CPU paths that need no kept state between the passes: its kernels and their workspaces.
// The thread count is read when each pass runs; the kernels use at most that many threads.
struct ConvCpuPath {
  int64_t (*forward_workspace)(const Conv2dGeometry& g, int threads);
  void (*forward)(float* out, const float* in, const float* weight, const float* bias, const Conv2dGeometry& g,
                  float* workspace, int threads);
  int64_t (*backward_workspace)(const Conv2dGeometry& g, int threads);
  void (*backward)(float* grad_in, float* grad_weight, float* grad_bias, const float* grad_out, const float* in,
                   const float* weight, const Conv2dGeometry& g, float* workspace, int threads);
};

// The small stride-1 layers of FL's CNNs: register-blocked direct loops (kernels/cpu/conv_direct.h).
constexpr ConvCpuPath kDirectPath{
    conv2d_direct_workspace_floats,
    [](float* out, const float* in, const float* w, const float* b, const Conv2dGeometry& g, float* ws, int threads) {
      conv2d_direct_forward_cpu(out, in, w, b, g, ws, threads);
    },
    conv2d_direct_workspace_floats,
    [](float* gi, float* gw, float* gb, const float* dy, const float* in, const float* w, const Conv2dGeometry& g,
       float* ws, int threads) { conv2d_direct_backward_cpu(gi, gw, gb, dy, in, w, g, ws, threads); }};

// ResNet's 3x3 layers (stride 1 and 2, channels multiples of 16): channel-blocked loops
// (kernels/cpu/conv_blocked.h), where conv2d_blocked_preferred says its ladder wins.
constexpr ConvCpuPath kBlockedPath{
    [](const Conv2dGeometry& g, int) { return conv2d_blocked_forward_workspace_floats(g); },
    [](float* out, const float* in, const float* w, const float* b, const Conv2dGeometry& g, float* ws, int threads) {
      conv2d_blocked_forward_cpu(out, in, w, b, g, ws, threads);
    },
    [](const Conv2dGeometry& g, int) { return conv2d_blocked_workspace_floats(g); },
    [](float* gi, float* gw, float* gb, const float* dy, const float* in, const float* w, const Conv2dGeometry& g,
       float* ws, int threads) { conv2d_blocked_backward_cpu(gi, gw, gb, dy, in, w, g, ws, threads); }};

// ResNet's stride-1 3x3 layers by Winograd F(2x2, 3x3) (kernels/cpu/conv_winograd.h), where
// conv2d_winograd_preferred says its ladder wins.
constexpr ConvCpuPath kWinogradPath{
    [](const Conv2dGeometry& g, int) { return conv2d_winograd_workspace_floats(g); }, conv2d_winograd_forward_cpu,
    [](const Conv2dGeometry& g, int) { return conv2d_winograd_workspace_floats(g); }, conv2d_winograd_backward_cpu};

Tensor conv2d_by_path(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dGeometry& g,
                      const ConvCpuPath& path) {
  Tensor out = Tensor::empty({g.N, g.K, g.OH, g.OW});
  {
    const int threads = num_threads();
    Tensor workspace = Tensor::empty({path.forward_workspace(g, threads)});
    path.forward(out.data(), x.data(), weight.data(), data_or_null(bias), g, workspace.data(), threads);
  }
  return record(out, "conv2d", {x, weight, bias}, [x, weight, g, path](const Tensor& grad, const Node& node) {
    Tensor dx = node.needs_grad[0] ? Tensor::empty(x.shape()) : Tensor();
    Tensor dw = node.needs_grad[1] ? Tensor::empty(weight.shape()) : Tensor();
    Tensor db = node.needs_grad[2] ? Tensor::empty({g.K}) : Tensor();
    const int threads = num_threads();
    Tensor workspace = Tensor::empty({path.backward_workspace(g, threads)});
    path.backward(data_or_null(dx), data_or_null(dw), data_or_null(db), grad.data(), x.data(), weight.data(), g,
                  workspace.data(), threads);
    count_conv2d_backward_flops(g, node);
    return std::vector<Tensor>{dx, dw, db};
  });
}

Tensor conv2d_cpu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dGeometry& g) {
  if (conv2d_winograd_preferred(g)) return conv2d_by_path(x, weight, bias, g, kWinogradPath);
  if (conv2d_blocked_preferred(g)) return conv2d_by_path(x, weight, bias, g, kBlockedPath);
  if (conv2d_direct_preferred(g)) return conv2d_by_path(x, weight, bias, g, kDirectPath);
  Tensor out = Tensor::empty({g.N, g.K, g.OH, g.OW});
  Tensor workspace = Tensor::empty({conv2d_workspace_floats(g)});
  conv2d_forward_cpu(out.data(), x.data(), weight.data(), data_or_null(bias), g, workspace.data());
  // When the batch is one chunk the workspace ends the forward holding its columns; keeping it for the
  // backward saves the weight gradient's im2col (~10 % of a LeNet step; memory: one chunk, <= 16 MiB).
  const bool keep_columns = grad_enabled() && weight.requires_grad() && conv2d_chunk_samples(g) >= g.N;
  if (!keep_columns) workspace = Tensor();
  return record(out, "conv2d", {x, weight, bias}, [x, weight, g, workspace](const Tensor& grad, const Node& node) {
    Tensor dx = node.needs_grad[0] ? Tensor::empty(x.shape()) : Tensor();
    Tensor dw = node.needs_grad[1] ? Tensor::empty(weight.shape()) : Tensor();
    Tensor db = node.needs_grad[2] ? Tensor::empty({g.K}) : Tensor();
    const bool holds_cols = workspace.defined();
    Tensor scratch = holds_cols ? workspace : Tensor::empty({conv2d_workspace_floats(g)});
    conv2d_backward_cpu(data_or_null(dx), data_or_null(dw), data_or_null(db), grad.data(), x.data(), weight.data(), g,
                        scratch.data(), holds_cols && dw.defined());
    count_conv2d_backward_flops(g, node);
    return std::vector<Tensor>{dx, dw, db};
  });
}

// The workspace is taken from the caching allocator per call (no cudaMalloc after the first step).
Tensor conv2d_cuda(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dGeometry& g) {
  Tensor out = Tensor::empty({g.N, g.K, g.OH, g.OW}, Device::CUDA);
  {
    Tensor workspace = Tensor::empty({conv2d_cuda_workspace_floats(g)}, Device::CUDA);
    conv2d_forward_cuda(out.data(), x.data(), weight.data(), data_or_null(bias), g, workspace.data(), cuda_stream());
  }
  return record(out, "conv2d", {x, weight, bias}, [x, weight, g](const Tensor& grad, const Node& node) {
    Tensor dx = node.needs_grad[0] ? Tensor::empty(x.shape(), Device::CUDA) : Tensor();
    Tensor dw = node.needs_grad[1] ? Tensor::empty(weight.shape(), Device::CUDA) : Tensor();
    Tensor db = node.needs_grad[2] ? Tensor::empty({g.K}, Device::CUDA) : Tensor();
    Tensor workspace = Tensor::empty({conv2d_cuda_workspace_floats(g)}, Device::CUDA);
    conv2d_backward_cuda(data_or_null(dx), data_or_null(dw), data_or_null(db), grad.data(), x.data(), weight.data(), g,
                         workspace.data(), cuda_stream());
    count_conv2d_backward_flops(g, node);
    return std::vector<Tensor>{dx, dw, db};
  });
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding) {
  check_rank(x, 4, "conv2d", "input");
  check_rank(weight, 4, "conv2d", "weight");
  check_same_device(x, weight, "conv2d");
  BASTION_CHECK(x.size(1) == weight.size(1), "conv2d: input ", x.shape(), " has ", x.size(1), " channels but weight ",
                weight.shape(), " expects ", weight.size(1));
  if (bias.defined()) {
    check_rank(bias, 1, "conv2d", "bias");
    check_same_device(x, bias, "conv2d");
    BASTION_CHECK(bias.size(0) == weight.size(0), "conv2d: bias ", bias.shape(), " for weight ", weight.shape());
  }
  const Conv2dGeometry g = conv2d_geometry(x.size(0), x.size(1), x.size(2), x.size(3), weight.size(0), weight.size(2),
                                           weight.size(3), stride, padding);
  count_flops(conv2d_pass_flops(g));
  switch (x.device()) {
    case Device::CPU:
      return conv2d_cpu(x, weight, bias, g);
    case Device::CUDA:
      return conv2d_cuda(x, weight, bias, g);
  }
  BASTION_FAIL("conv2d: unknown device");
}

}  // namespace bastion
