// How phi's dtypes and reductions map onto NCCL, and NCCL's errors onto phi's. Pure
// functions (no communicator, no device), so they are tested on machines without a GPU.
#pragma once

#include <nccl.h>

#include <array>
#include <cstdint>
#include <string>

#include "phi/core/data_type.h"
#include "phi/core/distributed/reduce_op.h"

namespace phi {
namespace distributed {

// An NCCL view of `count` elements of a phi dtype. Complex types travel as their real type
// with twice the count; bool as ncclUint8.
struct NCCLBuffer {
  ncclDataType_t dtype;
  size_t count;
};
NCCLBuffer ToNCCLBuffer(DataType dtype, int64_t count);
// The element type alone (complex: its real type). InvalidArgument for UNDEFINED.
ncclDataType_t ToNCCLDataType(DataType dtype);
const char* NCCLDataTypeToString(ncclDataType_t dtype);

// What to hand NCCL for a reduction of `count` elements of `dtype`:
//  - AVG -> ncclAvg; PREMUL_SUM -> premul (the caller creates the op with
//    ncclRedOpCreatePreMulSum on `scalar`, which holds the factor as `buffer.dtype`);
//  - bool: SUM -> ncclMax (any), PRODUCT -> ncclMin (all), MIN/MAX as they are,
//    BAND -> ncclMin and BOR -> ncclMax (the same truth tables on 0/1);
//  - complex: SUM/AVG/PREMUL_SUM over the real view (2x count); other ops are rejected
//    (CheckReduceSupported);
//  - BAND/BOR/BXOR on integers and BXOR on bool: UnimplementedError (NCCL has no bitwise
//    reductions); likewise PREMUL_SUM on integers with a non-integral factor.
struct NCCLReducePlan {
  NCCLBuffer buffer;
  ncclRedOp_t op = ncclSum;  // meaningless when premul
  bool premul = false;
  std::array<uint8_t, 8> scalar{};  // the premul factor, encoded as buffer.dtype
};
NCCLReducePlan PlanNCCLReduction(DataType dtype, int64_t count, const Reduction& reduction);

// "2.28.9" from ncclGetVersion (the library loaded, not the header compiled against).
std::string NCCLVersionString();
// Raises the phi error for `result`: UnavailableError for ncclRemoteError (a peer failed or
// left), ExternalError otherwise; the message names `what`, ncclGetErrorString, the NCCL
// version, `context` and ncclGetLastError(comm) (comm may be null). No-op for ncclSuccess.
void CheckNCCL(ncclResult_t result, const char* what, ncclComm_t comm,
               const std::string& context = "");

}  // namespace distributed
}  // namespace phi
