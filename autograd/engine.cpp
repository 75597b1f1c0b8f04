#include "autograd/engine.h"

#include <unordered_set>

#include "autograd/ops.h"

namespace bastion {

namespace {
thread_local bool tls_grad_enabled = true;
}

bool grad_enabled() { return tls_grad_enabled; }

NoGradGuard::NoGradGuard() : previous_(tls_grad_enabled) { tls_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { tls_grad_enabled = previous_; }

Tensor record(Tensor output, const char* name, std::initializer_list<Tensor> inputs, Node::BackwardFn backward) {
  if (!tls_grad_enabled) return output;
  bool any = false;
  for (const Tensor& t : inputs) any = any || (t.defined() && t.requires_grad());
  if (!any) return output;
  auto node = std::make_shared<Node>();
  node->name = name;
  node->inputs.reserve(inputs.size());
  node->needs_grad.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    const bool needs = t.defined() && t.requires_grad();
    node->needs_grad.push_back(needs);
    node->inputs.push_back(!needs ? Edge{} : t.is_leaf() ? Edge{nullptr, t} : Edge{t.grad_fn(), Tensor()});
  }
  node->backward = std::move(backward);
  TensorImpl* impl = output.impl_ptr();
  impl->grad_fn = std::move(node);
  impl->requires_grad = true;
  return output;
}

void accumulate_into(const Tensor& dst, const Tensor& src) {
  BASTION_CHECK(dst.numel() == src.numel(), "gradient of shape ", src.shape(), " for tensor of shape ", dst.shape());
  add_inplace(dst, src);
}

namespace {

// Reverse topological order of the nodes reachable from `root` (iterative DFS, so deep ResNets do
// not exhaust the stack).
// Holds shared_ptrs so that releasing one node's inputs cannot free a node still in the list.
std::vector<std::shared_ptr<Node>> reverse_topological(const std::shared_ptr<Node>& root) {
  std::vector<std::shared_ptr<Node>> post_order;
  std::unordered_set<Node*> visited;
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack{{root, 0}};
  visited.insert(root.get());
  while (!stack.empty()) {
    auto& [node, next_input] = stack.back();
    if (next_input < node->inputs.size()) {
      const std::shared_ptr<Node>& child = node->inputs[next_input++].producer;
      if (child != nullptr && visited.insert(child.get()).second) stack.push_back({child, 0});
    } else {
      post_order.push_back(node);
      stack.pop_back();
    }
  }
  return {post_order.rbegin(), post_order.rend()};
}

void deliver(const Edge& edge, Tensor grad) {
  if (Node* producer = edge.producer.get()) {
    if (!producer->grad_output.defined()) {
      producer->grad_output = std::move(grad);
    } else {
      // Sum into a fresh buffer: both gradients may alias other nodes' gradients (add passes its
      // upstream gradient to both inputs), so neither may be written in place.
      producer->grad_output = add_values(producer->grad_output, grad);
    }
    return;
  }
  const Tensor& input = edge.leaf;
  Tensor existing = input.grad();
  if (!existing.defined()) {
    // Own a fresh buffer: `grad` may alias a saved tensor of another node.
    input.set_grad(grad.clone().view(input.shape()));
  } else {
    accumulate_into(existing, grad);
  }
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& seed_grad) {
  BASTION_CHECK(root.requires_grad(), "backward: the tensor does not require grad (no parameter reached it)");
  if (root.is_leaf()) {
    deliver(Edge{nullptr, root}, seed_grad);
    return;
  }
  std::vector<std::shared_ptr<Node>> order = reverse_topological(root.grad_fn());
  root.grad_fn()->grad_output = seed_grad;
  for (const std::shared_ptr<Node>& node : order) {
    Tensor grad_output = std::move(node->grad_output);
    node->grad_output = Tensor();
    if (grad_output.defined()) {
      std::vector<Tensor> grads = node->backward(grad_output, *node);
      BASTION_ASSERT(grads.size() == node->inputs.size());
      for (size_t i = 0; i < grads.size(); ++i) {
        if (node->needs_grad[i] && grads[i].defined()) deliver(node->inputs[i], std::move(grads[i]));
      }
    }
    // Release the node now, not when the loss handle dies: its saved tensors go back to the pool while
    // the layers before it still run (`order` keeps the nodes themselves alive until the loop ends).
    node->backward = nullptr;
    node->inputs.clear();
  }
}

}  // namespace bastion

namespace bastion {
void Tensor::backward() const {
  BASTION_CHECK(numel() == 1, "backward(): needs a one-element loss, got shape ", shape());
  run_backward(*this, Tensor::full(shape(), 1.0f).to(device()));
}
}  // namespace bastion
