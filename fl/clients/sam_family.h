// FedFSA's Top-C layer choice (fl/clients/sam_family.cpp), exposed for tests.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nn/model.h"

namespace bastion {

// Whether a tensor may take FedFSA's larger radius: weights only, not biases, BatchNorm, downsample,
// shortcut or norm tensors (the names FedFSA's code excludes, case-insensitive).
bool fsa_candidate(const std::string& name);
// Per model.parameters() entry, the perturbation sensitivity of the change from `before` (flat parameters)
// to the model's parameters: ||after - before||^2 (paper), or, code_variant, the mean of
// (minmax(after) - minmax(before))^2 (NaN for a constant tensor); -inf for a tensor that is no candidate.
std::vector<double> fsa_sensitivity(const Model& model, std::span<const float> before, bool code_variant);
// The indices of the c largest finite sensitivities, largest first; ties keep model order.
std::vector<size_t> fsa_top_c(const std::vector<double>& sensitivity, int64_t c);

}  // namespace bastion
