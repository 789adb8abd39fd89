// Elementwise kernels (add with bias broadcast, subtract, multiply, scale), reductions to a
// scalar, full and cast.
#include <type_traits>

#include "phi/kernels/kernel_funcs_internal.h"
#include "phi/kernels/math_kernels.h"

namespace phi {

using namespace kernels_internal;  // NOLINT: the kernels' own helpers

namespace {

enum class Broadcast { kSame, kBias, kScalar };

// How y is applied to x in AddKernel; raises for anything else.
Broadcast AddBroadcast(const DDim& x, const DDim& y) {
  if (x == y) return Broadcast::kSame;
  if (y.numel() == 1) return Broadcast::kScalar;
  if (y.size() == 1 && x.size() >= 1 && y[0] == x[x.size() - 1]) return Broadcast::kBias;
  PADDLE_THROW(errors::InvalidArgument(
      "add: y must have x's shape %s, be 1-D of its last dim, or have one element; got %s.",
      x.to_str().c_str(), y.to_str().c_str()));
}

void CheckFloatInput(const DenseTensor& t, const char* kernel, const char* name) {
  CheckCpuInput(t, kernel, name);
  CheckFloating(t, kernel, name);
}

// out = f(x, y) elementwise over same-shape floating tensors.
template <typename F>
void Binary(const DenseTensor& x, const DenseTensor& y, DenseTensor* out, const char* kernel,
            F f) {
  CheckFloatInput(x, kernel, "x");
  CheckFloatInput(y, kernel, "y");
  CheckSameShape(x, y, kernel);
  VisitFloating(x.dtype(), kernel, [&](auto tag) {
    using T = typename decltype(tag)::type;
    DenseTensor result(CPUPlace(), x.dtype(), x.dims());
    Flat<T>(&result) = f(Flat<T>(x), Flat<T>(y));
    *out = std::move(result);
  });
}

}  // namespace

void AddKernel(const DenseTensor& x, const DenseTensor& y, DenseTensor* out) {
  CheckFloatInput(x, "add", "x");
  CheckFloatInput(y, "add", "y");
  PADDLE_ENFORCE(x.dtype() == y.dtype(),
                 errors::InvalidArgument("add: x is %s but y is %s.", DataTypeToString(x.dtype()),
                                         DataTypeToString(y.dtype())));
  Broadcast how = AddBroadcast(x.dims(), y.dims());
  VisitFloating(x.dtype(), "add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    DenseTensor result(CPUPlace(), x.dtype(), x.dims());
    auto o = Flat<T>(&result);
    auto a = Flat<T>(x);
    auto b = Flat<T>(y);
    if (how == Broadcast::kSame) {
      o = a + b;
    } else if (how == Broadcast::kScalar) {
      o = a + b(0);
    } else {
      int64_t cols = y.numel();
      int64_t rows = cols == 0 ? 0 : x.numel() / cols;
      using RowVector = Eigen::Matrix<T, 1, Eigen::Dynamic>;
      MatrixMap<T>(result.data<T>(), rows, cols) =
          ConstMatrixMap<T>(x.data<T>(), rows, cols).rowwise() +
          Eigen::Map<const RowVector>(y.data<T>(), cols);
    }
    *out = std::move(result);
  });
}

void AddGradKernel(const DenseTensor& dout, const DDim& y_dims, DenseTensor* dx,
                   DenseTensor* dy) {
  CheckFloatInput(dout, "add_grad", "dout");
  Broadcast how = AddBroadcast(dout.dims(), y_dims);
  VisitFloating(dout.dtype(), "add_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (dx != nullptr) {
      DenseTensor copy;
      Copy(dout, CPUPlace(), &copy);
      *dx = std::move(copy);
    }
    if (dy == nullptr) return;
    DenseTensor result(CPUPlace(), dout.dtype(), y_dims);
    if (how == Broadcast::kSame) {
      Flat<T>(&result) = Flat<T>(dout);
    } else if (how == Broadcast::kScalar) {
      double s = 0;
      auto d = Flat<T>(dout);
      for (int64_t i = 0; i < d.size(); ++i) s += static_cast<double>(d(i));
      result.data<T>()[0] = static_cast<T>(s);
    } else {
      int64_t cols = y_dims.numel();
      int64_t rows = cols == 0 ? 0 : dout.numel() / cols;
      MatrixMap<T>(result.data<T>(), 1, cols) =
          ConstMatrixMap<T>(dout.data<T>(), rows, cols).colwise().sum();
    }
    *dy = std::move(result);
  });
}

