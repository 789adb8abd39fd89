#include "distributed/engine_checks.h"

#include <limits>

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
  if (out == &like) {  // in place: its dtype and place are the input's
    CheckNumel(out->numel(), numel, what);
    return;
  }
  CheckSameDtype(*out, what, like, "input");
  CheckNumel(out->numel(), numel, what);
  PADDLE_ENFORCE(out->place() == like.place(),
                 phi::errors::InvalidArgument("The %s tensor is on %s but the input is on %s.",
                                              what, out->place().DebugString().c_str(),
                                              like.place().DebugString().c_str()));
}

DenseTensor PartialView(const DenseTensor& t, int64_t offset, int64_t numel, const char* what) {
  CheckTensor(t, what);
  const int64_t total = t.numel();
  // Only -1 means "to the end"; every other negative count is an error. The checks are
  // written so that no sum can overflow: offset is bounded first, then numel against the
  // remainder.
  PADDLE_ENFORCE(numel >= -1,
                 phi::errors::InvalidArgument(
                     "The %s element count must be >= 0, or -1 for \"to the end\", but it is "
                     "%lld.",
                     what, static_cast<long long>(numel)));
  PADDLE_ENFORCE(offset >= 0 && offset <= total,
                 phi::errors::OutOfRange(
                     "The %s offset must be in [0, %lld] (the tensor's element count), but it "
                     "is %lld.",
                     what, static_cast<long long>(total), static_cast<long long>(offset)));
  if (numel == -1) numel = total - offset;
  PADDLE_ENFORCE(numel <= total - offset,
                 phi::errors::OutOfRange(
                     "The %s partial range of %lld elements at offset %lld exceeds the tensor's "
                     "%lld elements.",
                     what, static_cast<long long>(numel), static_cast<long long>(offset),
                     static_cast<long long>(total)));
  if (offset == 0 && numel == total) return t;
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
    PADDLE_ENFORCE(x >= 0, phi::errors::InvalidArgument(
                               "The %s split sizes must be >= 0, but one is %lld.", what,
                               static_cast<long long>(x)));
    PADDLE_ENFORCE(x <= std::numeric_limits<int64_t>::max() - sum,
                   phi::errors::InvalidArgument(
                       "The %s split sizes overflow int64 when summed (the tensor's dim 0 is "
                       "%lld).",
                       what, static_cast<long long>(dim0)));
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

phi::DDim AllToAllOutputDims(const DenseTensor& in, const std::vector<int64_t>& out_rows) {
  if (out_rows.empty() || in.dims().size() == 0) return in.dims();
  int64_t rows = 0;
  for (int64_t x : out_rows) {
    PADDLE_ENFORCE(x >= 0 && x <= std::numeric_limits<int64_t>::max() - rows,
                   phi::errors::InvalidArgument(
                       "The output split sizes must be >= 0 and sum to a valid dim 0, but one "
                       "is %lld.",
                       static_cast<long long>(x)));
    rows += x;
  }
  std::vector<int64_t> dims = in.dims().Get();
  dims[0] = rows;
  return phi::DDim(dims);
}

void CheckNoOverlap(const DenseTensor& in, const DenseTensor& out, const char* op) {
  if (!in.initialized() || !out.initialized()) return;
  const char* a = static_cast<const char*>(in.data());
  const char* b = static_cast<const char*>(out.data());
  const size_t na = static_cast<size_t>(in.numel()) * in.element_size();
  const size_t nb = static_cast<size_t>(out.numel()) * out.element_size();
  PADDLE_ENFORCE(na == 0 || nb == 0 || a + na <= b || b + nb <= a,
                 phi::errors::InvalidArgument(
                     "%s cannot run in place: the output tensor's memory overlaps the "
                     "input's. Pass a separate output tensor.",
                     op));
}

void CheckPeer(int peer, int self, int tag, const char* what) {
  PADDLE_ENFORCE(peer != self,
                 phi::errors::InvalidArgument(
                     "%s its own rank (%d): a rank cannot send to or receive from itself; "
                     "copy the tensor instead.",
                     what, self));
  PADDLE_ENFORCE(tag >= 0, phi::errors::InvalidArgument(
                               "%s rank %d: the tag must be >= 0 (negative tags are reserved "
                               "for the engine), but it is %d.",
                               what, peer, tag));
}

}  // namespace engine
}  // namespace distributed
}  // namespace paddle_like
