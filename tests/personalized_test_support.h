// Helpers shared by the personalised-FL tests (test_fl_personalized*.cpp): small models and data, the
// registered client rules with given parameters, and bit-level comparisons of head and body columns.
#pragma once

#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "data/synthetic.h"
#include "fl/registry.h"
#include "nn/model.h"
#include "nn/models.h"
#include "tensor/random.h"

namespace bastion::pfl_testing {

// n values drawn from N(0, 1) by a Generator of `seed` (the SAM step's gradients, linear terms and duals).
inline std::vector<float> normal_values(size_t n, uint64_t seed) {
  Generator gen(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(gen.normal());
  return v;
}

// A two-class MLP on 1x1x1 inputs: six parameter tensors, small enough for hand computations.
inline std::unique_ptr<Model> small_mlp() { return make_model("mlp", {1, 1, 1}, 2, 3); }

inline const InputShape kInput{1, 8, 8};

inline Dataset synthetic_train(int64_t n = 200) {
  SyntheticSpec spec;
  spec.train = n;
  spec.test = 50;
  return make_synthetic(spec).train;
}

inline std::unique_ptr<ClientRule> client_rule(const std::string& name,
                                               const std::map<std::string, ParamValue>& given) {
  const ClientRuleEntry& entry = find_client_rule(name);
  return entry.make(Params("clients." + name, *entry.info.params, given));
}

inline std::vector<int64_t> first_indices(int64_t n) {
  std::vector<int64_t> indices(static_cast<size_t>(n));
  std::iota(indices.begin(), indices.end(), int64_t{0});
  return indices;
}

inline std::vector<float> state_of(const Model& model) {
  return {model.flat_state().begin(), model.flat_state().end()};
}

// True when every column in [begin, end) is bit-identical in a and b.
inline bool same_columns(const std::vector<float>& a, const std::vector<float>& b, int64_t begin, int64_t end) {
  return std::memcmp(a.data() + begin, b.data() + begin, static_cast<size_t>(end - begin) * sizeof(float)) == 0;
}

struct HeadAndBody {
  std::vector<std::pair<int64_t, int64_t>> head, body;  // parameter column ranges
};
inline HeadAndBody parts(const Model& model) {
  HeadAndBody p;
  for (const ParameterView& view : model.parameters())
    (view.is_head ? p.head : p.body).emplace_back(view.begin, view.end);
  return p;
}
inline bool part_unchanged(const std::vector<std::pair<int64_t, int64_t>>& ranges, const std::vector<float>& a,
                           const std::vector<float>& b) {
  for (const auto& [begin, end] : ranges)
    if (!same_columns(a, b, begin, end)) return false;
  return true;
}

// FedRep with one phase switched off: the frozen part must come out bit-identical, the other must move;

}  // namespace bastion::pfl_testing
