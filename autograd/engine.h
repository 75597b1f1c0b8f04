// Reverse-mode autograd over a dynamic graph.
// - Every op that has an input with requires_grad (and runs while grad mode is on) creates a Node that
//   holds its inputs, what it saved, and a backward closure; the output tensor points at the node.
// - Tensor::backward() on a scalar loss sorts the graph in reverse topological order and runs each
//   node once, after all gradients flowing into its output were summed.
// - Leaf tensors with requires_grad ACCUMULATE into .grad (so a model's parameters, whose .grad are
//   views into one flat gradient buffer, accumulate there until zero_grad()).
// - After backward the graph is released (like PyTorch's retain_graph=False), which returns saved
//   activations to the storage pool at once.
#pragma once

#include <functional>
#include <initializer_list>
#include <vector>

#include "tensor/tensor.h"

namespace bastion {

struct Node {
  // Receives d(loss)/d(output) and returns one gradient per input (undefined where the input does not
  // need one: check needs_grad[i] before computing it). grad_output is READ-ONLY (it may be shared
  // with other nodes); a returned gradient may alias it.
  using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output, const Node& node)>;

  const char* name = "";
  std::vector<Tensor> inputs;
  std::vector<bool> needs_grad;
  BackwardFn backward;
  Tensor grad_output;  // summed during backward
};

bool grad_enabled();

// While alive, ops record no graph on this thread (evaluation, optimizer steps, FL aggregation).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Called by every differentiable op after computing `output`: records a node when needed.
// Returns `output` (now pointing at the node when one was recorded).
Tensor record(Tensor output, const char* name, std::initializer_list<Tensor> inputs, Node::BackwardFn backward);

// Runs backward from `root` with d(root)/d(root) = `seed_grad` (ones for a scalar loss).
void run_backward(const Tensor& root, const Tensor& seed_grad);

// dst += src elementwise (same numel); used for gradient accumulation.
void accumulate_into(const Tensor& dst, const Tensor& src);

}  // namespace bastion
