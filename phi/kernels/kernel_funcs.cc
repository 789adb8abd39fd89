#include "phi/kernels/kernel_funcs_internal.h"

namespace phi {
namespace kernels_internal {

void CheckCpuInput(const DenseTensor& t, const char* kernel, const char* name) {
  PADDLE_ENFORCE(t.initialized(),
                 errors::InvalidArgument("%s: input %s is not initialized.", kernel, name));
  PADDLE_ENFORCE(t.place().is_cpu(),
                 errors::InvalidArgument("%s: input %s must be on the CPU, it is on %s.", kernel,
                                         name, t.place().DebugString().c_str()));
  PADDLE_ENFORCE(t.IsContiguous(),
                 errors::InvalidArgument("%s: input %s (dims %s) must be contiguous.", kernel,
                                         name, t.dims().to_str().c_str()));
}

void CheckFloating(const DenseTensor& t, const char* kernel, const char* name) {
  PADDLE_ENFORCE(IsFloating(t.dtype()),
                 errors::InvalidArgument(
                     "%s: input %s must be float32, float64, float16 or bfloat16, got %s.",
                     kernel, name, DataTypeToString(t.dtype())));
}

void CheckSameShape(const DenseTensor& a, const DenseTensor& b, const char* kernel) {
  PADDLE_ENFORCE(a.dims() == b.dims(),
                 errors::InvalidArgument("%s: shapes must match, got %s and %s.", kernel,
                                         a.dims().to_str().c_str(), b.dims().to_str().c_str()));
  PADDLE_ENFORCE(a.dtype() == b.dtype(),
                 errors::InvalidArgument("%s: dtypes must match, got %s and %s.", kernel,
                                         DataTypeToString(a.dtype()),
                                         DataTypeToString(b.dtype())));
}

void CheckInt64(const DenseTensor& t, const char* kernel, const char* name) {
  PADDLE_ENFORCE(t.dtype() == DataType::INT64,
                 errors::InvalidArgument("%s: %s must be int64, got %s.", kernel, name,
                                         DataTypeToString(t.dtype())));
}

int NormalizeAxis(int axis, int rank, const char* kernel) {
  PADDLE_ENFORCE(axis >= -rank && axis < rank,
                 errors::InvalidArgument("%s: axis %d is out of range for rank %d.", kernel,
                                         axis, rank));
  return axis < 0 ? axis + rank : axis;
}

}  // namespace kernels_internal
}  // namespace phi
