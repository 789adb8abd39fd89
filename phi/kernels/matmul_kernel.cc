// Matmul and its gradient: float32 and float64 through OpenBLAS (transposes as cblas flags,
// no copies), float16 and bfloat16 on Eigen maps of the row-major 2-D tensors.
#include <initializer_list>
#include <type_traits>

#include "phi/kernels/blas_internal.h"
#include "phi/kernels/kernel_funcs_internal.h"
#include "phi/kernels/math_kernels.h"

namespace phi {

using kernels_internal::CheckCpuInput;
using kernels_internal::CheckFloating;
using kernels_internal::ConstMatrixMap;
using kernels_internal::MatrixMap;

namespace {

constexpr const char* kMatmul = "matmul";

void Check2D(const DenseTensor& t, const char* kernel, const char* name) {
  CheckCpuInput(t, kernel, name);
  CheckFloating(t, kernel, name);
  PADDLE_ENFORCE_EQ(t.dims().size(), 2,
                    errors::InvalidArgument("%s: %s must be 2-D, got dims %s.", kernel, name,
                                            t.dims().to_str().c_str()));
}

// Rows and columns of op(t).
std::pair<int64_t, int64_t> OpShape(const DenseTensor& t, bool trans) {
  return trans ? std::make_pair(t.dims()[1], t.dims()[0])
               : std::make_pair(t.dims()[0], t.dims()[1]);
}

// Checks x and y (2-D, same floating dtype, inner dims agree); returns the dims of op(x) op(y).
DDim CheckOperands(const DenseTensor& x, const DenseTensor& y, bool trans_x, bool trans_y,
                   const char* kernel) {
  Check2D(x, kernel, "x");
  Check2D(y, kernel, "y");
  PADDLE_ENFORCE(x.dtype() == y.dtype(),
                 errors::InvalidArgument("%s: x is %s but y is %s.", kernel,
                                         DataTypeToString(x.dtype()),
                                         DataTypeToString(y.dtype())));
  auto [m, k] = OpShape(x, trans_x);
  auto [k2, n] = OpShape(y, trans_y);
  PADDLE_ENFORCE(k == k2, errors::InvalidArgument(
                              "%s: inner dims differ: x %s (trans_x=%d) has %ld columns, "
                              "y %s (trans_y=%d) has %ld rows.",
                              kernel, x.dims().to_str().c_str(), int(trans_x), long(k),
                              y.dims().to_str().c_str(), int(trans_y), long(k2)));
  return DDim({m, n});
}

template <typename T>
ConstMatrixMap<T> Map(const DenseTensor& t) {
  return ConstMatrixMap<T>(t.data<T>(), t.dims()[0], t.dims()[1]);
}

// out = op_a(a) @ op_b(b), written into `out` (allocated [m, n]).
template <typename T>
void Gemm(const DenseTensor& a, bool ta, const DenseTensor& b, bool tb, DenseTensor* out) {
  auto [m, k] = OpShape(a, ta);
  int64_t n = OpShape(b, tb).second;
  DenseTensor result(CPUPlace(), a.dtype(), DDim({m, n}));
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    kernels_internal::BlasGemm(ta, tb, m, n, k, a.data<T>(), a.dims()[1], b.data<T>(),
                               b.dims()[1], /*accumulate=*/false, result.data<T>());
  } else {
    MatrixMap<T> o(result.data<T>(), m, n);
    auto A = Map<T>(a);
    auto B = Map<T>(b);
    if (k == 0) o.setZero();
    else if (!ta && !tb) o.noalias() = A * B;
    else if (ta && !tb) o.noalias() = A.transpose() * B;
    else if (!ta && tb) o.noalias() = A * B.transpose();
    else o.noalias() = A.transpose() * B.transpose();
  }
  *out = std::move(result);
}

// out += op_a(a) @ op_b(b) in place; out is [m, n], contiguous, shares no storage with a or b.
template <typename T>
void GemmAdd(const DenseTensor& a, bool ta, const DenseTensor& b, bool tb, DenseTensor* out) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    auto [m, k] = OpShape(a, ta);
    int64_t n = OpShape(b, tb).second;
    kernels_internal::BlasGemm(ta, tb, m, n, k, a.data<T>(), a.dims()[1], b.data<T>(),
                               b.dims()[1], /*accumulate=*/true, out->data<T>());
  } else {
    DenseTensor product;
    Gemm<T>(a, ta, b, tb, &product);
    AccumulateKernel(product, out);
  }
}

