// Model: a Module tree plus the flat buffers its state lives in (DESIGN.md "State and memory").
//   state buffer    [ parameters (D floats) | buffers (BatchNorm running stats) ]
//   gradient buffer [ parameters (D floats) ]
// Every parameter and buffer tensor is a named view [begin, end) into these, in PyTorch's
// named_parameters() / named_buffers() order, so an FL upload is one span, SGD is one pass, and a
// checkpoint is one write. The "head" is the last linear layer (personalised in pFL methods) and the
// "body" is every other parameter.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nn/module.h"

namespace bastion {

struct ParameterView {
  std::string name;
  Tensor value;  // view into the state buffer
  Tensor grad;   // view into the gradient buffer (parameters only)
  int64_t begin = 0, end = 0;
  bool is_head = false;
};

struct InputShape {
  int64_t channels = 1, height = 28, width = 28;
};

class Model {
 public:
  // Moves every parameter and buffer of `root` into the flat buffers. `head_prefix` names the module
  // holding the head (e.g. "fc3"); its parameters form the head group.
  Model(std::string name, std::shared_ptr<Module> root, std::string head_prefix, InputShape input, int64_t num_classes);

  Tensor forward(const Tensor& x) { return root_->forward(x); }
  void train(bool on = true) { root_->train(on); }
  bool is_training() const { return root_->is_training(); }

  const std::string& name() const { return name_; }
  const InputShape& input_shape() const { return input_; }
  int64_t num_classes() const { return num_classes_; }
  const std::string& head_prefix() const { return head_prefix_; }

  const std::vector<ParameterView>& parameters() const { return parameters_; }
  const std::vector<ParameterView>& buffers() const { return buffers_; }
  std::vector<std::pair<std::string, int64_t*>> counters() const;  // num_batches_tracked

  int64_t num_parameters() const { return num_parameters_; }
  // Host spans of the flat buffers: CPU models only (the FL layer, checkpoints); a CUDA model throws.
  std::span<float> flat_parameters() const { return {host_state().data(), static_cast<size_t>(num_parameters_)}; }
  std::span<float> flat_state() const { return host_state().span(); }  // parameters then buffers
  std::span<float> flat_gradients() const;
  // Copies of the state (parameters then buffers) between the host and the model's device: the FL loop
  // keeps its models as host vectors and trains a device replica (fl/core/device_replicas.h).
  std::vector<float> state_values() const;
  std::vector<float> parameter_values() const;            // the first D values of state_values()
  void load_state_values(std::span<const float> values);  // numel must match
  // The flat buffers as tensors, on the model's device.
  const Tensor& state_tensor() const { return state_; }
  const Tensor& gradient_tensor() const { return grads_; }

  // Moves the flat buffers (and so every parameter, gradient and buffer view) to `device`. The views
  // keep their identity: modules, optimizers and ParameterViews need no update.
  void to(Device device);
  Device device() const { return state_.device(); }
  // Swaps the state buffer with `other` (a buffer of its own, the state's numel, on the model's device) and
  // rebinds every parameter and buffer view to it: the model then computes with other's values and `other`
  // holds the old state. No value moves. SAM's ascent pass (nn/optim.cpp) runs at w + e this way.
  void swap_state(Tensor& other);

  // Zeroes every trainable parameter's gradient, and a frozen one's the first time it is called with the
  // parameter frozen (a frozen parameter gets no gradient, so its range stays zero until it is trainable
  // again; code that writes a frozen range directly must zero it itself).
  void zero_grad() const;
  // Sam::step zeroes the whole gradient buffer in its perturbation pass, the gradient's last read: the
  // next zero_grad() then has nothing to write (with every tensor trainable; otherwise it zeroes as
  // always). The note holds until that zero_grad() or forget_gradients_zeroed(): Sam sets it just before
  // its ascent pass, whose loss calls zero_grad() first, and drops it after the pass.
  void note_gradients_zeroed() const { gradients_zeroed_ = true; }
  void forget_gradients_zeroed() const { gradients_zeroed_ = false; }
  void reseed_dropout(uint64_t seed) { root_->reseed_dropout(seed); }
  // The module tree (a rule that needs a model's internals, e.g. FedCR's encoder: nn/fedcr_model.h).
  Module& root() const { return *root_; }
  // Freeze (false) or unfreeze the head or the body: frozen parameters get no gradient and are
  // skipped by the optimizers.
  void set_trainable(bool head, bool trainable);
  void set_all_trainable(bool trainable);
  bool all_trainable() const;  // every parameter requires a gradient

  // Loads the state from a map name -> values (e.g. a safetensors file); every name must be present
  // with the right numel, and unknown names are an error.
  void load_state(const std::map<std::string, Tensor>& values);

 private:
  const Tensor& host_state() const;
  std::string name_;
  std::shared_ptr<Module> root_;
  std::string head_prefix_;
  InputShape input_;
  int64_t num_classes_;
  Tensor state_, grads_;
  int64_t num_parameters_ = 0;
  std::vector<ParameterView> parameters_, buffers_;
  mutable std::vector<char> zeroed_while_frozen_;  // per parameter: frozen, and zeroed since it was frozen
  mutable bool gradients_zeroed_ = false;          // note_gradients_zeroed()
};

}  // namespace bastion
