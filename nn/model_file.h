// model_file: a model's weights as one .safetensors file (tensor/safetensors.h) with PyTorch's state_dict
// names: every parameter and buffer as F32, BatchNorm's num_batches_tracked as I64, and metadata naming
// the architecture ("model", "num_classes") plus what the caller adds (the dataset and its normalisation).
// PyTorch: model.load_state_dict(safetensors.torch.load_file(path)) for the same architecture.
#pragma once

#include <map>
#include <string>

#include "nn/model.h"

namespace bastion {

// Writes atomically (the file appears whole or not at all); the model may be on any device.
void save_model_file(const Model& model, const std::string& path, std::map<std::string, std::string> metadata = {});

// Loads every tensor of `model` from `path`. The file's "model" metadata, when present, must name this
// architecture; every parameter and buffer must be present with its shape, and no tensor may be left
// over. Errors name the file and the offending tensor.
void load_model_file(Model& model, const std::string& path);

}  // namespace bastion
