// Concat and split along an axis, for any dtype (byte copies of contiguous blocks).
#include <cstring>

#include "phi/kernels/kernel_funcs_internal.h"
#include "phi/kernels/math_kernels.h"

namespace phi {

using namespace kernels_internal;  // NOLINT: the kernels' own helpers

namespace {

// A shape seen as [outer, dim(axis), inner].
struct AxisView {
  int64_t outer = 1;
  int64_t inner = 1;
};

AxisView ViewAround(const DDim& d, int axis) {
  AxisView v;
  for (int i = 0; i < axis; ++i) v.outer *= d[i];
  for (int i = axis + 1; i < d.size(); ++i) v.inner *= d[i];
  return v;
}

}  // namespace

void ConcatKernel(const std::vector<const DenseTensor*>& x, int axis, DenseTensor* out) {
  PADDLE_ENFORCE(!x.empty(), errors::InvalidArgument("concat: no inputs."));
  for (size_t i = 0; i < x.size(); ++i) {
    PADDLE_ENFORCE_NOT_NULL(x[i], errors::InvalidArgument("concat: input %zu is null.", i));
    CheckCpuInput(*x[i], "concat", "x");
  }
  const DDim& first = x[0]->dims();
  axis = NormalizeAxis(axis, first.size(), "concat");
  std::vector<int64_t> dims = first.Get();
  dims[axis] = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const DDim& d = x[i]->dims();
    bool ok = d.size() == first.size() && x[i]->dtype() == x[0]->dtype();
    for (int k = 0; ok && k < d.size(); ++k) ok = (k == axis) || d[k] == first[k];
    PADDLE_ENFORCE(ok, errors::InvalidArgument(
                           "concat: input %zu (%s %s) does not match input 0 (%s %s) off axis %d.",
                           i, DataTypeToString(x[i]->dtype()), d.to_str().c_str(),
                           DataTypeToString(x[0]->dtype()), first.to_str().c_str(), axis));
    dims[axis] += d[axis];
  }
  DenseTensor result(CPUPlace(), x[0]->dtype(), DDim(dims));
  AxisView v = ViewAround(result.dims(), axis);
  size_t elem = result.element_size();
  size_t out_row = static_cast<size_t>(dims[axis] * v.inner) * elem;
  auto* dst = static_cast<char*>(result.data());
  size_t col = 0;
  for (const DenseTensor* t : x) {
    size_t piece = static_cast<size_t>(t->dims()[axis] * v.inner) * elem;
    const auto* src = static_cast<const char*>(t->data());
    for (int64_t o = 0; o < v.outer && piece > 0; ++o) {
      std::memcpy(dst + o * out_row + col, src + o * piece, piece);
    }
    col += piece;
  }
  *out = std::move(result);
}

void SplitKernel(const DenseTensor& x, const std::vector<int64_t>& sections, int axis,
                 const std::vector<DenseTensor*>& out) {
  CheckCpuInput(x, "split", "x");
  axis = NormalizeAxis(axis, x.dims().size(), "split");
  PADDLE_ENFORCE_EQ(out.size(), sections.size(),
                    errors::InvalidArgument("split: %zu sections but %zu outputs.",
                                            sections.size(), out.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    PADDLE_ENFORCE_NOT_NULL(out[i], errors::InvalidArgument("split: output %zu is null.", i));
  }
  int64_t total = x.dims()[axis];
  std::vector<int64_t> sizes = sections;
  int64_t known = 0;
  int unknown = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1 && unknown < 0) {
      unknown = static_cast<int>(i);
      continue;
    }
    PADDLE_ENFORCE(sizes[i] >= 0, errors::InvalidArgument(
                                      "split: section %zu is %ld; sections are >= 0 (one may be "
                                      "-1).", i, long(sizes[i])));
    known += sizes[i];
  }
  if (unknown >= 0) sizes[unknown] = total - known;
  PADDLE_ENFORCE(known <= total && (unknown >= 0 || known == total),
                 errors::InvalidArgument("split: sections sum to %ld but axis %d of %s is %ld.",
                                         long(known), axis, x.dims().to_str().c_str(),
                                         long(total)));
  AxisView v = ViewAround(x.dims(), axis);
  size_t elem = x.element_size();
  size_t in_row = static_cast<size_t>(total * v.inner) * elem;
  const auto* src = static_cast<const char*>(x.data());
  size_t col = 0;
  // All pieces are cut before any output is assigned: an output may be x itself.
  std::vector<DenseTensor> pieces;
  pieces.reserve(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<int64_t> dims = x.dims().Get();
    dims[axis] = sizes[i];
    DenseTensor piece(CPUPlace(), x.dtype(), DDim(dims));
    size_t bytes = static_cast<size_t>(sizes[i] * v.inner) * elem;
    auto* dst = static_cast<char*>(piece.data());
    for (int64_t o = 0; o < v.outer && bytes > 0; ++o) {
      std::memcpy(dst + o * bytes, src + o * in_row + col, bytes);
    }
    col += bytes;
    pieces.push_back(std::move(piece));
  }
  for (size_t i = 0; i < pieces.size(); ++i) *out[i] = std::move(pieces[i]);
}

}  // namespace phi
