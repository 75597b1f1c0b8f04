// The model zoo: every architecture the five papers use, built by name.
// Shapes and parameter names follow the authors' PyTorch code (IMPLEMENTATION-FACTS.md); docs/models.md
// has the table. All models take NCHW float input and return (N, num_classes) logits.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/model.h"

namespace bastion {

struct ModelInfo {
  std::string name;
  std::string description;
};

const std::vector<ModelInfo>& model_catalog();
// Builds `name` for inputs of `input` shape; initialisation draws from Generator(seed).
// Unknown names and unsupported input shapes are errors that say what is valid.
std::unique_ptr<Model> make_model(const std::string& name, InputShape input, int64_t num_classes, uint64_t seed);

// A CIFAR ResNet with `blocks_per_stage` BasicBlocks per stage and stage widths base_width * {1,2,4,8}
// (resnet10: 1, 64; resnet18: 2, 64). Small widths give the reduced variants the gradient checks use.
std::unique_ptr<Model> make_resnet(int blocks_per_stage, int64_t base_width, InputShape input, int64_t num_classes,
                                   uint64_t seed);

}  // namespace bastion
