// Reduce operations and which data types each accepts.
#pragma once

#include <cstdint>
#include <string>

#include "phi/core/data_type.h"

namespace phi {
namespace distributed {

enum class ReduceOp : uint8_t {
  SUM = 0,
  AVG,
  PRODUCT,
  MIN,
  MAX,
  BAND,        // integers and bool only
  BOR,         // integers and bool only
  BXOR,        // integers and bool only
  PREMUL_SUM,  // sum of (factor * x); the factor travels with the op
};

// An op with its PREMUL_SUM factor: what the engine hands to a CommContext.
struct Reduction {
  ReduceOp op = ReduceOp::SUM;
  double premul_factor = 1.0;
};

const char* ReduceOpToString(ReduceOp op);

// Raises InvalidArgument when `op` is not defined on `dtype`: bitwise ops on floating or
// complex types; AVG/PREMUL_SUM on bool; on complex anything but SUM, AVG, PREMUL_SUM
// (complex goes through its real view, which is only right for those).
void CheckReduceSupported(ReduceOp op, DataType dtype);

}  // namespace distributed
}  // namespace phi
