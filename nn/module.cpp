#include "nn/module.h"

#include "tensor/random.h"

namespace bastion {

namespace {
std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}
}  // namespace

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

std::vector<NamedTensor> Module::named_parameters(const std::string& prefix) const {
  std::vector<NamedTensor> out;
  for (const NamedTensor& p : parameters_) out.push_back({join(prefix, p.name), p.tensor});
  for (const auto& [name, child] : children_) {
    std::vector<NamedTensor> sub = child->named_parameters(join(prefix, name));
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

std::vector<NamedTensor> Module::named_buffers(const std::string& prefix) const {
  std::vector<NamedTensor> out;
  for (const NamedTensor& b : buffers_) out.push_back({join(prefix, b.name), b.tensor});
  for (const auto& [name, child] : children_) {
    std::vector<NamedTensor> sub = child->named_buffers(join(prefix, name));
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

void Module::collect_counters(std::vector<std::pair<std::string, int64_t*>>& out, const std::string& prefix) {
  for (auto& [name, child] : children_) child->collect_counters(out, join(prefix, name));
}

void Module::reseed_dropout(uint64_t seed) {
  const Generator root(seed);
  for (size_t i = 0; i < children_.size(); ++i) children_[i].second->reseed_dropout(root.fork(i).next_u64());
}

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  value.set_requires_grad(true);
  parameters_.push_back({name, value});
  return value;
}

Tensor Module::register_buffer(const std::string& name, Tensor value) {
  buffers_.push_back({name, value});
  return value;
}

}  // namespace bastion
