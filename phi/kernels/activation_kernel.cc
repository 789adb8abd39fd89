// relu, gelu (erf and tanh forms) and tanh, with gradients.
#include <cmath>

#include "phi/kernels/kernel_funcs_internal.h"
#include "phi/kernels/math_kernels.h"

namespace phi {

using namespace kernels_internal;  // NOLINT: the kernels' own helpers

namespace {

// out[i] = f(a[i]) (unary) or f(a[i], b[i]) over floating tensors, with f applied to the
// element type T itself (f must be exact in T).
template <typename F>
void Map1Typed(const DenseTensor& a, DenseTensor* out, const char* kernel, F f) {
  CheckCpuInput(a, kernel, "x");
  CheckFloating(a, kernel, "x");
  VisitFloating(a.dtype(), kernel, [&](auto tag) {
    using T = typename decltype(tag)::type;
    DenseTensor result(CPUPlace(), a.dtype(), a.dims());
    const T* pa = a.data<T>();
    T* po = result.data<T>();
    for (int64_t i = 0, count = a.numel(); i < count; ++i) po[i] = f(pa[i]);
    *out = std::move(result);
  });
}

template <typename F>
void Map2Typed(const DenseTensor& a, const DenseTensor& b, DenseTensor* out,
               const char* kernel, F f) {
  CheckCpuInput(a, kernel, "x");
  CheckCpuInput(b, kernel, "dout");
  CheckFloating(a, kernel, "x");
  CheckSameShape(a, b, kernel);
  VisitFloating(a.dtype(), kernel, [&](auto tag) {
    using T = typename decltype(tag)::type;
    DenseTensor result(CPUPlace(), a.dtype(), a.dims());
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = result.data<T>();
    for (int64_t i = 0, count = a.numel(); i < count; ++i) po[i] = f(pa[i], pb[i]);
    *out = std::move(result);
  });
}

// The same with f computed in double, for the transcendental forms (exact to the output
// type).
template <typename F>
void Map1(const DenseTensor& a, DenseTensor* out, const char* kernel, F f) {
  Map1Typed(a, out, kernel, [&f](auto v) {
    return static_cast<decltype(v)>(f(static_cast<double>(v)));
  });
}

template <typename F>
void Map2(const DenseTensor& a, const DenseTensor& b, DenseTensor* out, const char* kernel,
          F f) {
  Map2Typed(a, b, out, kernel, [&f](auto x, auto y) {
    return static_cast<decltype(x)>(f(static_cast<double>(x), static_cast<double>(y)));
  });
}

constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kInvSqrt2 = 0.70710678118654752440;     // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)
constexpr double kGeluCubic = 0.044715;

}  // namespace

// relu is a select: in the element type itself (the same value as through double; float32
// and float64 then vectorize).
void ReluKernel(const DenseTensor& x, DenseTensor* out) {
  Map1Typed(x, out, "relu", [](auto v) { return v > decltype(v)(0) ? v : decltype(v)(0); });
}

void ReluGradKernel(const DenseTensor& out, const DenseTensor& dout, DenseTensor* dx) {
  Map2Typed(out, dout, dx, "relu_grad",
            [](auto o, auto d) { return o > decltype(o)(0) ? d : decltype(d)(0); });
}

void GeluKernel(const DenseTensor& x, bool approximate, DenseTensor* out) {
  if (approximate) {
    Map1(x, out, "gelu", [](double v) {
      return 0.5 * v * (1.0 + std::tanh(kSqrt2OverPi * (v + kGeluCubic * v * v * v)));
    });
  } else {
    Map1(x, out, "gelu", [](double v) { return 0.5 * v * (1.0 + std::erf(v * kInvSqrt2)); });
  }
}

void GeluGradKernel(const DenseTensor& x, const DenseTensor& dout, bool approximate,
                    DenseTensor* dx) {
  if (approximate) {
    Map2(x, dout, dx, "gelu_grad", [](double v, double d) {
      double inner = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
      double t = std::tanh(inner);
      double dinner = kSqrt2OverPi * (1.0 + 3.0 * kGeluCubic * v * v);
      return d * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * dinner);
    });
  } else {
    Map2(x, dout, dx, "gelu_grad", [](double v, double d) {
      double cdf = 0.5 * (1.0 + std::erf(v * kInvSqrt2));
      double pdf = kInvSqrt2Pi * std::exp(-0.5 * v * v);
      return d * (cdf + v * pdf);
    });
  }
}

void TanhKernel(const DenseTensor& x, DenseTensor* out) {
  Map1(x, out, "tanh", [](double v) { return std::tanh(v); });
}

void TanhGradKernel(const DenseTensor& out, const DenseTensor& dout, DenseTensor* dx) {
  Map2(out, dout, dx, "tanh_grad", [](double o, double d) { return d * (1.0 - o * o); });
}

}  // namespace phi
