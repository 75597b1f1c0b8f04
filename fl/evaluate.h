// evaluate: mean cross-entropy and accuracy of a model on a dataset (or a subset of it), in eval mode
// and without recording a graph. Used by `bastion train` and, later, by every FL round.
#pragma once

#include <vector>

#include "data/dataset.h"
#include "nn/model.h"

namespace bastion {

struct EvalResult {
  double loss = 0.0;
  double accuracy = 0.0;
  int64_t samples = 0;
};

// `indices` empty = the whole dataset. Restores the model's train/eval mode afterwards.
EvalResult evaluate(Model& model, const Dataset& data, int64_t batch_size = 1000,
                    const std::vector<int64_t>& indices = {});

// Index of the largest logit of each row of an (N, C) tensor (first one on ties).
std::vector<int32_t> argmax_rows(const Tensor& logits);

}  // namespace bastion
