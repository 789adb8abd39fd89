#include "paddle_like/framework/var_type.h"

#include <utility>

#include "phi/core/errors.h"

namespace paddle_like {
namespace framework {

namespace {
// framework.proto's VarType::Type values of the tensor types.
constexpr std::pair<int, phi::DataType> kTable[] = {
    {0, phi::DataType::BOOL},       {2, phi::DataType::INT32},       {3, phi::DataType::INT64},
    {4, phi::DataType::FLOAT16},    {5, phi::DataType::FLOAT32},     {6, phi::DataType::FLOAT64},
    {20, phi::DataType::UINT8},     {21, phi::DataType::INT8},       {22, phi::DataType::BFLOAT16},
    {23, phi::DataType::COMPLEX64}, {24, phi::DataType::COMPLEX128},
};
}  // namespace

int ToVarType(phi::DataType dtype) {
  for (const auto& e : kTable) {
    if (e.second == dtype) return e.first;
  }
  PADDLE_THROW(phi::errors::InvalidArgument("Data type %s has no VarType number.",
                                            phi::DataTypeToString(dtype)));
}

phi::DataType FromVarType(int var_type) {
  for (const auto& e : kTable) {
    if (e.first == var_type) return e.second;
  }
  PADDLE_THROW(phi::errors::InvalidArgument(
      "dtype attribute %d is no tensor VarType (expected one of 0 bool, 2 int32, 3 int64, "
      "4 float16, 5 float32, 6 float64, 20 uint8, 21 int8, 22 bfloat16, 23 complex64, "
      "24 complex128).",
      var_type));
}

}  // namespace framework
}  // namespace paddle_like
