// Groups made from other groups: split_group (parent-group ranks) and the new_subgroups
// helpers, all through new_group so that every rank agrees on the group ids.
#include <algorithm>
#include <set>

#include "paddle_like/dist/dist_internal.h"
#include "paddle_like/dist/distributed.h"
#include "phi/core/errors.h"

namespace paddle_like {
namespace dist {

GroupPtr split_group(const GroupPtr& parent, const std::vector<std::vector<int>>& split_ranks,
                     const NewGroupOptions& options) {
  GroupPtr p = parent ? parent : world();
  PADDLE_ENFORCE(!split_ranks.empty(),
                 phi::errors::InvalidArgument("split_group: split_ranks cannot be empty."));
  std::vector<std::vector<int>> global(split_ranks.size());  // the parent's ranks -> global
  for (size_t i = 0; i < split_ranks.size(); ++i) {
    for (int r : split_ranks[i]) {
      PADDLE_ENFORCE(r >= 0 && r < p->size(),
                     phi::errors::InvalidArgument(
                         "split_group: rank %d is not a rank of the parent group '%s' (its "
                         "ranks are 0..%d).",
                         r, p->name().c_str(), p->size() - 1));
      global[i].push_back(p->ranks()[static_cast<size_t>(r)]);
    }
  }
  NewGroupOptions o = options;
  if (o.backend.empty()) o.backend = p->backend_config();
  if (o.timeout <= std::chrono::milliseconds::zero()) o.timeout = p->timeout();
  o.sort_ranks = false;  // as the seed: the split's first rank is its group rank 0
  auto [mine, all] = new_subgroups_by_enumeration(global, o);
  if (mine) return mine;
  // In none of them: a non-member handle (the last split's, seen from outside).
  PADDLE_ENFORCE(!all.empty(), phi::errors::InvalidArgument("split_group: no split given."));
  return all.back();
}

std::pair<GroupPtr, std::vector<GroupPtr>> new_subgroups_by_enumeration(
    const std::vector<std::vector<int>>& ranks_per_subgroup, const NewGroupOptions& options) {
  std::set<int> seen;
  for (const auto& ranks : ranks_per_subgroup) {
    for (int r : ranks) {
      PADDLE_ENFORCE(seen.insert(r).second,
                     phi::errors::InvalidArgument(
                         "new_subgroups_by_enumeration: rank %d is in two subgroups.", r));
    }
  }
  std::pair<GroupPtr, std::vector<GroupPtr>> out;
  const int me = get_rank();
  for (const auto& ranks : ranks_per_subgroup) {
    PADDLE_ENFORCE(!ranks.empty(), phi::errors::InvalidArgument(
                                       "new_subgroups_by_enumeration: a subgroup is empty."));
    GroupPtr g = new_group(ranks, options);
    if (std::find(ranks.begin(), ranks.end(), me) != ranks.end()) out.first = g;
    out.second.push_back(std::move(g));
  }
  return out;
}

std::pair<GroupPtr, std::vector<GroupPtr>> new_subgroups(int group_size,
                                                         const NewGroupOptions& options) {
  const int n = get_world_size();
  PADDLE_ENFORCE(group_size > 0 && n % group_size == 0,
                 phi::errors::InvalidArgument(
                     "new_subgroups: the world size %d must be a multiple of group_size %d.",
                     n, group_size));
  std::vector<std::vector<int>> all;
  for (int first = 0; first < n; first += group_size) {
    std::vector<int> ranks;
    for (int r = first; r < first + group_size; ++r) ranks.push_back(r);
    all.push_back(std::move(ranks));
  }
  return new_subgroups_by_enumeration(all, options);
}

}  // namespace dist
}  // namespace paddle_like
