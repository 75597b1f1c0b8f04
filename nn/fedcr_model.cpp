#include "nn/fedcr_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "kernels/cpu/normal.h"
#include "tensor/error.h"

namespace bastion {

namespace {
constexpr uint64_t kEvalNoiseSeed = 0x66656463725f6576ULL;  // "fedcr_ev": the same eval draws everywhere
constexpr uint64_t kNoiseStream = 0x6e6f697365ULL;          // "noise": training draws, from reseed_dropout
constexpr const char* kPrefix = "cnn-fedcr";

int64_t conv5_pool2(int64_t size) { return (size - 4) / 2; }

// Standard normals by Box-Muller pairs (the cosine and the sine of one draw): half the uniforms and logs of
// Tensor::randn, whose one-value-per-call draws took half of a cnn-fedcr training round (perf, S = 18).
// The uniforms are drawn here in the generator's order (u1 redrawn while 0, then u2, pair by pair) and
// the vector kernel turns them into the floats the scalar formula gives (kernels/cpu/normal.h): its
// log and sincos had become half of a FedCR round again.
Tensor standard_normal(const Shape& shape, Generator& gen) {
  constexpr int64_t kChunkPairs = 512;  // 8 KiB of uniforms on the stack
  Tensor t = Tensor::empty(shape);
  float* p = t.data();
  const int64_t n = t.numel();
  double u1[kChunkPairs], u2[kChunkPairs];
  for (int64_t i0 = 0; i0 < n; i0 += 2 * kChunkPairs) {
    const int64_t count = std::min(2 * kChunkPairs, n - i0), pairs = (count + 1) / 2;
    for (int64_t j = 0; j < pairs; ++j) {
      u1[j] = gen.uniform();
      while (u1[j] <= 0.0) u1[j] = gen.uniform();
      u2[j] = gen.uniform();
    }
    box_muller_cpu(p + i0, u1, u2, count);
  }
  return t;
}

// d_Z and the sample counts are read from the model name: bounded, so a name cannot ask for a model or
// a batch of logits too large to allocate (d_Z 2^61 crashed before these bounds).
constexpr int64_t kMaxLatent = 65536, kMaxSamples = 1024;

int64_t parse_positive(const std::string& name, std::string_view field, int64_t max) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
  BASTION_CHECK(error == std::errc() && end == field.data() + field.size() && value > 0 && value <= max, "model ", name,
                ": expected cnn-fedcr-<d_Z>-<S_train>-<S_test> with positive integers, d_Z <= ", kMaxLatent,
                " and sample counts <= ", kMaxSamples);
  return value;
}
}  // namespace

FedcrCnn::FedcrCnn(InputShape in, FedcrWidths w, int64_t classes, FedcrBottleneck bottleneck, Generator& gen)
    : bottleneck_(bottleneck) {
  const int64_t h = conv5_pool2(conv5_pool2(in.height)), wd = conv5_pool2(conv5_pool2(in.width));
  conv1 = register_module("conv1", std::make_shared<Conv2d>(in.channels, w.conv1, 5, gen));
  conv2 = register_module("conv2", std::make_shared<Conv2d>(w.conv1, w.conv2, 5, gen));
  fc1 = register_module("fc1", std::make_shared<Linear>(w.conv2 * h * wd, w.fc1, gen));
  fc2 = register_module("fc2", std::make_shared<Linear>(w.fc1, w.fc2, gen));
  fc3 = register_module("fc3", std::make_shared<Linear>(w.fc2, 2 * bottleneck.latent, gen));
  fc4 = register_module("fc4", std::make_shared<Linear>(bottleneck.latent, classes, gen));
}

Tensor FedcrCnn::forward(const Tensor& x) {
  Tensor h = max_pool2d_of_relu(conv1->forward(x), 2);
  h = max_pool2d_of_relu(conv2->forward(h), 2);
  h = relu(fc2->forward(relu(fc1->forward(flatten(h)))));
  encoding_ = fc3->forward(h);
  const bool training = is_training();
  const int64_t S = training ? bottleneck_.train_samples : bottleneck_.test_samples, N = x.size(0);
  // Drawn on the host and uploaded: a model on the device sees the same noise as on the CPU.
  const Tensor eps =
      (training ? standard_normal({S, N, bottleneck_.latent}, noise_) : eval_noise(N)).to(encoding_.device());
  const Tensor logits = fc4->forward(gaussian_sample(encoding_, eps, bottleneck_.alpha));
  return training ? logits : sample_mean(logits, S);
}

const Tensor& FedcrCnn::eval_noise(int64_t N) {
  constexpr size_t kKeptBatchSizes = 8;  // the evaluation batch and its tails: a few sizes per run
  auto it = eval_noise_by_batch_.find(N);
  if (it != eval_noise_by_batch_.end()) return it->second;
  if (eval_noise_by_batch_.size() >= kKeptBatchSizes) eval_noise_by_batch_.clear();
  Generator gen(kEvalNoiseSeed);
  return eval_noise_by_batch_.emplace(N, standard_normal({bottleneck_.test_samples, N, bottleneck_.latent}, gen))
      .first->second;
}

void FedcrCnn::reseed_dropout(uint64_t seed) {
  noise_.reseed(Generator(seed).fork(kNoiseStream).next_u64());
  Module::reseed_dropout(seed);
}

FedcrCnn* fedcr_network(Model& model) { return dynamic_cast<FedcrCnn*>(&model.root()); }

std::optional<FedcrBottleneck> parse_fedcr_name(const std::string& name) {
  if (name.rfind(kPrefix, 0) != 0) return std::nullopt;
  FedcrBottleneck b;
  const std::string rest = name.substr(std::string(kPrefix).size());
  if (rest.empty()) return b;
  BASTION_CHECK(rest[0] == '-', "unknown model '", name,
                "'; cnn-fedcr takes the form cnn-fedcr-<d_Z>-<S_train>-<S_test>");
  std::string_view fields(rest);
  fields.remove_prefix(1);
  int64_t values[3];
  for (int k = 0; k < 3; ++k) {
    const size_t dash = fields.find('-');
    BASTION_CHECK((k < 2) == (dash != std::string_view::npos), "model ", name,
                  ": expected cnn-fedcr-<d_Z>-<S_train>-<S_test>");
    values[k] = parse_positive(name, fields.substr(0, dash), k == 0 ? kMaxLatent : kMaxSamples);
    if (dash != std::string_view::npos) fields.remove_prefix(dash + 1);
  }
  b.latent = values[0], b.train_samples = values[1], b.test_samples = values[2];
  return b;
}

std::unique_ptr<Model> make_fedcr_cnn(const std::string& name, InputShape in, FedcrWidths widths, int64_t classes,
                                      FedcrBottleneck bottleneck, uint64_t seed) {
  Generator gen(seed);
  auto root = std::make_shared<FedcrCnn>(in, widths, classes, bottleneck, gen);
  root->reseed_dropout(seed);
  return std::make_unique<Model>(name, root, "fc4", in, classes);
}

}  // namespace bastion
