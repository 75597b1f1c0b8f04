#include "nn/model.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda/cuda.h"

namespace bastion {

namespace {
// Points `t`'s TensorImpl at [offset, offset + numel) of `storage` after copying its values there.
// Rebinding the impl (not the handle) updates every Module member that holds this tensor.
void move_into(const Tensor& t, const std::shared_ptr<Storage>& storage, int64_t offset) {
  std::memcpy(storage->data + offset, t.data(), t.numel() * sizeof(float));
  TensorImpl* impl = t.impl_ptr();
  impl->storage = storage;
  impl->offset = offset;
}

bool has_prefix(const std::string& name, const std::string& prefix) {
  return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 && name[prefix.size()] == '.';
}
}  // namespace

Model::Model(std::string name, std::shared_ptr<Module> root, std::string head_prefix, InputShape input,
             int64_t num_classes)
    : name_(std::move(name)), root_(std::move(root)), head_prefix_(std::move(head_prefix)), input_(input),
      num_classes_(num_classes) {
  const std::vector<NamedTensor> params = root_->named_parameters();
  const std::vector<NamedTensor> bufs = root_->named_buffers();
  int64_t total = 0;
  for (const NamedTensor& p : params) num_parameters_ += p.tensor.numel();
  total = num_parameters_;
  for (const NamedTensor& b : bufs) total += b.tensor.numel();
  state_ = Tensor::zeros({total});
  grads_ = Tensor::zeros({num_parameters_});
  int64_t offset = 0;
  bool head_found = false;
  for (const NamedTensor& p : params) {
    move_into(p.tensor, state_.storage(), offset);
    ParameterView view{p.name,
                       p.tensor,
                       Tensor::view_of(grads_.storage(), offset, p.tensor.shape()),
                       offset,
                       offset + p.tensor.numel(),
                       has_prefix(p.name, head_prefix_)};
    p.tensor.set_grad(view.grad);
    head_found = head_found || view.is_head;
    parameters_.push_back(std::move(view));
    offset += p.tensor.numel();
  }
  for (const NamedTensor& b : bufs) {
    move_into(b.tensor, state_.storage(), offset);
    buffers_.push_back({b.name, b.tensor, Tensor(), offset, offset + b.tensor.numel(), false});
    offset += b.tensor.numel();
  }
  BASTION_CHECK(head_found, "model ", name_, ": head prefix '", head_prefix_, "' matches no parameter");
}

std::vector<std::pair<std::string, int64_t*>> Model::counters() const {
  std::vector<std::pair<std::string, int64_t*>> out;
  root_->collect_counters(out, "");
  return out;
}

// A frozen parameter receives no gradient: backward skips tensors without requires_grad, and every code
// that writes the flat buffer directly skips them too (add_proximal_gradient, Sam's passes, SPMC's copy of
// what it read). So its range is zeroed once, by the first zero_grad that sees it frozen, and left alone
// after: head tuning (cnn-fedfsa: 10 k of 1.26 M parameters trainable) rewrote the whole 5 MB buffer at
// every step, 5.4 % of a 2-round FedFSA run whose last round tunes 100 clients' heads (perf, issue 38).
void Model::zero_grad() const {
  zeroed_while_frozen_.resize(parameters_.size(), 0);
  const bool already_zero = gradients_zeroed_;
  gradients_zeroed_ = false;
  if (all_trainable()) {
    if (!already_zero) grads_.fill(0.0f);
    std::fill(zeroed_while_frozen_.begin(), zeroed_while_frozen_.end(), 0);
    return;
  }
  for (size_t k = 0; k < parameters_.size(); ++k) {
    const ParameterView& p = parameters_[k];
    const bool frozen = !p.value.requires_grad();
    if (frozen && zeroed_while_frozen_[k]) continue;
    p.grad.fill(0.0f);
    zeroed_while_frozen_[k] = frozen ? 1 : 0;
  }
}

const Tensor& Model::host_state() const {
  BASTION_CHECK(state_.device() == Device::CPU, "model ", name_, ": its state is on ", device_name(state_.device()),
                "; move it with to(Device::CPU) before reading it on the host");
  return state_;
}

std::span<float> Model::flat_gradients() const {
  host_state();
  return grads_.span();
}

std::vector<float> Model::state_values() const { return state_.to_vector(); }

std::vector<float> Model::parameter_values() const { return state_.slice_rows(0, num_parameters_).to_vector(); }

void Model::load_state_values(std::span<const float> values) {
  BASTION_CHECK(static_cast<int64_t>(values.size()) == state_.numel(), "model ", name_, ": ", values.size(),
                " state values for a state of ", state_.numel());
  switch (state_.device()) {
    case Device::CPU:
      std::copy(values.begin(), values.end(), state_.data());
      break;
    case Device::CUDA:
      cuda_copy_to_device(state_.data(), values.data(), values.size() * sizeof(float), cuda_stream());
      break;
  }
}

namespace {
// Rebinding a view's impl (not its handle) moves every Module member that holds it.
void rebind(const Tensor& view, const Tensor& buffer) { view.impl_ptr()->storage = buffer.storage(); }
}  // namespace

void Model::to(Device device) {
  if (device == state_.device()) return;
  const Tensor state = state_.to(device), grads = grads_.to(device);
  for (ParameterView& p : parameters_) {
    rebind(p.value, state);
    rebind(p.grad, grads);
  }
  for (ParameterView& b : buffers_) rebind(b.value, state);
  state_ = state;
  grads_ = grads;
}

void Model::swap_state(Tensor& other) {
  BASTION_CHECK(other.numel() == state_.numel() && other.storage_offset() == 0 && other.storage() &&
                    other.storage()->numel == state_.numel() && other.device() == state_.device(),
                "model ", name_, ": swap_state needs a buffer of its own of ", state_.numel(), " values on ",
                device_name(state_.device()), ", got ", other.numel(), " on ", device_name(other.device()));
  std::swap(state_, other);
  for (ParameterView& p : parameters_) rebind(p.value, state_);
  for (ParameterView& b : buffers_) rebind(b.value, state_);
}

void Model::set_trainable(bool head, bool trainable) {
  for (ParameterView& p : parameters_)
    if (p.is_head == head) p.value.set_requires_grad(trainable);
}

void Model::set_all_trainable(bool trainable) {
  for (ParameterView& p : parameters_) p.value.set_requires_grad(trainable);
}

bool Model::all_trainable() const {
  return std::all_of(parameters_.begin(), parameters_.end(),
                     [](const ParameterView& p) { return p.value.requires_grad(); });
}

void Model::load_state(const std::map<std::string, Tensor>& values) {
  size_t used = 0;
  for (const std::vector<ParameterView>* group : {&parameters_, &buffers_}) {
    for (const ParameterView& p : *group) {
      auto it = values.find(p.name);
      BASTION_CHECK(it != values.end(), "model ", name_, ": no value for '", p.name, "'");
      BASTION_CHECK(it->second.shape() == p.value.shape(), "model ", name_, ": '", p.name, "' has shape ",
                    it->second.shape(), ", expected ", p.value.shape());
      p.value.copy_from(it->second);
      used++;
    }
  }
  if (used != values.size()) {
    for (const auto& [name, value] : values) {
      bool known = false;
      for (const std::vector<ParameterView>* group : {&parameters_, &buffers_})
        for (const ParameterView& p : *group) known = known || p.name == name;
      BASTION_CHECK(known, "model ", name_, ": unknown tensor '", name, "'");
    }
  }
}

}  // namespace bastion
