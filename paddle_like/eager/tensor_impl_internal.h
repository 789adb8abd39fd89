// What a Tensor handle points to; shared by tensor.cc and autograd.cc only.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "paddle_like/eager/autograd.h"
#include "paddle_like/eager/tensor.h"

namespace paddle_like {

struct TensorImpl {
  phi::DenseTensor value;
  std::string name;
  bool requires_grad = false;
  // Non-leaf: the node that made it. Leaf: none.
  std::shared_ptr<GradNode> grad_fn;
  // Leaf only: its accumulated gradient, its accumulator node (weak: the graph owns it, and
  // it owns this impl), and its hooks by id.
  phi::DenseTensor grad;
  std::weak_ptr<GradNode> accumulator;
  std::map<int, Tensor::PostAccumulateGradHook> hooks;
  int next_hook_id = 0;
};

}  // namespace paddle_like
