// Matmul and its gradient on Eigen maps of row-major 2-D tensors.
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
  MatrixMap<T> o(result.data<T>(), m, n);
  auto A = Map<T>(a);
  auto B = Map<T>(b);
  if (k == 0) o.setZero();
  else if (!ta && !tb) o.noalias() = A * B;
  else if (ta && !tb) o.noalias() = A.transpose() * B;
  else if (!ta && tb) o.noalias() = A * B.transpose();
  else o.noalias() = A.transpose() * B.transpose();
  *out = std::move(result);
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
  // x, y and dout are all read: each is checked (an unchecked dout of the wrong shape would
  // have Eigen read past its end).
  DDim out_dims = CheckOperands(x, y, trans_x, trans_y, "matmul_grad");
  Check2D(dout, "matmul_grad", "dout");
  PADDLE_ENFORCE(dout.dtype() == x.dtype() && dout.dims() == out_dims,
                 errors::InvalidArgument("matmul_grad: dout must be %s %s (the output's), got "
                                         "%s %s.",
                                         DataTypeToString(x.dtype()), out_dims.to_str().c_str(),
                                         DataTypeToString(dout.dtype()),
                                         dout.dims().to_str().c_str()));
  // out = op(x) op(y). With X = op(x), Y = op(y): dX = dout Y^T, dY = X^T dout; then undo op.
  kernels_internal::VisitFloating(x.dtype(), "matmul_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Both are computed before either output is written: dx may be x or y itself.
    DenseTensor gx, gy;
    if (dx != nullptr) {
      if (!trans_x) Gemm<T>(dout, false, y, !trans_y, &gx);  // dout op(y)^T
      else Gemm<T>(y, trans_y, dout, true, &gx);             // (dout op(y)^T)^T
    }
    if (dy != nullptr) {
      if (!trans_y) Gemm<T>(x, !trans_x, dout, false, &gy);  // op(x)^T dout
      else Gemm<T>(dout, true, x, trans_x, &gy);             // (op(x)^T dout)^T
    }
    if (dx != nullptr) *dx = std::move(gx);
    if (dy != nullptr) *dy = std::move(gy);
  });
}

}  // namespace phi
