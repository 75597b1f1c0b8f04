// evaluate: mean cross-entropy and accuracy of a model on a dataset (or a subset of it), in eval mode
// and without recording a graph. Used by `bastion train` and, later, by every FL round.
#pragma once

#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
#include "nn/model.h"

namespace bastion {

struct EvalResult {
  double loss = 0.0;      // mean cross-entropy
  double accuracy = 0.0;  // correct / samples
  int64_t samples = 0, correct = 0;
  double loss_sum = 0.0;  // sum of per-sample losses, to combine chunks exactly
  double entropy = 0.0;   // mean entropy (nats) of the softmax prediction (SageFlow's filter)
  double entropy_sum = 0.0;
  // Per loader batch (batch_size samples, the last one shorter): the sum of the batches' accuracies and
  // their count. batch_accuracy_sum / batches is the mean of per-batch accuracies, the per-client figure of
  // FedFSA's code (eval.client_accuracy = batch-mean); it weighs a short last batch like a full one.
  double batch_accuracy_sum = 0.0;
  int64_t batches = 0;
  double batch_mean_accuracy() const { return batches > 0 ? batch_accuracy_sum / static_cast<double>(batches) : 0.0; }
};

// `indices` empty = the whole dataset, read batch_size samples at a time and fed to the model in forward
// passes of at most 128 (so memory does not grow with batch_size). Restores the model's train/eval mode.
// transform (optional): the deterministic part of a training transform (resize, channel replication;
// no crop or flip at test time). poison (optional): e.g. every sample triggered and relabelled with the
// target (per_batch = batch_size), so `accuracy` is the attack success rate on `indices`.
EvalResult evaluate(Model& model, const Dataset& data, int64_t batch_size = 1000,
                    const std::vector<int64_t>& indices = {}, const TransformSpec* transform = nullptr,
                    const PoisonSpec* poison = nullptr);

// Sum over the rows of an (N, C) logit tensor of the softmax entropy -sum_c p_c ln p_c (in double).
double softmax_entropy_sum(const Tensor& logits);

// Index of the largest logit of each row of an (N, C) tensor (first one on ties).
std::vector<int32_t> argmax_rows(const Tensor& logits);

}  // namespace bastion
