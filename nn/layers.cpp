#include "nn/layers.h"

#include <cmath>

namespace bastion {

namespace {
Tensor uniform_init(const Shape& shape, int64_t fan_in, Generator& gen) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  return Tensor::uniform(shape, gen, -bound, bound);
}
}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, Generator& gen, bool with_bias) {
  BASTION_CHECK(in_features > 0 && out_features > 0, "Linear: sizes must be positive, got ", in_features, " -> ",
                out_features);
  weight = register_parameter("weight", uniform_init({out_features, in_features}, in_features, gen));
  if (with_bias) bias = register_parameter("bias", uniform_init({out_features}, in_features, gen));
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight, bias); }

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, Generator& gen, int64_t stride_,
               int64_t padding_, bool with_bias, ConvInit init)
    : stride(stride_), padding(padding_) {
  BASTION_CHECK(in_channels > 0 && out_channels > 0 && kernel > 0, "Conv2d: channels and kernel must be positive");
  const Shape shape{out_channels, in_channels, kernel, kernel};
  const int64_t fan_in = in_channels * kernel * kernel;
  if (init == ConvInit::KaimingNormalFanOut) {
    const float stddev = std::sqrt(2.0f / static_cast<float>(out_channels * kernel * kernel));
    weight = register_parameter("weight", Tensor::randn(shape, gen, 0.0f, stddev));
  } else {
    weight = register_parameter("weight", uniform_init(shape, fan_in, gen));
  }
  if (with_bias) bias = register_parameter("bias", uniform_init({out_channels}, fan_in, gen));
}

Tensor Conv2d::forward(const Tensor& x) { return conv2d(x, weight, bias, stride, padding); }

BatchNorm::BatchNorm(int64_t channels, float momentum_, float eps_) : momentum(momentum_), eps(eps_) {
  weight = register_parameter("weight", Tensor::full({channels}, 1.0f));
  bias = register_parameter("bias", Tensor::zeros({channels}));
  running_mean = register_buffer("running_mean", Tensor::zeros({channels}));
  running_var = register_buffer("running_var", Tensor::full({channels}, 1.0f));
}

Tensor BatchNorm::forward(const Tensor& x) {
  if (is_training()) num_batches_tracked++;
  return batch_norm(x, weight, bias, running_mean, running_var, is_training(), momentum, eps);
}

void BatchNorm::collect_counters(std::vector<std::pair<std::string, int64_t*>>& out, const std::string& prefix) {
  out.emplace_back(prefix.empty() ? "num_batches_tracked" : prefix + ".num_batches_tracked", &num_batches_tracked);
}

Sequential& Sequential::add(std::shared_ptr<Module> layer) {
  register_module(std::to_string(layers_.size()), layer);
  layers_.push_back(std::move(layer));
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& layer : layers_) h = layer->forward(h);
  return h;
}

BasicBlock::BasicBlock(int64_t in_channels, int64_t out_channels, int64_t stride, Generator& gen) {
  const ConvInit init = ConvInit::KaimingNormalFanOut;
  conv1_ =
      register_module("conv1", std::make_shared<Conv2d>(in_channels, out_channels, 3, gen, stride, 1, false, init));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm>(out_channels));
  conv2_ = register_module("conv2", std::make_shared<Conv2d>(out_channels, out_channels, 3, gen, 1, 1, false, init));
  bn2_ = register_module("bn2", std::make_shared<BatchNorm>(out_channels));
  if (stride != 1 || in_channels != out_channels) {
    auto shortcut = std::make_shared<Sequential>();
    shortcut->add(std::make_shared<Conv2d>(in_channels, out_channels, 1, gen, stride, 0, false, init));
    shortcut->add(std::make_shared<BatchNorm>(out_channels));
    downsample_ = register_module("downsample", shortcut);
  }
}

Tensor BasicBlock::forward(const Tensor& x) {
  Tensor h = relu(bn1_->forward(conv1_->forward(x)));
  h = bn2_->forward(conv2_->forward(h));
  return relu(add(h, downsample_ ? downsample_->forward(x) : x));
}

}  // namespace bastion
