// Optimizer updates, in place on the parameter and its state.
#include <cmath>

#include "phi/kernels/kernel_funcs_internal.h"
#include "phi/kernels/math_kernels.h"

namespace phi {

using namespace kernels_internal;  // NOLINT: the kernels' own helpers

namespace {

void CheckState(const DenseTensor& grad, const DenseTensor& t, const char* kernel,
                const char* name) {
  CheckCpuInput(t, kernel, name);
  CheckSameShape(grad, t, kernel);
}

}  // namespace

void SgdMomentumKernel(const DenseTensor& grad, double lr, double momentum,
                       double weight_decay, DenseTensor* param, DenseTensor* velocity) {
  CheckCpuInput(grad, "sgd", "grad");
  CheckFloating(grad, "sgd", "grad");
  CheckState(grad, *param, "sgd", "param");
  CheckState(grad, *velocity, "sgd", "velocity");
  VisitFloating(grad.dtype(), "sgd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto p = Flat<T>(param);
    auto v = Flat<T>(velocity);
    auto g = Flat<T>(grad);
    if (weight_decay != 0) v = v * static_cast<T>(momentum) + g + p * static_cast<T>(weight_decay);
    else v = v * static_cast<T>(momentum) + g;
    p -= v * static_cast<T>(lr);
  });
}

void AdamKernel(const DenseTensor& grad, double lr, double beta1, double beta2, double epsilon,
                int64_t step, DenseTensor* param, DenseTensor* moment1, DenseTensor* moment2) {
  CheckCpuInput(grad, "adam", "grad");
  CheckFloating(grad, "adam", "grad");
  CheckState(grad, *param, "adam", "param");
  CheckState(grad, *moment1, "adam", "moment1");
  CheckState(grad, *moment2, "adam", "moment2");
  PADDLE_ENFORCE_GE(step, 1, errors::InvalidArgument("adam: step is 1-based, got %ld.", long(step)));
  VisitFloating(grad.dtype(), "adam", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = param->data<T>();
    T* m = moment1->data<T>();
    T* v = moment2->data<T>();
    const T* g = grad.data<T>();
    double c1 = 1.0 - std::pow(beta1, static_cast<double>(step));
    double c2 = 1.0 - std::pow(beta2, static_cast<double>(step));
    for (int64_t i = 0; i < grad.numel(); ++i) {
      double gi = static_cast<double>(g[i]);
      double mi = beta1 * static_cast<double>(m[i]) + (1.0 - beta1) * gi;
      double vi = beta2 * static_cast<double>(v[i]) + (1.0 - beta2) * gi * gi;
      m[i] = static_cast<T>(mi);
      v[i] = static_cast<T>(vi);
      p[i] = static_cast<T>(static_cast<double>(p[i]) -
                            lr * (mi / c1) / (std::sqrt(vi / c2) + epsilon));
    }
  });
}

}  // namespace phi
