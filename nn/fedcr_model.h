// cnn-fedcr: FedCR's stochastic-encoder CNN (Zhang et al. ICML'23; haozzh/FedCR models/Nets_VIB.py,
// PFL-FACTS §11). FedFSA's CNN (conv1 -> ReLU -> pool -> conv2 -> ReLU -> pool -> fc1 -> ReLU -> fc2 -> ReLU)
// whose last layer is a Gaussian bottleneck:
//   fc3: fc2 width -> 2 d_Z  (mu = first d_Z outputs, sigma = softplus(rest - alpha), alpha = 0)
//   z = mu + sigma * eps, eps ~ N(0, I), S samples per input (reparameterised: gradients reach fc3)
//   fc4: d_Z -> C            the personal head (head prefix "fc4")
// Training mode returns (S_train * N, C): S_train stacked copies of the batch's logits, row s*N + n, so the
// loss is the mean CE over samples and batch (local_step repeats the labels). Eval mode returns (N, C),
// the mean over S_test samples of fc4's logits (FedCR's evaluate_FedVIB: argmax of the mean).
// Noise: training draws from a generator reseeded by reseed_dropout (the FL client's (seed, round,
// client) stream); eval draws from a fresh Generator(kEvalNoiseSeed) at every forward, so an evaluation
// depends only on the model and the batch, not on which replica or thread ran it before.
// Names: "cnn-fedcr" (d_Z 512, S_train = S_test = 18: the authors' CIFAR-100 command, used for FedFSA's
// missing values) or "cnn-fedcr-<d_Z>-<S_train>-<S_test>" (e.g. cnn-fedcr-256-15-30 = options.py defaults).
// Devices: runs on either (the bottleneck ops have CUDA twins); the noise is always drawn on the host and
// uploaded, so a model on the device draws exactly the CPU's eps.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "nn/layers.h"
#include "nn/model.h"

namespace bastion {

struct FedcrBottleneck {
  int64_t latent = 512;        // d_Z
  int64_t train_samples = 18;  // S_train (FedCR's num_avg_train)
  int64_t test_samples = 18;   // S_test (num_avg)
  float alpha = 0.0f;          // sigma = softplus(pre - alpha)
};

struct FedcrWidths {
  int64_t conv1, conv2, fc1, fc2;
};

class FedcrCnn : public Module {
 public:
  FedcrCnn(InputShape in, FedcrWidths widths, int64_t classes, FedcrBottleneck bottleneck, Generator& gen);
  Tensor forward(const Tensor& x) override;
  void reseed_dropout(uint64_t seed) override;

  const FedcrBottleneck& bottleneck() const { return bottleneck_; }
  // fc3's output E (N, 2 d_Z) of the last forward, still in the autograd graph: the KL term of the loss
  // and the product-of-experts fusion read it (autograd/ops.h gaussian_kl, kernels/cpu/gaussian.h).
  const Tensor& last_encoding() const { return encoding_; }

  std::shared_ptr<Conv2d> conv1, conv2;
  std::shared_ptr<Linear> fc1, fc2, fc3, fc4;

 private:
  // Eval mode's noise for a batch of N, the same draws at every call (a fresh Generator(kEvalNoiseSeed)):
  // kept per N instead of drawn again, which was most of a cnn-fedcr evaluation (bench/RESULTS.md).
  const Tensor& eval_noise(int64_t N);

  FedcrBottleneck bottleneck_;
  Generator noise_;
  Tensor encoding_;
  std::map<int64_t, Tensor> eval_noise_by_batch_;  // host tensors (S_test, N, d_Z)
};

// The FedcrCnn of a model built as cnn-fedcr, or nullptr.
FedcrCnn* fedcr_network(Model& model);
// The bottleneck of a "cnn-fedcr" / "cnn-fedcr-<d>-<s>-<t>" name; nullopt for other names; malformed
// suffixes are errors.
std::optional<FedcrBottleneck> parse_fedcr_name(const std::string& name);
std::unique_ptr<Model> make_fedcr_cnn(const std::string& name, InputShape in, FedcrWidths widths, int64_t classes,
                                      FedcrBottleneck bottleneck, uint64_t seed);

}  // namespace bastion
