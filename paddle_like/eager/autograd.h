// The tape-based autograd engine: graph nodes, gradient mode and the backward pass.
//
// Every op on tensors that require grad records a GradNode holding what its backward needs;
// edges point to the nodes of its inputs (an AccumulateGrad node for a leaf). backward()
// counts each node's consumers, then runs nodes in reverse creation order once all their
// consumers have delivered a gradient; so a leaf's gradient is final when its AccumulateGrad
// node runs, and its post-accumulate hooks fire right then, while the rest of the backward
// pass continues (what lets DataParallel overlap communication with backward).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "paddle_like/eager/tensor.h"

namespace paddle_like {

class GradNode {
 public:
  explicit GradNode(std::vector<std::shared_ptr<GradNode>> next);
  virtual ~GradNode() = default;
  GradNode(const GradNode&) = delete;
  GradNode& operator=(const GradNode&) = delete;

  // The gradients of the inputs, one per edge (an uninitialized tensor: none), given the
  // gradient of this node's output.
  virtual std::vector<phi::DenseTensor> Apply(const phi::DenseTensor& grad_out) = 0;
  // Apply, with the engine offering for input i the gradient storage of the leaf that input
  // is (sinks[i]; nullptr where it offers none: not a leaf, or its gradient not yet
  // allocated). A node may add input i's gradient into *sinks[i] in place, set
  // (*accumulated)[i] and return no tensor for it: for a weight that saves the temporary and
  // the pass that would add it (the gradient of a matmul straight into a DataParallel
  // bucket). The default accumulates nothing in place.
  virtual std::vector<phi::DenseTensor> ApplyInto(const phi::DenseTensor& grad_out,
                                                  const std::vector<phi::DenseTensor*>& sinks,
                                                  std::vector<bool>* accumulated) {
    return Apply(grad_out);
  }
  virtual std::string name() const = 0;
  // Frees what Apply needed (saved tensors) after a backward pass without retain_graph.
  virtual void Release() {}

  // Input edges; nullptr where that input needs no gradient.
  const std::vector<std::shared_ptr<GradNode>>& next() const { return next_; }
  // Creation order: later nodes run first.
  uint64_t sequence_nr() const { return sequence_nr_; }

 private:
  std::vector<std::shared_ptr<GradNode>> next_;
  uint64_t sequence_nr_;
};

namespace autograd {

// While a NoGradGuard lives, ops on this thread record nothing (inference, optimizer steps).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};
bool IsGradEnabled();

// The node a leaf's gradient flows into (made on first use; one per leaf).
std::shared_ptr<GradNode> GradAccumulator(const Tensor& leaf);

// The result of an op: `value`, recording `node` when grad is enabled and any input requires
// grad. `node` is called only then (it builds the GradNode from the input edges).
Tensor MakeResult(phi::DenseTensor value, const std::vector<Tensor>& inputs,
                  const std::function<std::shared_ptr<GradNode>(
                      std::vector<std::shared_ptr<GradNode>> edges)>& node);

// A GradNode whose Apply is a function (the op builders' common case); Release drops the
// function and with it the tensors it captured.
class FunctionNode : public GradNode {
 public:
  using Backward = std::function<std::vector<phi::DenseTensor>(const phi::DenseTensor&)>;
  // A backward that may accumulate into the sinks the engine offers (GradNode::ApplyInto).
  using BackwardInto = std::function<std::vector<phi::DenseTensor>(
      const phi::DenseTensor&, const std::vector<phi::DenseTensor*>& sinks,
      std::vector<bool>* accumulated)>;
  FunctionNode(std::string name, std::vector<std::shared_ptr<GradNode>> next, Backward fn);
  FunctionNode(std::string name, std::vector<std::shared_ptr<GradNode>> next, BackwardInto fn);
  std::vector<phi::DenseTensor> Apply(const phi::DenseTensor& grad_out) override;
  std::vector<phi::DenseTensor> ApplyInto(const phi::DenseTensor& grad_out,
                                          const std::vector<phi::DenseTensor*>& sinks,
                                          std::vector<bool>* accumulated) override;
  std::string name() const override { return name_; }
  void Release() override {
    fn_ = nullptr;
    fn_into_ = nullptr;
  }

 private:
  void CheckLive() const;
  std::string name_;
  Backward fn_;
  BackwardInto fn_into_;
};

// Runs the backward pass from `root` with gradient `grad`.
void RunBackward(const Tensor& root, const phi::DenseTensor& grad, bool retain_graph);

// Queues `callback` to run on this thread when the current backward pass has finished (all
// nodes run); what a Reducer uses to finalize. Raises PreconditionNotMet outside a backward
// pass.
void QueueCallback(std::function<void()> callback);
bool InBackward();

// The leaves reachable from `output` through its graph (DataParallel's unused-parameter
// search), as TensorImpl pointers.
std::vector<const TensorImpl*> ReachableLeaves(const Tensor& output);

}  // namespace autograd
}  // namespace paddle_like
