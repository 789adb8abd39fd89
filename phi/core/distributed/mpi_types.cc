// Our dtypes and reduce ops as MPI sees them (mpi_comm_context_internal.h).
#include <climits>
#include <mutex>

#include "phi/core/distributed/cpu_reduce.h"
#include "phi/core/distributed/mpi_comm_context_internal.h"

namespace phi {
namespace distributed {
namespace {

// MPI's user functions carry no state, so each (dtype, op) pair that needs one gets a
// function of its own; it calls the shared kernel: inout[i] = in[i] (op) inout[i].
template <DataType D, ReduceOp O>
void UserReduce(void* in, void* inout, int* len, MPI_Datatype*) {
  static const CpuReduceFn fn = GetCpuReduceFn(D, O);
  fn(inout, inout, in, static_cast<size_t>(*len));
}

// The ops MPI lacks for one 16-bit float type, and that type as MPI sees it: 2 opaque bytes.
struct UserOps {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op sum = MPI_OP_NULL, prod = MPI_OP_NULL, min = MPI_OP_NULL, max = MPI_OP_NULL;
};

template <DataType D>
UserOps MakeUserOps() {
  UserOps u;
  CheckMpi(MPI_Type_contiguous(2, MPI_BYTE, &u.type), "MPI_Type_contiguous", "16-bit type");
  CheckMpi(MPI_Type_commit(&u.type), "MPI_Type_commit", "16-bit type");
  CheckMpi(MPI_Op_create(&UserReduce<D, ReduceOp::SUM>, 1, &u.sum), "MPI_Op_create", "sum");
  CheckMpi(MPI_Op_create(&UserReduce<D, ReduceOp::PRODUCT>, 1, &u.prod), "MPI_Op_create",
           "product");
  CheckMpi(MPI_Op_create(&UserReduce<D, ReduceOp::MIN>, 1, &u.min), "MPI_Op_create", "min");
  CheckMpi(MPI_Op_create(&UserReduce<D, ReduceOp::MAX>, 1, &u.max), "MPI_Op_create", "max");
  return u;
}

// Created once, after MPI_Init (the first reduction asks); MPI_Finalize frees them.
const UserOps& Float16Ops() {
  static const UserOps ops = MakeUserOps<DataType::FLOAT16>();
  return ops;
}
const UserOps& BFloat16Ops() {
  static const UserOps ops = MakeUserOps<DataType::BFLOAT16>();
  return ops;
}

}  // namespace

int MpiCount(int64_t count, const char* what) {
  PADDLE_ENFORCE(count >= 0 && count <= INT_MAX,
                 errors::InvalidArgument("MPI %s: %lld elements do not fit MPI's int counts "
                                         "(at most %d per call).",
                                         what, static_cast<long long>(count), INT_MAX));
  return static_cast<int>(count);
}

MpiBuffer MpiMoveBuffer(DataType dtype, int64_t count) {
  if (IsComplex(dtype)) {
    dtype = ToRealType(dtype);
    count *= 2;
  }
  MPI_Datatype t = MPI_BYTE;
  switch (SizeOf(dtype)) {
    case 1: t = MPI_BYTE; break;
    case 2: t = MPI_UINT16_T; break;
    case 4: t = MPI_UINT32_T; break;
    case 8: t = MPI_UINT64_T; break;
    default:
      PADDLE_THROW(errors::InvalidArgument("MPI: no transfer type for %s.",
                                           DataTypeToString(dtype)));
  }
  return MpiBuffer{t, MpiCount(count, "transfer")};
}

MpiReduction MpiReductionFor(DataType dtype, ReduceOp op) {
  // AVG and PREMUL_SUM are sums here (see the header).
  if (op == ReduceOp::AVG || op == ReduceOp::PREMUL_SUM) op = ReduceOp::SUM;
  if (dtype == DataType::BOOL) {  // the shared kernels' bool semantics, natively
    switch (op) {
      case ReduceOp::SUM: case ReduceOp::MAX: case ReduceOp::BOR:
        return {MPI_C_BOOL, MPI_LOR};
      case ReduceOp::PRODUCT: case ReduceOp::MIN: case ReduceOp::BAND:
        return {MPI_C_BOOL, MPI_LAND};
      case ReduceOp::BXOR:
        return {MPI_C_BOOL, MPI_LXOR};
      default: break;
    }
  }
  if (dtype == DataType::FLOAT16 || dtype == DataType::BFLOAT16) {
    const UserOps& u = dtype == DataType::FLOAT16 ? Float16Ops() : BFloat16Ops();
    switch (op) {
      case ReduceOp::SUM: return {u.type, u.sum};
      case ReduceOp::PRODUCT: return {u.type, u.prod};
      case ReduceOp::MIN: return {u.type, u.min};
      case ReduceOp::MAX: return {u.type, u.max};
      default: break;
    }
  }
  MPI_Datatype t = MPI_DATATYPE_NULL;
  switch (dtype) {
    case DataType::INT8: t = MPI_INT8_T; break;
    case DataType::UINT8: t = MPI_UINT8_T; break;
    case DataType::INT32: t = MPI_INT32_T; break;
    case DataType::INT64: t = MPI_INT64_T; break;
    case DataType::FLOAT32: t = MPI_FLOAT; break;
    case DataType::FLOAT64: t = MPI_DOUBLE; break;
    default: break;
  }
  MPI_Op o = MPI_OP_NULL;
  switch (op) {
    case ReduceOp::SUM: o = MPI_SUM; break;
    case ReduceOp::PRODUCT: o = MPI_PROD; break;
    case ReduceOp::MIN: o = MPI_MIN; break;
    case ReduceOp::MAX: o = MPI_MAX; break;
    case ReduceOp::BAND: o = IsIntegral(dtype) ? MPI_BAND : MPI_OP_NULL; break;
    case ReduceOp::BOR: o = IsIntegral(dtype) ? MPI_BOR : MPI_OP_NULL; break;
    case ReduceOp::BXOR: o = IsIntegral(dtype) ? MPI_BXOR : MPI_OP_NULL; break;
    default: break;
  }
  PADDLE_ENFORCE(t != MPI_DATATYPE_NULL && o != MPI_OP_NULL,
                 errors::InvalidArgument("MPI: reduce op %s is not defined on %s.",
                                         ReduceOpToString(op), DataTypeToString(dtype)));
  return {t, o};
}

}  // namespace distributed
}  // namespace phi
