// paddle_like::Tensor: an eager tensor that carries requires_grad, its gradient and the node
// of the autograd graph that produced it (the minimal eager framework of Paddle's dygraph).
//
//   Tensor w(phi::DenseTensor::FromVector<double>({...}, {2, 2}), /*requires_grad=*/true);
//   Tensor loss = functional::mean(functional::matmul(x, w));
//   loss.backward();               // w.grad() now holds d loss / d w
//
// A Tensor is a shared handle (copies alias the same tensor, as in Python). Leaves
// (parameters, inputs) accumulate their gradient in grad(); a post-accumulate hook runs once
// per backward pass, as soon as that gradient is final (what DataParallel's Reducer uses).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "phi/core/dense_tensor.h"

namespace paddle_like {

class GradNode;
struct TensorImpl;

class Tensor {
 public:
  using PostAccumulateGradHook = std::function<void(Tensor&)>;

  Tensor() = default;
  explicit Tensor(phi::DenseTensor value, bool requires_grad = false, std::string name = "");

  bool defined() const { return impl_ != nullptr; }
  const phi::DenseTensor& value() const;
  // The value, to update in place (optimizers, parameter broadcast). Not recorded by autograd.
  phi::DenseTensor& mutable_value();
  const phi::DDim& dims() const { return value().dims(); }
  phi::DataType dtype() const { return value().dtype(); }
  int64_t numel() const { return value().numel(); }
  const std::string& name() const;
  void set_name(std::string name);

  bool requires_grad() const;
  // Only on leaves (a non-leaf's requires_grad follows its inputs).
  void set_requires_grad(bool requires_grad);
  bool is_leaf() const;
  // The node that produced this tensor; nullptr for a leaf.
  std::shared_ptr<GradNode> grad_fn() const;

  // The accumulated gradient of a leaf; an uninitialized DenseTensor until a backward pass
  // reached it.
  const phi::DenseTensor& grad() const;
  bool has_grad() const { return grad().initialized(); }
  // Replaces the gradient storage (DataParallel points it into a bucket; the next backward
  // accumulates there in place).
  void set_grad(phi::DenseTensor grad);
  // Zeroes the gradient in place (keeps views), or drops it when !set_to_zero.
  void clear_grad(bool set_to_zero = true);

  // Runs `hook(*this)` after this leaf's gradient has been accumulated, once per backward
  // pass in which the leaf is reached. Returns an id for remove_hook.
  int register_post_accumulate_grad_hook(PostAccumulateGradHook hook);
  void remove_hook(int id);

  // Runs the backward pass from this tensor. `grad` defaults to ones for a one-element
  // tensor (a loss); any other tensor needs it. The graph's saved tensors are released
  // unless `retain_graph`.
  void backward(const phi::DenseTensor* grad = nullptr, bool retain_graph = false);

  // Same underlying tensor (not value equality).
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  // A new leaf sharing this value, cut from the graph (Paddle's detach()).
  Tensor detach() const;

  // For the autograd engine and op builders.
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }
  static Tensor FromImpl(std::shared_ptr<TensorImpl> impl);

 private:
  std::shared_ptr<TensorImpl> impl_;
};

}  // namespace paddle_like
