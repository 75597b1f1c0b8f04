// Module: a node of a network with named parameters, named buffers and named children, in PyTorch's
// order (own parameters, then children depth-first), so names come out as "conv1.weight",
// "layer1.0.bn1.running_mean", ... exactly like a PyTorch state_dict.
// Modules only build the tree and run forward; Model (nn/model.h) owns the flat buffers the
// parameters live in.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace bastion {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }

  void train(bool on = true);
  bool is_training() const { return training_; }

  // Parameters / buffers of this module and all descendants, with dotted names.
  std::vector<NamedTensor> named_parameters(const std::string& prefix = "") const;
  std::vector<NamedTensor> named_buffers(const std::string& prefix = "") const;
  // Buffers that PyTorch stores as int64 (BatchNorm's num_batches_tracked), kept as counters here.
  virtual void collect_counters(std::vector<std::pair<std::string, int64_t*>>& out, const std::string& prefix);
  // Reseeds every Dropout below this module from `seed` (child i gets Generator(seed).fork(i)), so an FL
  // client's dropout masks depend on (seed, round, client), not on which replica trained it before.
  virtual void reseed_dropout(uint64_t seed);

 protected:
  Tensor register_parameter(const std::string& name, Tensor value);
  Tensor register_buffer(const std::string& name, Tensor value);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
    children_.emplace_back(name, child);
    return child;
  }
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

 private:
  std::vector<NamedTensor> parameters_;
  std::vector<NamedTensor> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace bastion
