#include "paddle_like/dist/dist_internal.h"

#include <atomic>

#include <glog/logging.h>

#include "phi/core/errors.h"
#include "phi/core/memcpy.h"

namespace paddle_like {
namespace dist {

GroupPtr ResolveGroup(const GroupPtr& group, const char* op) {
  GroupPtr g = group ? group : world();
  PADDLE_ENFORCE(!g->destroyed(), phi::errors::PreconditionNotMet(
                                      "%s on group '%s', which was destroyed "
                                      "(destroy_process_group); make a new group.",
                                      op, g->name().c_str()));
  if (g->is_member()) return g;
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    LOG(WARNING) << op << " on group '" << g->name()
                 << "', which this rank is not in: it does nothing and returns a null Work "
                    "(warned once)";
  }
  return nullptr;
}

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

void PrepareSplit(const phi::DenseTensor& like, int parts, std::vector<phi::DenseTensor>* list,
                  const char* op) {
  if (list->empty()) list->resize(static_cast<size_t>(parts));
  const int64_t n = like.numel();
  for (int r = 0; r < parts; ++r) {
    phi::DenseTensor& out = (*list)[static_cast<size_t>(r)];
    if (!out.initialized()) out.AllocateLike(like.place(), like.dtype(), like.dims());
    PADDLE_ENFORCE(out.numel() == n && out.dtype() == like.dtype() && out.IsContiguous(),
                   phi::errors::InvalidArgument(
                       "%s: output %d must be a contiguous %s tensor of %lld elements like the "
                       "input.",
                       op, r, phi::DataTypeToString(like.dtype()), static_cast<long long>(n)));
  }
}

void SplitInto(const phi::DenseTensor& flat, const phi::DenseTensor& like, int parts,
               std::vector<phi::DenseTensor>* list, const char* op) {
  PrepareSplit(like, parts, list, op);
  const int64_t n = like.numel();
  for (int r = 0; r < parts; ++r) {
    phi::DenseTensor& out = (*list)[static_cast<size_t>(r)];
    phi::memory::Copy(out.place(), out.data(), flat.place(), flat.FlatView(r * n, n).data(),
                      static_cast<size_t>(n) * out.element_size(), nullptr);
  }
}

int GroupRankOf(const GroupPtr& g, RankArg r, const char* what) {
  if (r.group_relative()) {
    PADDLE_ENFORCE(r.value() >= 0 && r.value() < g->size(),
                   phi::errors::InvalidArgument(
                       "%s: group rank %d is not a rank of group '%s' (its ranks are 0..%d).",
                       what, r.value(), g->name().c_str(), g->size() - 1));
    return r.value();
  }
  const int group_rank = get_group_rank(g, r.value());
  PADDLE_ENFORCE(group_rank >= 0, phi::errors::InvalidArgument(
                                      "%s: global rank %d is not in group '%s'.", what,
                                      r.value(), g->name().c_str()));
  return group_rank;
}

}  // namespace dist
}  // namespace paddle_like
