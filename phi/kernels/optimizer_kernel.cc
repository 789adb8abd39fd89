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

// One Adam update of n elements, in double:
//   m = beta1 m + (1 - beta1) g,  v = beta2 v + (1 - beta2) g^2,
//   p -= step_size * m / (sqrt(v * inv_c2) + epsilon).
// The bias corrections are folded into step_size and inv_c2 (one division and one square
// root per element: the divider is what bounds this loop). float and double go through
// Eigen's packets in fixed-size chunks (std::sqrt's errno check keeps a plain loop scalar);
// every operation is IEEE and in the order written (no FMA on the baseline x86-64 target), so
// the chunks and the scalar tail give the same bits.
template <typename T>
void AdamUpdate(const T* g, int64_t n, const AdamCoefficients& k, T* p, T* m, T* v) {
  int64_t i = 0;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    constexpr int kChunk = 256;
    using Chunk = Eigen::Array<double, kChunk, 1>;
    using In = Eigen::Map<const Eigen::Array<T, kChunk, 1>>;
    using Out = Eigen::Map<Eigen::Array<T, kChunk, 1>>;
    for (; i + kChunk <= n; i += kChunk) {
      // Each cast on its own: Eigen vectorizes a float <-> double cast only as a whole
      // assignment; inside an expression it would evaluate all of it element by element.
      Chunk gd = In(g + i).template cast<double>();
      Chunk md = In(m + i).template cast<double>();
      Chunk vd = In(v + i).template cast<double>();
      Chunk pd = In(p + i).template cast<double>();
      md = k.beta1 * md + (1.0 - k.beta1) * gd;
      vd = k.beta2 * vd + (1.0 - k.beta2) * gd * gd;
      pd = pd - k.step_size * md / ((vd * k.inv_c2).sqrt() + k.epsilon);
      Out(m + i) = md.template cast<T>();
      Out(v + i) = vd.template cast<T>();
      Out(p + i) = pd.template cast<T>();
    }
  }
  for (; i < n; ++i) {
    double gi = static_cast<double>(g[i]);
    double mi = k.beta1 * static_cast<double>(m[i]) + (1.0 - k.beta1) * gi;
    double vi = k.beta2 * static_cast<double>(v[i]) + (1.0 - k.beta2) * gi * gi;
    m[i] = static_cast<T>(mi);
    v[i] = static_cast<T>(vi);
    p[i] = static_cast<T>(static_cast<double>(p[i]) -
                          k.step_size * mi / (std::sqrt(vi * k.inv_c2) + k.epsilon));
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