void SubtractKernel(const DenseTensor& x, const DenseTensor& y, DenseTensor* out) {
  Binary(x, y, out, "subtract", [](const auto& a, const auto& b) { return a - b; });
}

void MultiplyKernel(const DenseTensor& x, const DenseTensor& y, DenseTensor* out) {
  Binary(x, y, out, "multiply", [](const auto& a, const auto& b) { return a * b; });
}

void ScaleKernel(const DenseTensor& x, double scale, double bias, bool bias_after_scale,
                 DenseTensor* out) {
  CheckFloatInput(x, "scale", "x");
  VisitFloating(x.dtype(), "scale", [&](auto tag) {
    using T = typename decltype(tag)::type;
    DenseTensor result(CPUPlace(), x.dtype(), x.dims());
    T s = static_cast<T>(scale);
    T b = static_cast<T>(bias);
    if (bias_after_scale) Flat<T>(&result) = Flat<T>(x) * s + b;
    else Flat<T>(&result) = (Flat<T>(x) + b) * s;
    *out = std::move(result);
  });
}

void AccumulateKernel(const DenseTensor& y, DenseTensor* x) {
  CheckFloatInput(y, "accumulate", "y");
  CheckFloatInput(*x, "accumulate", "x");
  CheckSameShape(*x, y, "accumulate");
  VisitFloating(y.dtype(), "accumulate", [&](auto tag) {
    using T = typename decltype(tag)::type;
    Flat<T>(x) += Flat<T>(y);
  });
}

namespace {

// A 1-element tensor of x's dtype holding (sum of x, in double) / divisor, rounded once: the
// mean is not taken from the sum rounded to x's dtype, which overflows float16 long before
// the mean does.
void ReduceAll(const DenseTensor& x, double divisor, const char* kernel, DenseTensor* out) {
  VisitFloating(x.dtype(), kernel, [&](auto tag) {
    using T = typename decltype(tag)::type;
    double s = 0;
    const T* p = x.data<T>();
    for (int64_t i = 0, count = x.numel(); i < count; ++i) s += static_cast<double>(p[i]);
    DenseTensor result(CPUPlace(), x.dtype(), DDim({1}));
    result.data<T>()[0] = static_cast<T>(s / divisor);
    *out = std::move(result);
  });
}

}  // namespace

void SumAllKernel(const DenseTensor& x, DenseTensor* out) {
  CheckFloatInput(x, "sum", "x");
  ReduceAll(x, 1.0, "sum", out);
}

void MeanAllKernel(const DenseTensor& x, DenseTensor* out) {
  CheckFloatInput(x, "mean", "x");
  PADDLE_ENFORCE_GT(x.numel(), 0, errors::InvalidArgument("mean: x has no elements."));
  ReduceAll(x, static_cast<double>(x.numel()), "mean", out);
}

void FullKernel(const DDim& dims, DataType dtype, double value, DenseTensor* out) {
  DenseTensor result(CPUPlace(), dtype, dims);
  if (result.numel() > 0) Fill(&result, value);
  *out = std::move(result);
}

void CastKernel(const DenseTensor& x, DataType dtype, DenseTensor* out) {
  CheckCpuInput(x, "cast", "x");
  PADDLE_ENFORCE(!IsComplex(x.dtype()) && !IsComplex(dtype),
                 errors::InvalidArgument("cast: complex types are not supported (%s -> %s).",
                                         DataTypeToString(x.dtype()), DataTypeToString(dtype)));
  DenseTensor result(CPUPlace(), dtype, x.dims());
  VisitDataType(x.dtype(), [&](auto in_tag) {
    using In = typename decltype(in_tag)::type;
    VisitDataType(dtype, [&](auto out_tag) {
      using Out = typename decltype(out_tag)::type;
      if constexpr (!std::is_same_v<In, dtype::complex64> &&
                    !std::is_same_v<In, dtype::complex128> &&
                    !std::is_same_v<Out, dtype::complex64> &&
                    !std::is_same_v<Out, dtype::complex128>) {
        const In* src = x.data<In>();
        Out* dst = result.data<Out>();
        for (int64_t i = 0, count = x.numel(); i < count; ++i) {
          if constexpr (std::is_arithmetic_v<In> && std::is_arithmetic_v<Out>) {
            // Directly: through double, int64 beyond 2^53 would lose its low bits (and
            // int64 -> float32 would round twice).
            dst[i] = static_cast<Out>(src[i]);
          } else {
            dst[i] = static_cast<Out>(static_cast<double>(src[i]));  // float16 / bfloat16
          }
        }
      }
    });
  });
  *out = std::move(result);
}

}  // namespace phi
