// Adaptive local aggregation (ALA), the core of FedALA (Zhang et al. AAAI'23; PFL-FACTS §10), exposed
// for the fedala client rule (fedala.cpp) and its tests.
//
// Given the received global model g and the client's local model l, ALA builds the model the client
// starts its round from:
//   lower parameter tensors (all but the last p):  g
//   upper parameter tensors (the last p; p = 2 is the last linear layer's weight and bias):
//       l + (g - l) (.) W,   W element-wise in [0, 1], kept per client across rounds (all ones at first)
// W is learned on a contiguous s % slice of the client's training samples starting at a random offset
// (no shuffle), one SGD-like step per batch on W only:
//       W <- clip(W - eta * grad_upper CE (.) (g - l), 0, 1)
// In the start phase (the first time ALA runs for a client) epochs repeat until more than `window`
// epoch losses (each the loss of the epoch's last batch) are recorded and the population standard
// deviation of the last `window` is below `threshold`; afterwards exactly one epoch. ALA is skipped
// (the model stays l) when the first parameter tensor of g equals that of l (the first round).
// Buffers (BatchNorm statistics) are the global model's.
// Cost: epochs x s % x |D_k| forward/backward passes (the lower layers frozen when the upper tensors
// are exactly the model's head, so their weight gradients are not computed).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "data/dataset.h"
#include "data/transforms.h"
#include "nn/model.h"

namespace bastion {

struct AlaOptions {
  int64_t upper_tensors = 2;        // p: the last p parameter tensors are aggregated element-wise
  double eta = 1.0;                 // learning rate of W
  double sample_percent = 80.0;     // s: the share of the training samples W is learned on
  double threshold = 0.01;          // start phase: stop when std(last `window` epoch losses) < threshold
  int64_t window = 10;              // num_pre_loss
  int64_t max_start_epochs = 1000;  // guard: the authors' loop has no bound
  int64_t batch = 48;
};

struct AlaData {
  const Dataset& data;
  const std::vector<int64_t>& indices;  // the client's training samples, in their fixed order
  const TransformSpec& transform;
  uint64_t seed = 0;  // draws the slice's offset
};

struct AlaOutcome {
  bool skipped = false;  // g and l agree on the first tensor: the model holds l unchanged
  int64_t epochs = 0;    // weight-learning epochs taken
  double last_loss = 0.0;
};

// The number of values W holds for `model` (the sizes of its last p parameter tensors).
int64_t ala_weight_count(const Model& model, int64_t upper_tensors);

// Writes the ALA-initialised model into `model`'s state. `global` and `local` are full flat states (D
// values: parameters then buffers); `weights` is W (ala_weight_count values, updated in place).
AlaOutcome adaptive_local_aggregation(Model& model, std::span<const float> global, std::span<const float> local,
                                      std::vector<float>& weights, bool start_phase, const AlaData& data,
                                      const AlaOptions& options);

}  // namespace bastion
