// The tensor collectives of paddle_like::dist: resolve the group and the backend of the
// tensors' device, translate global src/dst ranks to group ranks, issue through the
// ProcessGroup, and wrap the task in a Work (waited here unless async_op). A call without
// async_op is a sync op for the engine too: on an idle CPU comm stream it runs in the calling
// thread, with no hand-off to the stream's thread and back.
#include "paddle_like/dist/distributed.h"
#include "paddle_like/dist/dist_internal.h"
#include "phi/core/errors.h"
#include "phi/core/memcpy.h"

namespace paddle_like {
namespace dist {
namespace {

using distributed::ProcessGroup;

WorkPtr Finish(ProcessGroup::TaskPtr task, const GroupPtr& g, bool async_op,
               std::vector<DenseTensor> results = {}) {
  auto work =
      std::make_shared<Work>(std::move(task), g, std::move(results));
  if (!async_op) work->wait();
  return work;
}

ProcessGroup* Backend(const GroupPtr& g, const DenseTensor& t) {
  return g->backend_for(DeviceOf(t));
}

}  // namespace

WorkPtr all_reduce(DenseTensor* tensor, ReduceOp op, const CollectiveOptions& o) {
  GroupPtr g = ResolveGroup(o.group, "all_reduce");
  if (!g) return nullptr;
  PADDLE_ENFORCE_NOT_NULL(tensor, phi::errors::InvalidArgument("all_reduce: tensor is null."));
  auto task =
      Backend(g, *tensor)->AllReduce(tensor, *tensor, {op, o.premul_factor}, !o.async_op, false);
  return Finish(std::move(task), g, o.async_op, {*tensor});
}

WorkPtr broadcast(DenseTensor* tensor, RankArg src, const CollectiveOptions& o) {
  GroupPtr g = ResolveGroup(o.group, "broadcast");
  if (!g) return nullptr;
  PADDLE_ENFORCE_NOT_NULL(tensor, phi::errors::InvalidArgument("broadcast: tensor is null."));
  distributed::BroadcastOptions opts;
  opts.source_rank = GroupRankOf(g, src, "broadcast src");
  return Finish(Backend(g, *tensor)->Broadcast(tensor, *tensor, opts, !o.async_op, false), g,
                o.async_op, {*tensor});
}

WorkPtr reduce(DenseTensor* tensor, RankArg dst, ReduceOp op, const CollectiveOptions& o) {
  GroupPtr g = ResolveGroup(o.group, "reduce");
  if (!g) return nullptr;
  PADDLE_ENFORCE_NOT_NULL(tensor, phi::errors::InvalidArgument("reduce: tensor is null."));
  distributed::ReduceOptions opts;
  opts.reduce_op = op;
  opts.premul_factor = o.premul_factor;
  opts.root_rank = GroupRankOf(g, dst, "reduce dst");
  return Finish(Backend(g, *tensor)->Reduce(tensor, *tensor, opts, !o.async_op, false), g,
                o.async_op, {*tensor});
}

WorkPtr all_gather_into_tensor(DenseTensor* output, const DenseTensor& input,
                               const CollectiveOptions& o) {
  GroupPtr g = ResolveGroup(o.group, "all_gather_into_tensor");
  if (!g) return nullptr;
  auto task = Backend(g, input)->AllGather(output, input, 0, -1, !o.async_op, false);
  return Finish(std::move(task), g, o.async_op, {*output});
}

WorkPtr all_gather(std::vector<DenseTensor>* outputs, const DenseTensor& input,
                   const CollectiveOptions& o) {
  GroupPtr g = ResolveGroup(o.group, "all_gather");
  if (!g) return nullptr;
  PADDLE_ENFORCE_NOT_NULL(outputs, phi::errors::InvalidArgument("all_gather: list is null."));
  PADDLE_ENFORCE(outputs->empty() || static_cast<int>(outputs->size()) == g->size(),
                 phi::errors::InvalidArgument(
                     "all_gather: the output list needs one tensor per rank of the group "
                     "(%d), but has %zu.",
                     g->size(), outputs->size()));
  // Gathered into one tensor, then split into the outputs once the op has ended (in the
  // first wait that sees it done: async_op holds, as the seed's staged list form).
  PrepareSplit(input, g->size(), outputs, "all_gather");
  DenseTensor flat;
  auto task = Backend(g, input)->AllGather(&flat, input, 0, -1, !o.async_op, false);
  auto work = std::make_shared<Work>(std::move(task), g, *outputs,
                                     [flat, input, n = g->size(), outs = *outputs]() mutable {
                                       SplitInto(flat, input, n, &outs, "all_gather");
                                     });
  if (!o.async_op) work->wait();
  return work;
}

WorkPtr reduce_scatter_tensor(DenseTensor* output, const DenseTensor& input, ReduceOp op,
                              const CollectiveOptions& o) {
  GroupPtr g = ResolveGroup(o.group, "reduce_scatter_tensor");
  if (!g) return nullptr;
  distributed::ReduceScatterOptions opts;
  opts.reduce_op = op;
  opts.premul_factor = o.premul_factor;
  return Finish(Backend(g, input)->ReduceScatter(output, input, opts, !o.async_op, false), g,
                o.async_op, {*output});
}

WorkPtr all_to_all_single(DenseTensor* output, const DenseTensor& input,
                          const std::vector<int64_t>& output_split_sizes,
                          const std::vector<int64_t>& input_split_sizes,
                          const CollectiveOptions& o) {
  GroupPtr g = ResolveGroup(o.group, "all_to_all_single");
  if (!g) return nullptr;
  return Finish(Backend(g, input)->AllToAll(output, input, output_split_sizes,
                                            input_split_sizes, !o.async_op, false),
                g, o.async_op, {*output});
}

WorkPtr all_to_all(std::vector<DenseTensor>* outputs, const std::vector<DenseTensor>& inputs,
                   const CollectiveOptions& o) {
  GroupPtr g = ResolveGroup(o.group, "all_to_all");
  if (!g) return nullptr;
  PADDLE_ENFORCE(!inputs.empty(), phi::errors::InvalidArgument("all_to_all: no inputs."));
  return Finish(Backend(g, inputs[0])->AllToAll(outputs, inputs, !o.async_op, false), g, o.async_op,
                *outputs);
}

WorkPtr gather(const DenseTensor& tensor, std::vector<DenseTensor>* gather_list, RankArg dst,
               const CollectiveOptions& o) {
  GroupPtr g = ResolveGroup(o.group, "gather");
  if (!g) return nullptr;
  distributed::GatherOptions opts;
  opts.root_rank = GroupRankOf(g, dst, "gather dst");
  auto task = Backend(g, tensor)->Gather(gather_list, tensor, opts, !o.async_op, false);
  return Finish(std::move(task), g, o.async_op,
                gather_list ? *gather_list : std::vector<DenseTensor>{});
}

WorkPtr scatter(DenseTensor* tensor, const std::vector<DenseTensor>& scatter_list, RankArg src,
                const CollectiveOptions& o) {
  GroupPtr g = ResolveGroup(o.group, "scatter");
  if (!g) return nullptr;
  PADDLE_ENFORCE_NOT_NULL(tensor, phi::errors::InvalidArgument("scatter: tensor is null."));
  distributed::ScatterOptions opts;
  opts.root_rank = GroupRankOf(g, src, "scatter src");
  DenseTensor flat;  // the root's list as one tensor of size() blocks
  if (g->rank() == opts.root_rank) {
    flat = FlattenList(scatter_list, g->size(), tensor->numel(), "scatter");
    PADDLE_ENFORCE(flat.dtype() == tensor->dtype(),
                   phi::errors::InvalidArgument(
                       "scatter: the list is %s but the output tensor is %s.",
                       phi::DataTypeToString(flat.dtype()),
                       phi::DataTypeToString(tensor->dtype())));
  }
  return Finish(Backend(g, *tensor)->Scatter(tensor, flat, opts, !o.async_op, false), g, o.async_op,
                {*tensor});
}

WorkPtr reduce_scatter(DenseTensor* output, const std::vector<DenseTensor>& inputs, ReduceOp op,
                       const CollectiveOptions& o) {
  GroupPtr g = ResolveGroup(o.group, "reduce_scatter");
  if (!g) return nullptr;
  PADDLE_ENFORCE_NOT_NULL(output, phi::errors::InvalidArgument("reduce_scatter: output is null."));
  PADDLE_ENFORCE(!inputs.empty(), phi::errors::InvalidArgument("reduce_scatter: no inputs."));
  DenseTensor flat = FlattenList(inputs, g->size(), -1, "reduce_scatter");
  distributed::ReduceScatterOptions opts;
  opts.reduce_op = op;
  opts.premul_factor = o.premul_factor;
  return Finish(Backend(g, flat)->ReduceScatter(output, flat, opts, !o.async_op, false), g, o.async_op,
                {*output});
}

WorkPtr gather_into_tensor(DenseTensor* output, const DenseTensor& input, RankArg dst,
                           const CollectiveOptions& o) {
  GroupPtr g = ResolveGroup(o.group, "gather_into_tensor");
  if (!g) return nullptr;
  distributed::GatherOptions opts;
  opts.root_rank = GroupRankOf(g, dst, "gather_into_tensor dst");
  return Finish(Backend(g, input)->Gather(output, input, opts, !o.async_op, false), g, o.async_op,
                {*output});
}

bool supports_complex(ReduceOp op) {
  return op == ReduceOp::SUM || op == ReduceOp::AVG || op == ReduceOp::PREMUL_SUM;
}

WorkPtr barrier(const CollectiveOptions& o, const std::vector<int>& device_ids) {
  GroupPtr g = ResolveGroup(o.group, "barrier");
  if (!g) return nullptr;
  PADDLE_ENFORCE(device_ids.size() <= 1,
                 phi::errors::InvalidArgument(
                     "barrier: this build runs one device per process, but %zu device ids "
                     "were given.",
                     device_ids.size()));
  const bool on_device =
      !device_ids.empty() || g->backend_by_device().count("cpu") == 0;
  distributed::BarrierOptions opts;
  if (!device_ids.empty()) opts.device_id = static_cast<int8_t>(device_ids[0]);
  auto task = g->backend_for(on_device ? "cuda" : "cpu")->Barrier(opts);
  // A device barrier blocks the host too, as the seed's NCCL barrier does: Wait alone would
  // only order the calc stream after it.
  if (on_device && !o.async_op) task->Synchronize();
  return Finish(std::move(task), g, o.async_op);
}

WorkPtr isend(const DenseTensor& tensor, RankArg dst, const P2POptions& o) {
  GroupPtr g = ResolveGroup(o.group, "isend");
  if (!g) return nullptr;
  const int peer = GroupRankOf(g, dst, "send dst");
  return Finish(Backend(g, tensor)->Send(tensor, peer, 0, -1, false, false, {o.tag}), g, true);
}

WorkPtr irecv(DenseTensor* tensor, RankArg src, const P2POptions& o) {
  GroupPtr g = ResolveGroup(o.group, "irecv");
  if (!g) return nullptr;
  PADDLE_ENFORCE_NOT_NULL(tensor, phi::errors::InvalidArgument("irecv: tensor is null."));
  const int peer = src.value() == kAnySource ? distributed::kAnySource
                                               : GroupRankOf(g, src, "recv src");
  return Finish(Backend(g, *tensor)->Recv(tensor, peer, 0, -1, false, false, {o.tag}), g, true);
}

void send(const DenseTensor& tensor, RankArg dst, const P2POptions& o) {
  if (WorkPtr w = isend(tensor, dst, o)) w->wait();
}

int recv(DenseTensor* tensor, RankArg src, const P2POptions& o) {
  WorkPtr w = irecv(tensor, src, o);
  if (!w) return -1;
  w->wait();
  GroupPtr g = o.group ? o.group : world();
  return get_global_rank(g, w->source_rank() >= 0 ? w->source_rank()
                                                   : GroupRankOf(g, src, "recv src"));
}

}  // namespace dist
}  // namespace paddle_like
