// Layers with PyTorch's parameter names, shapes and default initialisation:
//   Linear    weight (out, in), bias (out)        U(-1/sqrt(in), 1/sqrt(in)) for both (kaiming_uniform a=sqrt(5))
//   Conv2d    weight (K, C, R, S), bias (K)        U(-1/sqrt(C*R*S), ..) likewise; or kaiming-normal fan_out
//                                                  (torchvision ResNet), chosen by ConvInit
//   BatchNorm weight=1, bias=0 (C); buffers running_mean=0, running_var=1; num_batches_tracked counter
// Stateless layers (ReLU, pools, Flatten, Dropout) have no parameters, so PyTorch's Sequential indices
// still line up ("features.0.weight" style names when used inside Sequential).
#pragma once

#include <functional>

#include "autograd/ops.h"
#include "nn/module.h"

namespace bastion {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, Generator& gen, bool bias = true);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;
};

enum class ConvInit { PyTorchDefault, KaimingNormalFanOut };

class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, Generator& gen, int64_t stride = 1,
         int64_t padding = 0, bool bias = true, ConvInit init = ConvInit::PyTorchDefault);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;
  int64_t stride, padding;
};

class BatchNorm : public Module {  // BatchNorm1d on (N, C) and BatchNorm2d on (N, C, H, W)
 public:
  explicit BatchNorm(int64_t channels, float momentum = 0.1f, float eps = 1e-5f);
  Tensor forward(const Tensor& x) override;
  void collect_counters(std::vector<std::pair<std::string, int64_t*>>& out, const std::string& prefix) override;
  Tensor weight, bias, running_mean, running_var;
  int64_t num_batches_tracked = 0;
  float momentum, eps;
};
using BatchNorm1d = BatchNorm;
using BatchNorm2d = BatchNorm;

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return relu(x); }
};

class MaxPool2d : public Module {
 public:
  MaxPool2d(int64_t kernel, int64_t stride, int64_t padding = 0) : kernel(kernel), stride(stride), padding(padding) {}
  Tensor forward(const Tensor& x) override { return max_pool2d(x, kernel, stride, padding); }
  int64_t kernel, stride, padding;
};

// max_pool2d(relu(x)) with non-overlapping windows, computed as relu(max_pool2d(x)): ReLU and max commute
// (both monotone), so values and gradients are bitwise the same. The pool sends the gradient to its
// window's first maximum in either order, and where that maximum is <= 0 the ReLU makes it +0 in either
// order. Only NaN inputs can differ (the written order turns NaN into 0 before the pool). The ReLU
// then runs on a kernel^2 times smaller tensor: for cnn-fedcap's conv1 (32 x 28 x 28 per sample)
// that is most of the ReLU forward + backward, 7.1 % of a step in perf (Intel Xeon, 2026-11-26).
inline Tensor max_pool2d_of_relu(const Tensor& x, int64_t kernel) { return relu(max_pool2d(x, kernel, kernel)); }

class AvgPool2d : public Module {
 public:
  AvgPool2d(int64_t kernel, int64_t stride, int64_t padding = 0) : kernel(kernel), stride(stride), padding(padding) {}
  Tensor forward(const Tensor& x) override { return avg_pool2d(x, kernel, stride, padding); }
  int64_t kernel, stride, padding;
};

class AdaptiveAvgPool2d : public Module {  // output size 1 only, the one every model here uses
 public:
  Tensor forward(const Tensor& x) override { return global_avg_pool2d(x); }
};

class Flatten : public Module {
 public:
  Tensor forward(const Tensor& x) override { return flatten(x); }
};

class Dropout : public Module {
 public:
  Dropout(float p, uint64_t seed) : p(p), gen(seed) {}
  void reseed_dropout(uint64_t seed) override { gen.reseed(seed); }
  Tensor forward(const Tensor& x) override { return dropout(x, p, is_training(), gen); }
  float p;
  Generator gen;  // reseeded by Module::reseed_dropout for reproducible runs
};

class Sequential : public Module {
 public:
  // Children are named "0", "1", ... as in torch.nn.Sequential.
  Sequential& add(std::shared_ptr<Module> layer);
  Tensor forward(const Tensor& x) override;

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

// torchvision's BasicBlock: conv3x3-BN-ReLU-conv3x3-BN + shortcut, then ReLU. The shortcut is the
// identity, or "downsample" = Sequential(conv1x1 stride s, BN) when the shape changes.
class BasicBlock : public Module {
 public:
  BasicBlock(int64_t in_channels, int64_t out_channels, int64_t stride, Generator& gen);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<Conv2d> conv1_, conv2_;
  std::shared_ptr<BatchNorm> bn1_, bn2_;
  std::shared_ptr<Sequential> downsample_;
};

}  // namespace bastion
