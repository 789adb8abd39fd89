// Batched and coalesced calls, the store-based monitored barrier, subgroup helpers and the
// backend registration of paddle_like::dist.
#include <dlfcn.h>

#include <algorithm>
#include <set>

#include "paddle_like/dist/distributed.h"
#include "paddle_like/dist/dist_internal.h"
#include "phi/core/errors.h"
#include "phi/core/memcpy.h"

namespace paddle_like {
namespace dist {
namespace {

using distributed::ProcessGroup;

// Every tensor of one call goes to one backend: a call that mixes places raises.
template <typename Tensors, typename Get>
void CheckOnePlace(const Tensors& tensors, Get get, const char* op) {
  const DenseTensor* first = nullptr;
  for (const auto& t : tensors) {
    const DenseTensor* p = get(t);
    if (p == nullptr) continue;
    if (first == nullptr) first = p;
    PADDLE_ENFORCE(p->place() == first->place(),
                   phi::errors::InvalidArgument(
                       "%s: every tensor of one call must be on one place, but one is on %s "
                       "and another on %s.",
                       op, first->place().DebugString().c_str(),
                       p->place().DebugString().c_str()));
  }
}

// Runs `issue` between StartCoalescing and EndCoalescing on `pg`, closing the group on every
// path; returns the group's task.
template <typename F>
ProcessGroup::TaskPtr Coalesced(ProcessGroup* pg, F&& issue) {
  pg->StartCoalescing();
  try {
    issue();
  } catch (...) {
    try {
      pg->EndCoalescing()->Wait();  // whatever was queued runs, and the rank stays in step
    } catch (...) {
    }
    throw;
  }
  return pg->EndCoalescing();
}

}  // namespace

std::vector<WorkPtr> batch_isend_irecv(const std::vector<P2POp>& ops) {
  std::vector<WorkPtr> works;
  if (ops.empty()) return works;
  GroupPtr g = ResolveGroup(ops[0].group, "batch_isend_irecv");
  if (!g) return works;
  for (const auto& op : ops) {
    PADDLE_ENFORCE((op.group ? op.group : world()) == g,
                   phi::errors::InvalidArgument(
                       "batch_isend_irecv: every op must use one group."));
    PADDLE_ENFORCE_NOT_NULL(op.tensor,
                            phi::errors::InvalidArgument("batch_isend_irecv: a tensor is null."));
  }
  CheckOnePlace(ops, [](const P2POp& op) { return op.tensor; }, "batch_isend_irecv");
  ProcessGroup* pg = g->backend_for(DeviceOf(*ops[0].tensor));
  std::vector<ProcessGroup::TaskPtr> tasks;
  auto group_task = Coalesced(pg, [&] {
    for (const auto& op : ops) {
      const int peer = GroupRankOf(g, op.peer, "batch_isend_irecv peer");
      tasks.push_back(op.kind == P2POp::Kind::kSend
                          ? pg->Send(*op.tensor, peer, 0, -1, false, false, {op.tag})
                          : pg->Recv(op.tensor, peer, 0, -1, false, false, {op.tag}));
    }
  });
  for (auto& t : tasks) works.push_back(std::make_shared<Work>(t, g));
  (void)group_task;
  return works;
}

WorkPtr all_reduce_coalesced(std::vector<DenseTensor*> tensors, ReduceOp op,
                             const CollectiveOptions& o) {
  GroupPtr g = ResolveGroup(o.group, "all_reduce_coalesced");
  if (!g || tensors.empty()) return nullptr;
  PADDLE_ENFORCE_NOT_NULL(tensors[0],
                          phi::errors::InvalidArgument("all_reduce_coalesced: a tensor is null."));
  CheckOnePlace(tensors, [](DenseTensor* t) { return t; }, "all_reduce_coalesced");
  ProcessGroup* pg = g->backend_for(DeviceOf(*tensors[0]));
  auto task = Coalesced(pg, [&] {
    for (DenseTensor* t : tensors) {
      PADDLE_ENFORCE_NOT_NULL(
          t, phi::errors::InvalidArgument("all_reduce_coalesced: a tensor is null."));
      pg->AllReduce(t, *t, {op, o.premul_factor}, false, false);
    }
  });
  std::vector<DenseTensor> results;
  for (DenseTensor* t : tensors) results.push_back(*t);
  auto work = std::make_shared<Work>(task, g, std::move(results));
  if (!o.async_op) work->wait();
  return work;
}

WorkPtr all_gather_coalesced(std::vector<std::vector<DenseTensor>>* outputs,
                             const std::vector<DenseTensor>& inputs,
                             const CollectiveOptions& o) {
  GroupPtr g = ResolveGroup(o.group, "all_gather_coalesced");
  if (!g || inputs.empty()) return nullptr;
  PADDLE_ENFORCE_NOT_NULL(outputs, phi::errors::InvalidArgument(
                                       "all_gather_coalesced: the output list is null."));
  PADDLE_ENFORCE(outputs->empty() || outputs->size() == inputs.size(),
                 phi::errors::InvalidArgument(
                     "all_gather_coalesced: one output list per input (%zu), but got %zu.",
                     inputs.size(), outputs->size()));
  outputs->resize(inputs.size());
  // Into the caller's tensors (an empty list is filled): checked and allocated now, written
  // once the op has ended (the first wait that sees it done), so async_op holds.
  std::vector<DenseTensor> results;
  for (size_t i = 0; i < inputs.size(); ++i) {
    PrepareSplit(inputs[i], g->size(), &(*outputs)[i], "all_gather_coalesced");
    results.insert(results.end(), (*outputs)[i].begin(), (*outputs)[i].end());
  }
  // Each input is gathered into one flat tensor inside the group, then split per rank.
  std::vector<DenseTensor> flats(inputs.size());
  ProcessGroup* pg = g->backend_for(DeviceOf(inputs[0]));
  auto task = Coalesced(pg, [&] {
    for (size_t i = 0; i < inputs.size(); ++i) {
      pg->AllGather(&flats[i], inputs[i], 0, -1, false, false);
    }
  });
  auto split = [flats, inputs, n = g->size(), outs = *outputs]() mutable {
    for (size_t i = 0; i < inputs.size(); ++i) {
      SplitInto(flats[i], inputs[i], n, &outs[i], "all_gather_coalesced");
    }
  };
  auto work = std::make_shared<Work>(task, g, std::move(results), std::move(split));
  if (!o.async_op) work->wait();
  return work;
}

WorkPtr reduce_scatter_coalesced(std::vector<DenseTensor>* outputs,
                                 const std::vector<std::vector<DenseTensor>>& input_lists,
                                 ReduceOp op, const CollectiveOptions& o) {
  GroupPtr g = ResolveGroup(o.group, "reduce_scatter_coalesced");
  if (!g || input_lists.empty()) return nullptr;
  PADDLE_ENFORCE_NOT_NULL(outputs, phi::errors::InvalidArgument(
                                       "reduce_scatter_coalesced: outputs is null."));
  // Each list as one tensor of size() blocks, then the tensor forms in one group.
  std::vector<DenseTensor> flats;
  for (const auto& list : input_lists) {
    PADDLE_ENFORCE(!list.empty(),
                   phi::errors::InvalidArgument("reduce_scatter_coalesced: a list is empty."));
    flats.push_back(FlattenList(list, g->size(), -1, "reduce_scatter_coalesced"));
  }
  return reduce_scatter_single_coalesced(outputs, flats, op, o);
}

namespace {
// One coalesced group issuing `issue(pg, output, input)` per input; outputs resized to match.
template <typename Issue>
WorkPtr CoalescedPerInput(std::vector<DenseTensor>* outputs,
                          const std::vector<DenseTensor>& inputs, const CollectiveOptions& o,
                          const char* op, Issue issue) {
  GroupPtr g = ResolveGroup(o.group, op);
  if (!g || inputs.empty()) return nullptr;
  PADDLE_ENFORCE_NOT_NULL(outputs, phi::errors::InvalidArgument("%s: outputs is null.", op));
  PADDLE_ENFORCE(outputs->empty() || outputs->size() == inputs.size(),
                 phi::errors::InvalidArgument("%s: one output per input (%zu), but got %zu.", op,
                                              inputs.size(), outputs->size()));
  outputs->resize(inputs.size());
  CheckOnePlace(inputs, [](const DenseTensor& t) { return &t; }, op);
  ProcessGroup* pg = g->backend_for(DeviceOf(inputs[0]));
  auto task = Coalesced(pg, [&] {
    for (size_t i = 0; i < inputs.size(); ++i) issue(pg, &(*outputs)[i], inputs[i]);
  });
  auto work = std::make_shared<Work>(task, g, *outputs);
  if (!o.async_op) work->wait();
  return work;
}
}  // namespace

WorkPtr all_gather_single_coalesced(std::vector<DenseTensor>* outputs,
                                    const std::vector<DenseTensor>& inputs,
                                    const CollectiveOptions& o) {
  return CoalescedPerInput(outputs, inputs, o, "all_gather_single_coalesced",
                           [](ProcessGroup* pg, DenseTensor* out, const DenseTensor& in) {
                             pg->AllGather(out, in, 0, -1, false, false);
                           });
}

WorkPtr reduce_scatter_single_coalesced(std::vector<DenseTensor>* outputs,
                                        const std::vector<DenseTensor>& inputs, ReduceOp op,
                                        const CollectiveOptions& o) {
  distributed::ReduceScatterOptions opts;
  opts.reduce_op = op;
  opts.premul_factor = o.premul_factor;
  return CoalescedPerInput(outputs, inputs, o, "reduce_scatter_single_coalesced",
                           [&opts](ProcessGroup* pg, DenseTensor* out, const DenseTensor& in) {
                             pg->ReduceScatter(out, in, opts, false, false);
                           });
}

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

void monitored_barrier(const GroupPtr& group, std::chrono::milliseconds timeout,
                       bool wait_all_ranks) {
  GroupPtr g = ResolveGroup(group, "monitored_barrier");
  if (!g) return;
  if (timeout <= std::chrono::milliseconds::zero()) timeout = g->timeout();
  const std::string base = "monitored_barrier/" + std::to_string(g->NextMonitoredBarrier()) + "/";
  const auto& store = g->store();
  store->set(base + "arrived/" + std::to_string(g->rank()), "1");
  if (g->rank() != 0) {
    // Rank 0 decides within `timeout`; the margin covers its publishing the verdict.
    try {
      store->wait({base + "result"}, timeout + std::chrono::seconds(5));
    } catch (const phi::TimeoutError&) {
      PADDLE_THROW(phi::errors::Timeout(
          "monitored_barrier on group '%s': rank %d (global) never reported; it died or "
          "hangs.",
          g->name().c_str(), g->ranks()[0]));
    }
    const std::string verdict = store->get_string(base + "result");
    PADDLE_ENFORCE(verdict == "ok", phi::errors::Timeout("monitored_barrier on group '%s': %s",
                                                         g->name().c_str(), verdict.c_str()));
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string missing;
  for (int r = 1; r < g->size(); ++r) {
    const std::string key = base + "arrived/" + std::to_string(r);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    bool arrived = false;
    if (left > std::chrono::milliseconds::zero()) {
      try {
        store->wait({key}, left);
        arrived = true;
      } catch (const phi::TimeoutError&) {
      }
    } else {
      arrived = store->check({key});  // past the deadline: only who is there already
    }
    if (!arrived) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(g->ranks()[r]);
      if (!wait_all_ranks) break;
    }
  }
  if (missing.empty()) {
    store->set(base + "result", "ok");
    return;
  }
  const std::string verdict = "rank(s) " + missing + " (global) did not arrive within " +
                              std::to_string(timeout.count()) + " ms" +
                              (wait_all_ranks ? "" : " (the first missing one)");
  store->set(base + "result", verdict);
  PADDLE_THROW(phi::errors::Timeout("monitored_barrier on group '%s': %s", g->name().c_str(),
                                    verdict.c_str()));
}

void load_backend_plugin(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  PADDLE_ENFORCE_NOT_NULL(handle, phi::errors::InvalidArgument(
                                      "load_backend_plugin: cannot load '%s': %s", path.c_str(),
                                      dlerror()));
  using Init = void (*)();
  auto init = reinterpret_cast<Init>(dlsym(handle, "paddle_like_backend_plugin_init"));
  if (init == nullptr) {
    dlclose(handle);
    PADDLE_THROW(phi::errors::InvalidArgument(
        "load_backend_plugin: '%s' has no paddle_like_backend_plugin_init().", path.c_str()));
  }
  init();  // the library stays loaded: its backend's creator lives in it
}

void register_backend(const std::string& name, distributed::BackendCreator creator,
                      const std::vector<std::string>& devices) {
  // ':' and ',' separate the items of a backend config ("cpu:gloo,cuda:nccl").
  PADDLE_ENFORCE(!name.empty() && name.find_first_of(":,") == std::string::npos,
                 phi::errors::InvalidArgument(
                     "register_backend: a backend name must be a single non-empty identifier "
                     "(no ':' or ','), got '%s'.",
                     name.c_str()));
  distributed::BackendRegistry::Instance().Register(
      name, std::move(creator), devices.empty() ? std::vector<std::string>{"cpu"} : devices);
}

}  // namespace dist
}  // namespace paddle_like
