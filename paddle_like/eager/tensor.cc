#include "paddle_like/eager/tensor.h"

#include <cstring>

#include "paddle_like/eager/autograd.h"
#include "paddle_like/eager/tensor_impl_internal.h"
#include "phi/core/errors.h"

namespace paddle_like {

namespace {

TensorImpl& Checked(const std::shared_ptr<TensorImpl>& impl) {
  PADDLE_ENFORCE(impl != nullptr,
                 phi::errors::PreconditionNotMet("The Tensor is undefined (default-made)."));
  return *impl;
}

}  // namespace

Tensor::Tensor(phi::DenseTensor value, bool requires_grad, std::string name)
    : impl_(std::make_shared<TensorImpl>()) {
  if (requires_grad) {
    PADDLE_ENFORCE(phi::IsFloating(value.dtype()),
                   phi::errors::InvalidArgument(
                       "Only floating tensors can require grad; '%s' is %s.", name.c_str(),
                       phi::DataTypeToString(value.dtype())));
  }
  impl_->value = std::move(value);
  impl_->requires_grad = requires_grad;
  impl_->name = std::move(name);
}

Tensor Tensor::FromImpl(std::shared_ptr<TensorImpl> impl) {
  Tensor t;
  t.impl_ = std::move(impl);
  return t;
}

const phi::DenseTensor& Tensor::value() const { return Checked(impl_).value; }
phi::DenseTensor& Tensor::mutable_value() { return Checked(impl_).value; }
const std::string& Tensor::name() const { return Checked(impl_).name; }
void Tensor::set_name(std::string name) { Checked(impl_).name = std::move(name); }
bool Tensor::requires_grad() const { return Checked(impl_).requires_grad; }
bool Tensor::is_leaf() const { return Checked(impl_).grad_fn == nullptr; }
std::shared_ptr<GradNode> Tensor::grad_fn() const { return Checked(impl_).grad_fn; }
const phi::DenseTensor& Tensor::grad() const { return Checked(impl_).grad; }

void Tensor::set_requires_grad(bool requires_grad) {
  PADDLE_ENFORCE(is_leaf(), phi::errors::InvalidArgument(
                                "set_requires_grad on '%s', which is not a leaf: its "
                                "requires_grad follows its inputs.",
                                name().c_str()));
  PADDLE_ENFORCE(!requires_grad || phi::IsFloating(dtype()),
                 phi::errors::InvalidArgument("Only floating tensors can require grad; '%s' is %s.",
                                              name().c_str(), phi::DataTypeToString(dtype())));
  impl_->requires_grad = requires_grad;
}

void Tensor::set_grad(phi::DenseTensor grad) {
  PADDLE_ENFORCE(!grad.initialized() ||
                     (grad.dims() == dims() && grad.dtype() == dtype()),
                 phi::errors::InvalidArgument("set_grad on '%s' (%s %s) with a %s %s tensor.",
                                              name().c_str(), phi::DataTypeToString(dtype()),
                                              dims().to_str().c_str(),
                                              phi::DataTypeToString(grad.dtype()),
                                              grad.dims().to_str().c_str()));
  Checked(impl_).grad = std::move(grad);
}

void Tensor::clear_grad(bool set_to_zero) {
  TensorImpl& impl = Checked(impl_);
  if (!impl.grad.initialized()) return;
  if (!set_to_zero) {
    impl.grad = phi::DenseTensor();
  } else if (impl.grad.IsContiguous() && impl.grad.place().is_cpu()) {
    // Every step zeroes every gradient: a memset (zero bits are 0.0 in every floating type),
    // not Fill's element-by-element conversion.
    std::memset(impl.grad.data(), 0, impl.grad.nbytes());
  } else {
    phi::Fill(&impl.grad, 0.0);
  }
}

int Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) {
  TensorImpl& impl = Checked(impl_);
  PADDLE_ENFORCE(impl.grad_fn == nullptr && impl.requires_grad,
                 phi::errors::InvalidArgument(
                     "A post-accumulate-grad hook needs a leaf that requires grad; '%s' is %s.",
                     impl.name.c_str(), impl.grad_fn ? "not a leaf" : "not requiring grad"));
  int id = impl.next_hook_id++;
  impl.hooks.emplace(id, std::move(hook));
  return id;
}

void Tensor::remove_hook(int id) { Checked(impl_).hooks.erase(id); }

void Tensor::backward(const phi::DenseTensor* grad, bool retain_graph) {
  PADDLE_ENFORCE(requires_grad(),
                 phi::errors::PreconditionNotMet(
                     "backward() on '%s', which does not require grad (no input of its graph "
                     "requires grad, or it was made under NoGradGuard).",
                     name().c_str()));
  phi::DenseTensor seed;
  if (grad != nullptr) {
    PADDLE_ENFORCE(grad->dims() == dims() && grad->dtype() == dtype(),
                   phi::errors::InvalidArgument(
                       "backward(grad): grad is %s %s but the tensor is %s %s.",
                       phi::DataTypeToString(grad->dtype()), grad->dims().to_str().c_str(),
                       phi::DataTypeToString(dtype()), dims().to_str().c_str()));
    seed = *grad;
  } else {
    PADDLE_ENFORCE_EQ(numel(), 1,
                      phi::errors::InvalidArgument(
                          "backward() without a grad needs a one-element tensor (a loss); "
                          "'%s' has dims %s.",
                          name().c_str(), dims().to_str().c_str()));
    seed = phi::DenseTensor(phi::CPUPlace(), dtype(), dims());
    phi::Fill(&seed, 1.0);
  }
  autograd::RunBackward(*this, seed, retain_graph);
}

Tensor Tensor::detach() const {
  return Tensor(value(), /*requires_grad=*/false, name());
}

}  // namespace paddle_like
