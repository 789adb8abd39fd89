// The `dtype` attributes of ops (recv_v2, fill_constant, cast, ...) hold Paddle's
// framework.proto VarType numbers (FP32 = 5, FP64 = 6, INT64 = 3, ...), as a program
// exported from Paddle does. These convert them to and from phi::DataType.
#pragma once

#include "phi/core/data_type.h"

namespace paddle_like {
namespace framework {

// InvalidArgument for UNDEFINED.
int ToVarType(phi::DataType dtype);
// InvalidArgument naming the number for one that is no tensor type.
phi::DataType FromVarType(int var_type);

}  // namespace framework
}  // namespace paddle_like
