#include "phi/core/data_type.h"

#include "phi/core/errors.h"

namespace phi {

size_t SizeOf(DataType t) {
  return VisitDataType(t, [](auto tag) { return sizeof(typename decltype(tag)::type); });
}

const char* DataTypeToString(DataType t) {
  switch (t) {
    case DataType::UNDEFINED: return "undefined";
    case DataType::BOOL: return "bool";
    case DataType::INT8: return "int8";
    case DataType::UINT8: return "uint8";
    case DataType::INT32: return "int32";
    case DataType::INT64: return "int64";
    case DataType::FLOAT16: return "float16";
    case DataType::BFLOAT16: return "bfloat16";
    case DataType::FLOAT32: return "float32";
    case DataType::FLOAT64: return "float64";
    case DataType::COMPLEX64: return "complex64";
    case DataType::COMPLEX128: return "complex128";
  }
  return "invalid";
}

bool IsIntegral(DataType t) {
  return t == DataType::BOOL || t == DataType::INT8 || t == DataType::UINT8 ||
         t == DataType::INT32 || t == DataType::INT64;
}
bool IsFloating(DataType t) {
  return t == DataType::FLOAT16 || t == DataType::BFLOAT16 || t == DataType::FLOAT32 ||
         t == DataType::FLOAT64;
}
bool IsComplex(DataType t) { return t == DataType::COMPLEX64 || t == DataType::COMPLEX128; }

DataType ToRealType(DataType t) {
  if (t == DataType::COMPLEX64) return DataType::FLOAT32;
  if (t == DataType::COMPLEX128) return DataType::FLOAT64;
  return t;
}

std::ostream& operator<<(std::ostream& os, DataType t) { return os << DataTypeToString(t); }

void ThrowUndefinedDataType(DataType t) {
  PADDLE_THROW(errors::InvalidArgument(
      "Expected a defined data type (bool, int8, ..., complex128), but received %s (%d).",
      DataTypeToString(t), static_cast<int>(t)));
}

}  // namespace phi
