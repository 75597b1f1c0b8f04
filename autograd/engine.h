// Reverse-mode autograd over a dynamic graph.
// - Every op that has an input with requires_grad (and runs while grad mode is on) creates a Node that
//   holds an Edge per input, what it saved, and a backward closure; the output tensor points at the node.
// - An Edge holds the input's producer node, not the input tensor: an op output that no backward saved
//   (batch norm's output feeding a ReLU, a residual sum) goes back to the storage pool as soon as its
//   consumer ran forward. Only leaves (parameters, inputs with requires_grad) are held, for their .grad.
// - Tensor::backward() on a scalar loss sorts the graph in reverse topological order and runs each
//   node once, after all gradients flowing into its output were summed.
// - Leaf tensors with requires_grad ACCUMULATE into .grad (so a model's parameters, whose .grad are
//   views into one flat gradient buffer, accumulate there until zero_grad()).
// - Backward releases each node's saved tensors right after running it (like PyTorch's
//   retain_graph=False), so the activations of the layers already done return to the storage pool while
//   the earlier layers' gradients are computed.
#pragma once

#include <functional>
#include <initializer_list>
#include <vector>

#include "tensor/tensor.h"

namespace bastion {

struct Node;

// One input of a node as backward needs it: the node that produced it (non-leaf input), or the leaf
// tensor itself (producer == nullptr), whose .grad receives the gradient. Empty when the input needs no
// gradient.
struct Edge {
  std::shared_ptr<Node> producer;
  Tensor leaf;
};

struct Node {
  // Receives d(loss)/d(output) and returns one gradient per input (undefined where the input does not
  // need one: check needs_grad[i] before computing it). grad_output is READ-ONLY (it may be shared
  // with other nodes); a returned gradient may alias it.
  using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output, const Node& node)>;

  const char* name = "";
  std::vector<Edge> inputs;
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
