#include "distributed/engine_checks.h"

#include "phi/core/errors.h"

namespace paddle_like {
namespace distributed {
namespace engine {

using phi::DataType;
using phi::DenseTensor;
using phi::distributed::Reduction;

// ------------------------------------------------------------------ validation
// Every check raises before anything is issued, naming what was expected and what came.
void CheckTensor(const DenseTensor& t, const char* what) {
  PADDLE_ENFORCE(t.initialized(),
                 phi::errors::InvalidArgument("The %s tensor has no storage.", what));
  PADDLE_ENFORCE(t.IsContiguous(),
                 phi::errors::InvalidArgument(
                     "The %s tensor must be contiguous, but it is a strided view of dims %s.",
                     what, t.dims().to_str().c_str()));
}

void CheckSameDtype(const DenseTensor& a, const char* a_name, const DenseTensor& b,
                    const char* b_name) {
  PADDLE_ENFORCE(a.dtype() == b.dtype(),
                 phi::errors::InvalidArgument(
                     "The %s tensor is %s but the %s tensor is %s; they must match.", a_name,
                     phi::DataTypeToString(a.dtype()), b_name,
                     phi::DataTypeToString(b.dtype())));
}

void CheckNumel(int64_t got, int64_t expected, const char* what) {
  PADDLE_ENFORCE(got == expected,
                 phi::errors::InvalidArgument("The %s must have %lld elements, but it has %lld.",
                                              what, static_cast<long long>(expected),
                                              static_cast<long long>(got)));
}

void CheckRank(int64_t rank, int size, const char* what) {
  PADDLE_ENFORCE(rank >= 0 && rank < size,
                 phi::errors::OutOfRange("The %s must be in [0, %d), but it is %lld.", what,
                                         size, static_cast<long long>(rank)));
}

void PrepareOutput(DenseTensor* out, const DenseTensor& like, int64_t numel, const char* what) {
  PADDLE_ENFORCE_NOT_NULL(out,
                          phi::errors::InvalidArgument("The %s tensor pointer is null.", what));
  if (!out->initialized()) {
    out->AllocateLike(like.place(), like.dtype(), phi::DDim({numel}));
    return;
  }
  CheckTensor(*out, what);
  CheckSameDtype(*out, what, like, "input");
  CheckNumel(out->numel(), numel, what);
  PADDLE_ENFORCE(out->place() == like.place(),
                 phi::errors::InvalidArgument("The %s tensor is on %s but the input is on %s.",
                                              what, out->place().DebugString().c_str(),
                                              like.place().DebugString().c_str()));
}

DenseTensor PartialView(const DenseTensor& t, int64_t offset, int64_t numel, const char* what) {
  CheckTensor(t, what);
  if (offset == 0 && (numel < 0 || numel == t.numel())) return t;
  if (numel < 0) numel = t.numel() - offset;
  PADDLE_ENFORCE(offset >= 0 && numel >= 0 && offset + numel <= t.numel(),
                 phi::errors::OutOfRange(
                     "The %s partial range [%lld, %lld) exceeds its %lld elements.", what,
                     static_cast<long long>(offset), static_cast<long long>(offset + numel),
                     static_cast<long long>(t.numel())));
  return t.FlatView(offset, numel);
}

Reduction MakeReduction(ReduceOp op, double factor, DataType dtype) {
  phi::distributed::CheckReduceSupported(op, dtype);
  return Reduction{op, factor};
}


Splits MakeSplits(const std::vector<int64_t>& rows, const DenseTensor& t, int size,
                  const char* what) {
  int64_t dim0 = t.dims().size() > 0 ? t.dims()[0] : 1;
  int64_t row_elems = dim0 == 0 ? 0 : t.numel() / dim0;
  std::vector<int64_t> r = rows;
  if (r.empty()) {
    PADDLE_ENFORCE(dim0 % size == 0,
                   phi::errors::InvalidArgument(
                       "Equal all-to-all needs the %s dim 0 (%lld) divisible by the group "
                       "size %d.",
                       what, static_cast<long long>(dim0), size));
    r.assign(size, dim0 / size);
  }
  PADDLE_ENFORCE(static_cast<int>(r.size()) == size,
                 phi::errors::InvalidArgument(
                     "The %s split sizes must have one entry per rank (%d), but have %zu.", what,
                     size, r.size()));
  int64_t sum = 0;
  for (int64_t x : r) {
    PADDLE_ENFORCE(x >= 0, phi::errors::InvalidArgument("The %s split sizes must be >= 0.",
                                                        what));
    sum += x;
  }
  PADDLE_ENFORCE(sum == dim0,
                 phi::errors::InvalidArgument(
                     "The %s split sizes sum to %lld, but the tensor's dim 0 is %lld.", what,
                     static_cast<long long>(sum), static_cast<long long>(dim0)));
  Splits s;
  int64_t off = 0;
  for (int64_t x : r) {
    s.counts.push_back(x * row_elems);
    s.offsets.push_back(off);
    off += x * row_elems;
  }
  return s;
}

}  // namespace engine
}  // namespace distributed
}  // namespace paddle_like
