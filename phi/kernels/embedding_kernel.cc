// Embedding lookup (plain and vocab-parallel) and its gradient.
#include <cstring>

#include "phi/kernels/kernel_funcs_internal.h"
#include "phi/kernels/math_kernels.h"

namespace phi {

using namespace kernels_internal;  // NOLINT: the kernels' own helpers

namespace {

constexpr const char* kKernel = "embedding";

// Row of the shard for `id`, or -1 for a zero row; raises for an id out of range when that is
// not allowed.
int64_t RowOf(int64_t id, int64_t start, int64_t rows, bool out_of_range_is_zero,
              int64_t padding_idx) {
  if (padding_idx >= 0 && id == padding_idx) return -1;
  int64_t r = id - start;
  if (r >= 0 && r < rows) return r;
  PADDLE_ENFORCE(out_of_range_is_zero,
                 errors::InvalidArgument("%s: id %ld is outside the table's [%ld, %ld).",
                                         kKernel, long(id), long(start), long(start + rows)));
  return -1;
}

}  // namespace

void EmbeddingKernel(const DenseTensor& ids, const DenseTensor& table, int64_t start_index,
                     bool out_of_range_is_zero, int64_t padding_idx, DenseTensor* out) {
  CheckCpuInput(ids, kKernel, "ids");
  CheckCpuInput(table, kKernel, "table");
  CheckInt64(ids, kKernel, "ids");
  CheckFloating(table, kKernel, "table");
  PADDLE_ENFORCE_EQ(table.dims().size(), 2,
                    errors::InvalidArgument("%s: table must be [rows, dim], got %s.", kKernel,
                                            table.dims().to_str().c_str()));
  int64_t rows = table.dims()[0];
  int64_t width = table.dims()[1];
  const int64_t* id = ids.data<int64_t>();
  std::vector<int64_t> row_of(static_cast<size_t>(ids.numel()));
  for (int64_t i = 0, count = ids.numel(); i < count; ++i) {
    row_of[i] = RowOf(id[i], start_index, rows, out_of_range_is_zero, padding_idx);
  }
  std::vector<int64_t> out_dims = ids.dims().Get();
  out_dims.push_back(width);
  DenseTensor result(CPUPlace(), table.dtype(), DDim(out_dims));
  size_t row_bytes = static_cast<size_t>(width) * table.element_size();
  auto* dst = static_cast<char*>(result.data());
  const auto* src = static_cast<const char*>(table.data());
  for (int64_t i = 0, count = ids.numel(); i < count; ++i) {
    if (row_of[i] < 0) std::memset(dst + i * row_bytes, 0, row_bytes);
    else std::memcpy(dst + i * row_bytes, src + row_of[i] * row_bytes, row_bytes);
  }
  *out = std::move(result);
}

void EmbeddingGradKernel(const DenseTensor& ids, const DenseTensor& dout, const DDim& table_dims,
                         int64_t start_index, int64_t padding_idx, DenseTensor* dtable) {
  CheckCpuInput(ids, "embedding_grad", "ids");
  CheckCpuInput(dout, "embedding_grad", "dout");
  CheckInt64(ids, "embedding_grad", "ids");
  PADDLE_ENFORCE_EQ(table_dims.size(), 2,
                    errors::InvalidArgument("embedding_grad: table_dims must be [rows, dim], "
                                            "got %s.",
                                            table_dims.to_str().c_str()));
  int64_t rows = table_dims[0];
  int64_t width = table_dims[1];
  PADDLE_ENFORCE_EQ(dout.numel(), ids.numel() * width,
                    errors::InvalidArgument("embedding_grad: dout %s does not match ids %s x %ld.",
                                            dout.dims().to_str().c_str(),
                                            ids.dims().to_str().c_str(), long(width)));
  VisitFloating(dout.dtype(), "embedding_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    DenseTensor result(CPUPlace(), dout.dtype(), table_dims);
    MatrixMap<T> g(result.data<T>(), rows, width);
    g.setZero();
    ConstMatrixMap<T> d(dout.data<T>(), ids.numel(), width);
    const int64_t* id = ids.data<int64_t>();
    for (int64_t i = 0, count = ids.numel(); i < count; ++i) {
      int64_t r = RowOf(id[i], start_index, rows, /*out_of_range_is_zero=*/true, padding_idx);
      if (r >= 0) g.row(r) += d.row(i);
    }
    *dtable = std::move(result);
  });
}

}  // namespace phi
