#include "paddle_like/eager/autograd.h"

#include <atomic>
#include <memory>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "distributed/comm_trace.h"
#include "paddle_like/eager/tensor_impl_internal.h"
#include "phi/core/errors.h"
#include "phi/kernels/math_kernels.h"

namespace paddle_like {

namespace {

std::atomic<uint64_t> next_sequence_nr{0};
thread_local bool grad_enabled = true;

// The callbacks of the backward pass running on this thread (null outside one).
thread_local std::vector<std::function<void()>>* pending_callbacks = nullptr;

// Adds `grad` into `sum` (taking it when `sum` is empty). Never in place: a gradient may
// share storage with another node's (a pass-through backward) or the caller's seed.
void AddInto(phi::DenseTensor* sum, const phi::DenseTensor& grad) {
  if (!sum->initialized()) {
    *sum = grad;
  } else {
    phi::DenseTensor total;
    phi::AddKernel(*sum, grad, &total);
    *sum = std::move(total);
  }
}

// A leaf's sink: adds the gradient into leaf.grad (in place, so a grad that is a view into
// a DataParallel bucket stays one), then runs the leaf's hooks.
class AccumulateGrad : public GradNode {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : GradNode({}), leaf_(std::move(leaf)) {}

  std::vector<phi::DenseTensor> Apply(const phi::DenseTensor& grad_out) override {
    if (!leaf_->grad.initialized()) {
      phi::DenseTensor own;  // its own storage: the incoming one may be shared in the graph
      phi::Copy(grad_out, phi::CPUPlace(), &own);
      leaf_->grad = std::move(own);
    } else {
      phi::AccumulateKernel(grad_out, &leaf_->grad);
    }
    RunHooks();
    return {};
  }
  std::string name() const override { return "AccumulateGrad(" + leaf_->name + ")"; }
  const TensorImpl* leaf() const { return leaf_.get(); }

  // Where a node may add this leaf's gradient in place (GradNode::ApplyInto): the leaf's own
  // gradient, once it exists as plain CPU storage of the leaf's shape; else nullptr.
  phi::DenseTensor* Sink() {
    phi::DenseTensor& g = leaf_->grad;
    if (!g.initialized() || !g.place().is_cpu() || !g.IsContiguous()) return nullptr;
    if (g.dtype() != leaf_->value.dtype() || g.dims() != leaf_->value.dims()) return nullptr;
    return &g;
  }

