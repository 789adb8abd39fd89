#include "paddle_like/nn/optimizer.h"

#include "phi/core/errors.h"
#include "phi/kernels/math_kernels.h"

namespace paddle_like {
namespace optimizer {

namespace {

std::vector<phi::DenseTensor> ZerosLike(const std::vector<Tensor>& params) {
  std::vector<phi::DenseTensor> out(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    phi::FullKernel(params[i].dims(), params[i].dtype(), 0.0, &out[i]);
  }
  return out;
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> parameters, double learning_rate)
    : parameters_(std::move(parameters)), lr_(learning_rate) {
  for (const Tensor& p : parameters_) {
    PADDLE_ENFORCE(p.defined() && p.is_leaf() && p.requires_grad(),
                   phi::errors::InvalidArgument(
                       "Optimizer: parameter '%s' must be a leaf that requires grad.",
                       p.defined() ? p.name().c_str() : "<undefined>"));
  }
}

void Optimizer::clear_grad(bool set_to_zero) {
  for (Tensor& p : parameters_) p.clear_grad(set_to_zero);
}

SGD::SGD(std::vector<Tensor> parameters, double learning_rate, double momentum,
         double weight_decay)
    : Optimizer(std::move(parameters), learning_rate),
      momentum_(momentum),
      weight_decay_(weight_decay),
      velocity_(ZerosLike(parameters_)) {}

void SGD::step() {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Tensor& p = parameters_[i];
    if (!p.has_grad()) continue;
    phi::SgdMomentumKernel(p.grad(), lr_, momentum_, weight_decay_, &p.mutable_value(),
                           &velocity_[i]);
  }
}

Adam::Adam(std::vector<Tensor> parameters, double learning_rate, double beta1, double beta2,
           double epsilon)
    : Optimizer(std::move(parameters), learning_rate),
      beta1_(beta1),
      beta2_(beta2),
      epsilon_(epsilon),
      moment1_(ZerosLike(parameters_)),
      moment2_(ZerosLike(parameters_)),
      steps_(parameters_.size(), 0) {}

void Adam::step() {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Tensor& p = parameters_[i];
    if (!p.has_grad()) continue;
    phi::AdamKernel(p.grad(), lr_, beta1_, beta2_, epsilon_, ++steps_[i], &p.mutable_value(),
                    &moment1_[i], &moment2_[i]);
  }
}

}  // namespace optimizer
}  // namespace paddle_like
