// The batched and coalesced calls of paddle_like::dist: batch_isend_irecv and the *_coalesced
// collectives, each one engine group (one Work).
#include <algorithm>

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

}  // namespace dist
}  // namespace paddle_like