  // The gradient is final: every node that feeds this leaf has run.
  void RunHooks() {
    Tensor handle = Tensor::FromImpl(leaf_);
    // Copy the hooks: one may remove itself (or others) while running.
    auto hooks = leaf_->hooks;
    for (auto& [id, hook] : hooks) hook(handle);
  }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

// Every node reachable from `root`, with the number of edges that point at it.
std::unordered_map<GradNode*, int> CountDependencies(GradNode* root) {
  std::unordered_map<GradNode*, int> deps;
  std::vector<GradNode*> stack{root};
  std::unordered_set<GradNode*> seen{root};
  while (!stack.empty()) {
    GradNode* node = stack.back();
    stack.pop_back();
    for (const auto& next : node->next()) {
      if (!next) continue;
      ++deps[next.get()];
      if (seen.insert(next.get()).second) stack.push_back(next.get());
    }
  }
  return deps;
}

struct LaterFirst {
  bool operator()(GradNode* a, GradNode* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

// Runs the queued callbacks at the end of a pass; restores the outer state on every exit.
class BackwardScope {
 public:
  BackwardScope() {
    PADDLE_ENFORCE(pending_callbacks == nullptr,
                   phi::errors::PreconditionNotMet(
                       "backward() called while a backward pass runs on this thread (from a "
                       "hook?)."));
    pending_callbacks = &callbacks_;
  }
  ~BackwardScope() { pending_callbacks = nullptr; }
  void RunCallbacks() {
    // A callback may queue more (they run too, in order).
    for (size_t i = 0; i < callbacks_.size(); ++i) {
      auto cb = std::move(callbacks_[i]);
      cb();
    }
    callbacks_.clear();
  }

 private:
  std::vector<std::function<void()>> callbacks_;
};

}  // namespace

GradNode::GradNode(std::vector<std::shared_ptr<GradNode>> next)
    : next_(std::move(next)), sequence_nr_(next_sequence_nr.fetch_add(1)) {}

namespace autograd {

NoGradGuard::NoGradGuard() : previous_(grad_enabled) { grad_enabled = false; }
NoGradGuard::~NoGradGuard() { grad_enabled = previous_; }
bool IsGradEnabled() { return grad_enabled; }

std::shared_ptr<GradNode> GradAccumulator(const Tensor& leaf) {
  const auto& impl = leaf.impl();
  auto node = impl->accumulator.lock();
  if (!node) {
    node = std::make_shared<AccumulateGrad>(impl);
    impl->accumulator = node;
  }
  return node;
}

Tensor MakeResult(phi::DenseTensor value, const std::vector<Tensor>& inputs,
                  const std::function<std::shared_ptr<GradNode>(
                      std::vector<std::shared_ptr<GradNode>> edges)>& node) {
  auto impl = std::make_shared<TensorImpl>();
  impl->value = std::move(value);
  bool needs_grad = false;
  if (grad_enabled) {
    for (const Tensor& t : inputs) needs_grad = needs_grad || (t.defined() && t.requires_grad());
  }
  if (needs_grad) {
    std::vector<std::shared_ptr<GradNode>> edges;
    edges.reserve(inputs.size());
    for (const Tensor& t : inputs) {
      if (!t.defined() || !t.requires_grad()) edges.push_back(nullptr);
      else if (t.is_leaf()) edges.push_back(GradAccumulator(t));
      else edges.push_back(t.grad_fn());
    }
    impl->grad_fn = node(std::move(edges));
    impl->requires_grad = true;
  }
  return Tensor::FromImpl(std::move(impl));
}

FunctionNode::FunctionNode(std::string name, std::vector<std::shared_ptr<GradNode>> next,
                           Backward fn)
    : GradNode(std::move(next)), name_(std::move(name)), fn_(std::move(fn)) {}

FunctionNode::FunctionNode(std::string name, std::vector<std::shared_ptr<GradNode>> next,
                           BackwardInto fn)
    : GradNode(std::move(next)), name_(std::move(name)), fn_into_(std::move(fn)) {}

void FunctionNode::CheckLive() const {
  PADDLE_ENFORCE(fn_ != nullptr || fn_into_ != nullptr,
                 phi::errors::PreconditionNotMet(
                     "backward through %s a second time: its saved tensors were freed by the "
                     "first backward (pass retain_graph=true to keep them).",
                     name_.c_str()));
}

std::vector<phi::DenseTensor> FunctionNode::Apply(const phi::DenseTensor& grad_out) {
  std::vector<bool> accumulated(next().size(), false);
  return ApplyInto(grad_out, std::vector<phi::DenseTensor*>(next().size(), nullptr),
                   &accumulated);
}

std::vector<phi::DenseTensor> FunctionNode::ApplyInto(const phi::DenseTensor& grad_out,
                                                      const std::vector<phi::DenseTensor*>& sinks,
                                                      std::vector<bool>* accumulated) {
  CheckLive();
  auto grads = fn_into_ ? fn_into_(grad_out, sinks, accumulated) : fn_(grad_out);
  PADDLE_ENFORCE_EQ(grads.size(), next().size(),
                    phi::errors::PreconditionNotMet("%s returned %zu gradients for %zu inputs.", name_.c_str(),
                                       grads.size(), next().size()));
  return grads;
}

void RunBackward(const Tensor& root, const phi::DenseTensor& grad, bool retain_graph) {
  BackwardScope scope;
  // The comm timeline's compute track: the nodes, not the callbacks (a Reducer's wait).
  auto span = std::make_unique<distributed::TraceSpan>("backward");
  std::shared_ptr<GradNode> root_node = root.is_leaf() ? GradAccumulator(root) : root.grad_fn();
  auto deps = CountDependencies(root_node.get());
  std::unordered_map<GradNode*, phi::DenseTensor> buffers;
  std::priority_queue<GradNode*, std::vector<GradNode*>, LaterFirst> ready;
  std::vector<std::shared_ptr<GradNode>> visited;  // keeps nodes alive for Release
  buffers[root_node.get()] = grad;
  ready.push(root_node.get());
  // Leaves whose gradient a node added in place: their AccumulateGrad runs its hooks even
  // when nothing else is buffered for it.
  std::unordered_set<GradNode*> accumulated_in_place;
  std::vector<phi::DenseTensor*> sinks;
  std::vector<bool> accumulated;
  while (!ready.empty()) {
    GradNode* node = ready.top();
    ready.pop();
    phi::DenseTensor in = std::move(buffers[node]);
    buffers.erase(node);
    const auto& next = node->next();
    std::vector<phi::DenseTensor> grads;
    sinks.assign(next.size(), nullptr);
    accumulated.assign(next.size(), false);
    if (in.initialized()) {
      for (size_t i = 0; i < next.size(); ++i) {
        if (auto* acc = dynamic_cast<AccumulateGrad*>(next[i].get())) sinks[i] = acc->Sink();
      }
      grads = node->ApplyInto(in, sinks, &accumulated);
    } else if (accumulated_in_place.count(node) > 0) {
      static_cast<AccumulateGrad*>(node)->RunHooks();
    }
    for (size_t i = 0; i < next.size(); ++i) {
      GradNode* n = next[i].get();
      if (!n) continue;
      if (accumulated[i]) {
        PADDLE_ENFORCE(sinks[i] != nullptr,
                       phi::errors::PreconditionNotMet(
                           "%s accumulated input %zu in place, which was offered no sink.",
                           node->name().c_str(), i));
        accumulated_in_place.insert(n);
      }
      if (i < grads.size() && grads[i].initialized()) AddInto(&buffers[n], grads[i]);
      if (--deps[n] == 0) {
        visited.push_back(next[i]);
        ready.push(n);
      }
    }
  }
  if (!retain_graph) {
    root_node->Release();
    for (auto& n : visited) n->Release();
  }
  span.reset();
  scope.RunCallbacks();
}

void QueueCallback(std::function<void()> callback) {
  PADDLE_ENFORCE(pending_callbacks != nullptr,
                 phi::errors::PreconditionNotMet(
                     "QueueCallback outside a backward pass (call it from a gradient hook)."));
  pending_callbacks->push_back(std::move(callback));
}

bool InBackward() { return pending_callbacks != nullptr; }

std::vector<const TensorImpl*> ReachableLeaves(const Tensor& output) {
  std::vector<const TensorImpl*> leaves;
  if (!output.defined() || !output.requires_grad()) return leaves;
  if (output.is_leaf()) return {output.impl().get()};
  std::vector<GradNode*> stack{output.grad_fn().get()};
  std::unordered_set<GradNode*> seen{stack[0]};
  while (!stack.empty()) {
    GradNode* node = stack.back();
    stack.pop_back();
    if (auto* acc = dynamic_cast<AccumulateGrad*>(node)) leaves.push_back(acc->leaf());
    for (const auto& next : node->next()) {
      if (next && seen.insert(next.get()).second) stack.push_back(next.get());
    }
  }
  return leaves;
}

}  // namespace autograd
}  // namespace paddle_like
