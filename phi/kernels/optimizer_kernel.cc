// Optimizer updates, in place on the parameter and its state.
#include <cmath>
#include <type_traits>

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

struct AdamCoefficients {
  double beta1, beta2, epsilon;
  double step_size;  // lr / (1 - beta1^step)
  double inv_c2;     // 1 / (1 - beta2^step)
};

// One Adam update of n elements:
//   m = beta1 m + (1 - beta1) g,  v = beta2 v + (1 - beta2) g^2,
//   p -= step_size * m / (sqrt(v * inv_c2) + epsilon),
// the bias corrections folded into step_size and inv_c2 (one division and one square root per
// element: the divider bounds this loop). float32 computes in float, as torch's Adam: in
// double the divider takes four times as long, and Adam runs on every parameter on every rank
// each step. float64 computes in double, 16-bit types in double. float and double go through
// Eigen's packets in fixed-size chunks (std::sqrt's errno check keeps a plain loop scalar);
// every operation is IEEE and in the order written (no FMA on the baseline x86-64 target), so
// the chunks and the scalar tail give the same bits.
template <typename T>
void AdamUpdate(const T* g, int64_t n, const AdamCoefficients& k, T* p, T* m, T* v) {
  using C = std::conditional_t<std::is_same_v<T, float>, float, double>;
  const C beta1 = static_cast<C>(k.beta1), beta2 = static_cast<C>(k.beta2);
  const C rest1 = static_cast<C>(1.0 - k.beta1), rest2 = static_cast<C>(1.0 - k.beta2);
  const C step_size = static_cast<C>(k.step_size), inv_c2 = static_cast<C>(k.inv_c2);
  const C epsilon = static_cast<C>(k.epsilon);
  int64_t i = 0;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    constexpr int kChunk = 256;
    using Chunk = Eigen::Array<T, kChunk, 1>;
    using In = Eigen::Map<const Chunk>;
    using Out = Eigen::Map<Chunk>;
    for (; i + kChunk <= n; i += kChunk) {
      In gi(g + i);
      Chunk mi = beta1 * In(m + i) + rest1 * gi;
      Chunk vi = beta2 * In(v + i) + rest2 * gi * gi;
      Out(p + i) = In(p + i) - step_size * mi / ((vi * inv_c2).sqrt() + epsilon);
      Out(m + i) = mi;
      Out(v + i) = vi;
    }
  }
  for (; i < n; ++i) {
    C gi = static_cast<C>(g[i]);
    C mi = beta1 * static_cast<C>(m[i]) + rest1 * gi;
    C vi = beta2 * static_cast<C>(v[i]) + rest2 * gi * gi;
    m[i] = static_cast<T>(mi);
    v[i] = static_cast<T>(vi);
    p[i] = static_cast<T>(static_cast<C>(p[i]) -
                          step_size * mi / (std::sqrt(vi * inv_c2) + epsilon));
  }
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
    double c1 = 1.0 - std::pow(beta1, static_cast<double>(step));
    double c2 = 1.0 - std::pow(beta2, static_cast<double>(step));
    AdamUpdate<T>(grad.data<T>(), grad.numel(), {beta1, beta2, epsilon, lr / c1, 1.0 / c2},
                  param->data<T>(), moment1->data<T>(), moment2->data<T>());
  });
}

}  // namespace phi
