#include "phi/core/distributed/reduce_op.h"

#include "phi/core/errors.h"

namespace phi {
namespace distributed {

const char* ReduceOpToString(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM: return "SUM";
    case ReduceOp::AVG: return "AVG";
    case ReduceOp::PRODUCT: return "PRODUCT";
    case ReduceOp::MIN: return "MIN";
    case ReduceOp::MAX: return "MAX";
    case ReduceOp::BAND: return "BAND";
    case ReduceOp::BOR: return "BOR";
    case ReduceOp::BXOR: return "BXOR";
    case ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
  }
  return "UNKNOWN";
}

void CheckReduceSupported(ReduceOp op, DataType dtype) {
  const bool bitwise = op == ReduceOp::BAND || op == ReduceOp::BOR || op == ReduceOp::BXOR;
  if (bitwise && !IsIntegral(dtype)) {
    PADDLE_THROW(errors::InvalidArgument(
        "Reduce op %s is defined for integer and bool tensors only, but the tensor is %s.",
        ReduceOpToString(op), DataTypeToString(dtype)));
  }
  if (IsComplex(dtype) && op != ReduceOp::SUM && op != ReduceOp::AVG &&
      op != ReduceOp::PREMUL_SUM) {
    PADDLE_THROW(errors::InvalidArgument(
        "Reduce op %s is not defined on %s: complex tensors support SUM, AVG and PREMUL_SUM "
        "(reduced through their real view).",
        ReduceOpToString(op), DataTypeToString(dtype)));
  }
  if (dtype == DataType::BOOL && (op == ReduceOp::AVG || op == ReduceOp::PREMUL_SUM)) {
    PADDLE_THROW(errors::InvalidArgument(
        "Reduce op %s is not defined on bool tensors (use SUM/MAX for any, PRODUCT/MIN for "
        "all, or the bitwise ops).",
        ReduceOpToString(op)));
  }
  if (dtype == DataType::UNDEFINED) ThrowUndefinedDataType(dtype);
}

}  // namespace distributed
}  // namespace phi
