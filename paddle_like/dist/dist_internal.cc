#include "paddle_like/dist/tensor_lists_internal.h"

#include "phi/core/errors.h"
#include "phi/core/memcpy.h"

namespace paddle_like {
namespace dist {

std::string DeviceOf(const phi::DenseTensor& t) { return t.place().is_gpu() ? "cuda" : "cpu"; }

phi::DenseTensor FlattenList(const std::vector<phi::DenseTensor>& list, int expected_len,
                             int64_t numel, const char* op) {
  PADDLE_ENFORCE(static_cast<int>(list.size()) == expected_len,
                 phi::errors::InvalidArgument(
                     "%s: the list needs one tensor per rank of the group (%d), but has %zu.",
                     op, expected_len, list.size()));
  const phi::DenseTensor& first = list[0];
  const int64_t n = numel >= 0 ? numel : first.numel();
  phi::DenseTensor flat;
  flat.AllocateLike(first.place(), first.dtype(), phi::DDim({n * expected_len}));
  for (int r = 0; r < expected_len; ++r) {
    const phi::DenseTensor& part = list[static_cast<size_t>(r)];
    PADDLE_ENFORCE(part.initialized() && part.numel() == n && part.dtype() == first.dtype() &&
                       part.place() == first.place() && part.IsContiguous(),
                   phi::errors::InvalidArgument(
                       "%s: list tensor %d must be a contiguous tensor of %lld elements of %s "
                       "on %s, but it has %lld elements of %s on %s.",
                       op, r, static_cast<long long>(n), phi::DataTypeToString(first.dtype()),
                       first.place().DebugString().c_str(),
                       static_cast<long long>(part.numel()), phi::DataTypeToString(part.dtype()),
                       part.place().DebugString().c_str()));
    phi::memory::Copy(flat.place(), flat.FlatView(r * n, n).data(), part.place(), part.data(),
                      static_cast<size_t>(n) * part.element_size(), nullptr);
  }
  return flat;
}

}  // namespace dist
}  // namespace paddle_like