// The operands of dx and dy. out = op(x) op(y); with X = op(x), Y = op(y): dX = dout Y^T,
// dY = X^T dout, then op undone. `gemm(a, ta, b, tb, out)` computes one of them.
template <typename G>
void GradX(const DenseTensor& y, const DenseTensor& dout, bool trans_x, bool trans_y,
           DenseTensor* dx, G gemm) {
  if (!trans_x) gemm(dout, false, y, !trans_y, dx);  // dout op(y)^T
  else gemm(y, trans_y, dout, true, dx);             // (dout op(y)^T)^T
}
template <typename G>
void GradY(const DenseTensor& x, const DenseTensor& dout, bool trans_x, bool trans_y,
           DenseTensor* dy, G gemm) {
  if (!trans_y) gemm(x, !trans_x, dout, false, dy);  // op(x)^T dout
  else gemm(dout, true, x, trans_x, dy);             // (op(x)^T dout)^T
}

// Checks x, y and dout of a matmul gradient (all are read: an unchecked dout of the wrong
// shape would have the GEMM read past its end).
void CheckGradOperands(const DenseTensor& x, const DenseTensor& y, const DenseTensor& dout,
                       bool trans_x, bool trans_y, const char* kernel) {
  DDim out_dims = CheckOperands(x, y, trans_x, trans_y, kernel);
  Check2D(dout, kernel, "dout");
  PADDLE_ENFORCE(dout.dtype() == x.dtype() && dout.dims() == out_dims,
                 errors::InvalidArgument("%s: dout must be %s %s (the output's), got %s %s.",
                                         kernel, DataTypeToString(x.dtype()),
                                         out_dims.to_str().c_str(),
                                         DataTypeToString(dout.dtype()),
                                         dout.dims().to_str().c_str()));
}

// Raises unless `g` can take `of`'s gradient in place: initialized, contiguous, on the CPU,
// of of's dims and dtype, and sharing no storage with an operand (it is written while they
// are read).
void CheckAccumulator(const DenseTensor& g, const DenseTensor& of, const char* name,
                      std::initializer_list<const DenseTensor*> operands) {
  CheckCpuInput(g, "matmul_grad_add", name);
  PADDLE_ENFORCE(g.dims() == of.dims() && g.dtype() == of.dtype(),
                 errors::InvalidArgument("matmul_grad_add: %s must be %s %s, got %s %s.", name,
                                         DataTypeToString(of.dtype()),
                                         of.dims().to_str().c_str(),
                                         DataTypeToString(g.dtype()),
                                         g.dims().to_str().c_str()));
  for (const DenseTensor* t : operands) {
    PADDLE_ENFORCE(g.Holder() != t->Holder(),
                   errors::InvalidArgument(
                       "matmul_grad_add: %s shares storage with an operand.", name));
  }
}

}  // namespace

void MatmulKernel(const DenseTensor& x, const DenseTensor& y, bool trans_x, bool trans_y,
                  DenseTensor* out) {
  CheckOperands(x, y, trans_x, trans_y, kMatmul);
  kernels_internal::VisitFloating(x.dtype(), kMatmul, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Gemm<T>(x, trans_x, y, trans_y, out);
  });
}

void MatmulGradKernel(const DenseTensor& x, const DenseTensor& y, const DenseTensor& dout,
                      bool trans_x, bool trans_y, DenseTensor* dx, DenseTensor* dy) {
  CheckGradOperands(x, y, dout, trans_x, trans_y, "matmul_grad");
  kernels_internal::VisitFloating(x.dtype(), "matmul_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto gemm = [](const DenseTensor& a, bool ta, const DenseTensor& b, bool tb,
                   DenseTensor* out) { Gemm<T>(a, ta, b, tb, out); };
    // Both are computed before either output is written: dx may be x or y itself.
    DenseTensor gx, gy;
    if (dx != nullptr) GradX(y, dout, trans_x, trans_y, &gx, gemm);
    if (dy != nullptr) GradY(x, dout, trans_x, trans_y, &gy, gemm);
    if (dx != nullptr) *dx = std::move(gx);
    if (dy != nullptr) *dy = std::move(gy);
  });
}

void MatmulGradAddKernel(const DenseTensor& x, const DenseTensor& y, const DenseTensor& dout,
                         bool trans_x, bool trans_y, DenseTensor* dx, DenseTensor* dy) {
  CheckGradOperands(x, y, dout, trans_x, trans_y, "matmul_grad_add");
  if (dx != nullptr) CheckAccumulator(*dx, x, "dx", {&x, &y, &dout});
  if (dy != nullptr) CheckAccumulator(*dy, y, "dy", {&x, &y, &dout});
  PADDLE_ENFORCE(dx == nullptr || dy == nullptr || dx->Holder() != dy->Holder(),
                 errors::InvalidArgument("matmul_grad_add: dx and dy share storage."));
  kernels_internal::VisitFloating(x.dtype(), "matmul_grad_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto gemm_add = [](const DenseTensor& a, bool ta, const DenseTensor& b, bool tb,
                       DenseTensor* out) { GemmAdd<T>(a, ta, b, tb, out); };
    if (dx != nullptr) GradX(y, dout, trans_x, trans_y, dx, gemm_add);
    if (dy != nullptr) GradY(x, dout, trans_x, trans_y, dy, gemm_add);
  });
}

}  // namespace phi
