#include "phi/core/distributed/nccl_tools_internal.h"

#include <cmath>
#include <cstring>

#include "phi/core/errors.h"

namespace phi {
namespace distributed {

ncclDataType_t ToNCCLDataType(DataType dtype) {
  switch (dtype) {
    case DataType::BOOL: return ncclUint8;
    case DataType::INT8: return ncclInt8;
    case DataType::UINT8: return ncclUint8;
    case DataType::INT32: return ncclInt32;
    case DataType::INT64: return ncclInt64;
    case DataType::FLOAT16: return ncclFloat16;
    case DataType::BFLOAT16: return ncclBfloat16;
    case DataType::FLOAT32: return ncclFloat32;
    case DataType::FLOAT64: return ncclFloat64;
    case DataType::COMPLEX64: return ncclFloat32;
    case DataType::COMPLEX128: return ncclFloat64;
    default: break;
  }
  PADDLE_THROW(errors::InvalidArgument("NCCL has no data type for %s.", DataTypeToString(dtype)));
}

NCCLBuffer ToNCCLBuffer(DataType dtype, int64_t count) {
  PADDLE_ENFORCE_GE(count, 0,
                    errors::InvalidArgument("NCCL buffer of negative element count."));
  size_t n = static_cast<size_t>(count);
  if (IsComplex(dtype)) n *= 2;
  return NCCLBuffer{ToNCCLDataType(dtype), n};
}

const char* NCCLDataTypeToString(ncclDataType_t dtype) {
  switch (dtype) {
    case ncclInt8: return "ncclInt8";
    case ncclUint8: return "ncclUint8";
    case ncclInt32: return "ncclInt32";
    case ncclUint32: return "ncclUint32";
    case ncclInt64: return "ncclInt64";
    case ncclUint64: return "ncclUint64";
    case ncclFloat16: return "ncclFloat16";
    case ncclFloat32: return "ncclFloat32";
    case ncclFloat64: return "ncclFloat64";
    case ncclBfloat16: return "ncclBfloat16";
    default: return "ncclDataType(?)";
  }
}

namespace {
template <typename T>
std::array<uint8_t, 8> Encode(T v) {
  static_assert(sizeof(T) <= 8, "scalar too wide");
  std::array<uint8_t, 8> out{};
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

std::array<uint8_t, 8> EncodeScalar(ncclDataType_t dtype, double v) {
  switch (dtype) {
    case ncclInt8: return Encode(static_cast<int8_t>(v));
    case ncclUint8: return Encode(static_cast<uint8_t>(v));
    case ncclInt32: return Encode(static_cast<int32_t>(v));
    case ncclInt64: return Encode(static_cast<int64_t>(v));
    case ncclFloat16: return Encode(dtype::float16(static_cast<float>(v)));
    case ncclBfloat16: return Encode(dtype::bfloat16(static_cast<float>(v)));
    case ncclFloat32: return Encode(static_cast<float>(v));
    case ncclFloat64: return Encode(v);
    default: break;
  }
  PADDLE_THROW(errors::InvalidArgument("No PREMUL_SUM scalar encoding for %s.",
                                       NCCLDataTypeToString(dtype)));
}
}  // namespace

NCCLReducePlan PlanNCCLReduction(DataType dtype, int64_t count, const Reduction& reduction) {
  const ReduceOp op = reduction.op;
  const bool bitwise = op == ReduceOp::BAND || op == ReduceOp::BOR || op == ReduceOp::BXOR;
  if (bitwise && dtype != DataType::BOOL && IsIntegral(dtype)) {
    PADDLE_THROW(errors::Unimplemented(
        "Reduce op %s on %s is not supported by the NCCL backend: NCCL has no bitwise "
        "reductions (use the Gloo backend on CPU tensors, or bool tensors for logical "
        "and/or).",
        ReduceOpToString(op), DataTypeToString(dtype)));
  }
  if (op == ReduceOp::BXOR && dtype == DataType::BOOL) {
    PADDLE_THROW(errors::Unimplemented(
        "Reduce op BXOR on bool is not supported by the NCCL backend: NCCL has no bitwise "
        "reductions (BAND and BOR on bool are, as MIN and MAX)."));
  }
  CheckReduceSupported(op, dtype);

  NCCLReducePlan plan;
  plan.buffer = ToNCCLBuffer(dtype, count);
  if (dtype == DataType::BOOL) {
    switch (op) {
      case ReduceOp::SUM: plan.op = ncclMax; break;      // any
      case ReduceOp::PRODUCT: plan.op = ncclMin; break;  // all
      case ReduceOp::MIN: plan.op = ncclMin; break;
      case ReduceOp::MAX: plan.op = ncclMax; break;
      case ReduceOp::BAND: plan.op = ncclMin; break;
      case ReduceOp::BOR: plan.op = ncclMax; break;
      default: break;  // rejected above
    }
    return plan;
  }
  switch (op) {
    case ReduceOp::SUM: plan.op = ncclSum; break;
    case ReduceOp::AVG: plan.op = ncclAvg; break;
    case ReduceOp::PRODUCT: plan.op = ncclProd; break;
    case ReduceOp::MIN: plan.op = ncclMin; break;
    case ReduceOp::MAX: plan.op = ncclMax; break;
    case ReduceOp::PREMUL_SUM:
      // NCCL multiplies by the factor converted to the element type; the CPU engine
      // truncates x * factor. They agree on integers only for an integral factor.
      if (IsIntegral(dtype) && reduction.premul_factor != std::trunc(reduction.premul_factor)) {
        PADDLE_THROW(errors::Unimplemented(
            "PREMUL_SUM on %s with the non-integral factor %g is not supported by the NCCL "
            "backend (NCCL would truncate the factor, not each product).",
            DataTypeToString(dtype), reduction.premul_factor));
      }
      plan.premul = true;
      plan.scalar = EncodeScalar(plan.buffer.dtype, reduction.premul_factor);
      break;
    default:
      PADDLE_THROW(errors::Unimplemented("Reduce op %s is not supported by NCCL.",
                                         ReduceOpToString(op)));
  }
  return plan;
}

std::string NCCLVersionString() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  // Since 2.9 the code is major*10000 + minor*100 + patch.
  int major = v / 10000, minor = (v / 100) % 100, patch = v % 100;
  if (v < 10000) major = v / 1000, minor = (v / 100) % 10, patch = v % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

void CheckNCCL(ncclResult_t result, const char* what, ncclComm_t comm,
               const std::string& context) {
  if (result == ncclSuccess) return;
  std::string msg = std::string("NCCL error in ") + what + ": " + ncclGetErrorString(result) +
                    " (ncclResult_t " + std::to_string(static_cast<int>(result)) + ", NCCL " +
                    NCCLVersionString() + ")";
  if (!context.empty()) msg += " on " + context;
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') msg += ". Last NCCL error: " + std::string(last);
  if (result == ncclRemoteError) {
    PADDLE_THROW(errors::Unavailable(msg + ". A peer failed or left the communicator."));
  }
  PADDLE_THROW(errors::External(msg));
}

}  // namespace distributed
}  // namespace phi
