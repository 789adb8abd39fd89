// Element types. float16 and bfloat16 are Eigen's arithmetic types (real conversions
// and operators), not raw 16-bit integers; complex types are std::complex.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

#include <Eigen/Core>

namespace phi {

namespace dtype {
using float16 = Eigen::half;
using bfloat16 = Eigen::bfloat16;
using complex64 = std::complex<float>;
using complex128 = std::complex<double>;
}  // namespace dtype

enum class DataType : int8_t {
  UNDEFINED = 0,
  BOOL,
  INT8,
  UINT8,
  INT32,
  INT64,
  FLOAT16,
  BFLOAT16,
  FLOAT32,
  FLOAT64,
  COMPLEX64,
  COMPLEX128,
};

// Every defined type, in declaration order (tests iterate over it).
constexpr DataType kAllDataTypes[] = {
    DataType::BOOL,     DataType::INT8,    DataType::UINT8,     DataType::INT32,
    DataType::INT64,    DataType::FLOAT16, DataType::BFLOAT16,  DataType::FLOAT32,
    DataType::FLOAT64,  DataType::COMPLEX64, DataType::COMPLEX128,
};

size_t SizeOf(DataType t);
// Paddle's names: "bool", "int8", ..., "float16", "bfloat16", "complex64".
const char* DataTypeToString(DataType t);
bool IsIntegral(DataType t);  // bool and the integer types
bool IsFloating(DataType t);  // float16, bfloat16, float32, float64
bool IsComplex(DataType t);
// The real type a complex type is made of (COMPLEX64 -> FLOAT32); others map to themselves.
DataType ToRealType(DataType t);
std::ostream& operator<<(std::ostream& os, DataType t);

template <typename T>
struct CppTypeToDataType;
#define PHI_MAP_CPP_TYPE(cpp, dt) \
  template <>                     \
  struct CppTypeToDataType<cpp> { \
    static constexpr DataType Type() { return DataType::dt; } \
  };
PHI_MAP_CPP_TYPE(bool, BOOL)
PHI_MAP_CPP_TYPE(int8_t, INT8)
PHI_MAP_CPP_TYPE(uint8_t, UINT8)
PHI_MAP_CPP_TYPE(int32_t, INT32)
PHI_MAP_CPP_TYPE(int64_t, INT64)
PHI_MAP_CPP_TYPE(dtype::float16, FLOAT16)
PHI_MAP_CPP_TYPE(dtype::bfloat16, BFLOAT16)
PHI_MAP_CPP_TYPE(float, FLOAT32)
PHI_MAP_CPP_TYPE(double, FLOAT64)
PHI_MAP_CPP_TYPE(dtype::complex64, COMPLEX64)
PHI_MAP_CPP_TYPE(dtype::complex128, COMPLEX128)
#undef PHI_MAP_CPP_TYPE

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls visitor(TypeTag<T>{}) with the C++ type of `t`; raises InvalidArgument for
// UNDEFINED. All dispatch on dtype goes through here so a new type is added in one place.
template <typename Visitor>
decltype(auto) VisitDataType(DataType t, Visitor&& visitor);

[[noreturn]] void ThrowUndefinedDataType(DataType t);

template <typename Visitor>
decltype(auto) VisitDataType(DataType t, Visitor&& v) {
  switch (t) {
    case DataType::BOOL: return v(TypeTag<bool>{});
    case DataType::INT8: return v(TypeTag<int8_t>{});
    case DataType::UINT8: return v(TypeTag<uint8_t>{});
    case DataType::INT32: return v(TypeTag<int32_t>{});
    case DataType::INT64: return v(TypeTag<int64_t>{});
    case DataType::FLOAT16: return v(TypeTag<dtype::float16>{});
    case DataType::BFLOAT16: return v(TypeTag<dtype::bfloat16>{});
    case DataType::FLOAT32: return v(TypeTag<float>{});
    case DataType::FLOAT64: return v(TypeTag<double>{});
    case DataType::COMPLEX64: return v(TypeTag<dtype::complex64>{});
    case DataType::COMPLEX128: return v(TypeTag<dtype::complex128>{});
    default: ThrowUndefinedDataType(t);
  }
}

}  // namespace phi
