// Shared by the math kernels' .cc files only: dtype dispatch, input checks and Eigen views.
#pragma once

#include <string>

#include <Eigen/Core>

#include "phi/core/dense_tensor.h"
#include "phi/core/errors.h"

namespace phi {
namespace kernels_internal {

// Raises unless `t` is an initialized, contiguous CPU tensor.
void CheckCpuInput(const DenseTensor& t, const char* kernel, const char* name);
// Raises unless `t` has a floating dtype (float16, bfloat16, float32, float64).
void CheckFloating(const DenseTensor& t, const char* kernel, const char* name);
// Raises unless a and b have the same dims (and dtype).
void CheckSameShape(const DenseTensor& a, const DenseTensor& b, const char* kernel);
// Raises unless t is int64 (ids, labels).
void CheckInt64(const DenseTensor& t, const char* kernel, const char* name);

// Calls v(TypeTag<T>{}) for the floating dtypes; raises for any other.
template <typename Visitor>
decltype(auto) VisitFloating(DataType t, const char* kernel, Visitor&& v) {
  switch (t) {
    case DataType::FLOAT32: return v(TypeTag<float>{});
    case DataType::FLOAT64: return v(TypeTag<double>{});
    case DataType::FLOAT16: return v(TypeTag<dtype::float16>{});
    case DataType::BFLOAT16: return v(TypeTag<dtype::bfloat16>{});
    default:
      PADDLE_THROW(errors::InvalidArgument(
          "%s supports float32, float64, float16 and bfloat16, got %s.", kernel,
          DataTypeToString(t)));
  }
}

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using MatrixMap = Eigen::Map<RowMatrix<T>>;
template <typename T>
using ConstMatrixMap = Eigen::Map<const RowMatrix<T>>;
template <typename T>
using VectorMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstVectorMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

template <typename T>
VectorMap<T> Flat(DenseTensor* t) {
  return VectorMap<T>(t->data<T>(), t->numel());
}
template <typename T>
ConstVectorMap<T> Flat(const DenseTensor& t) {
  return ConstVectorMap<T>(t.data<T>(), t.numel());
}

// Gives `out` contiguous CPU storage of dims x dtype.
inline void Allocate(DenseTensor* out, DataType dtype, const DDim& dims) {
  out->AllocateLike(CPUPlace(), dtype, dims);
}

// Normalizes a possibly negative axis against `rank`; raises when out of range.
int NormalizeAxis(int axis, int rank, const char* kernel);

}  // namespace kernels_internal
}  // namespace phi
