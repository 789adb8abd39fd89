#include "tools/comm_bench/bench_ops.h"

#include <algorithm>
#include <vector>

namespace paddle_like {
namespace bench {
namespace {

using distributed::AllreduceOptions;
using distributed::BroadcastOptions;
using distributed::GatherOptions;
using distributed::ReduceOptions;
using distributed::ReduceScatterOptions;
using distributed::ScatterOptions;

const std::vector<OpInfo>& Table() {
  //                     name            reduces rooted in-place blocked min_ranks
  static const std::vector<OpInfo> table = {
      {"allreduce", true, false, true, false, 1},
      {"allgather", false, false, true, true, 1},
      {"reducescatter", true, false, true, true, 1},
      {"broadcast", false, true, true, false, 1},
      {"reduce", true, true, true, false, 1},
      {"alltoall", false, false, false, true, 1},
      {"sendrecv", false, false, false, false, 2},
      {"isendrecv", false, false, false, false, 2},
      {"gather", false, true, false, true, 1},
      {"scatter", false, true, false, true, 1},
  };
  return table;
}

DenseTensor Alloc(const phi::Place& place, DataType dt, int64_t n) {
  return DenseTensor(place, dt, phi::DDim({n}));
}

}  // namespace

double OpInfo::BusFactor(int n) const {
  if (name == "allreduce") return n > 0 ? 2.0 * (n - 1) / n : 0;
  if (name == "allgather" || name == "reducescatter" || name == "alltoall" ||
      name == "gather" || name == "scatter") {
    return n > 0 ? static_cast<double>(n - 1) / n : 0;
  }
  return 1.0;  // broadcast, reduce, sendrecv
}

const OpInfo* FindOp(const std::string& name) {
  for (const auto& op : Table()) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

SizePlan PlanSize(const OpInfo& op, int64_t requested_bytes, size_t elem_size, int world) {
  const int64_t blocks = op.blocked ? world : 1;
  SizePlan p;
  p.block = std::max<int64_t>(1, requested_bytes / static_cast<int64_t>(elem_size) / blocks);
  p.count = p.block * blocks;
  p.bytes = p.count * static_cast<int64_t>(elem_size);
  return p;
}

BenchOp::BenchOp(const OpInfo& info, const BenchOptions& opts, ProcessGroup* pg,
                 phi::Place place)
    : info_(info),
      kind_(KindOf(info.name)),
      opts_(opts),
      pg_(pg),
      place_(place),
      rank_(pg->GetRank()),
      world_(pg->GetSize()) {}

OpBuffers BenchOp::MakeBuffers(const SizePlan& plan, bool in_place) const {
  const DataType dt = opts_.dtype;
  const int64_t c = plan.block, n = world_;
  OpBuffers b;
  const std::string& op = info_.name;
  int64_t in_n = c, out_n = c;
  if (op == "allgather" || op == "gather") out_n = c * n;
  if (op == "reducescatter" || op == "scatter") in_n = c * n;
  if (op == "alltoall") in_n = out_n = c * n;
  b.in_storage = Alloc(place_, dt, in_n);
  if (!in_place) {
    b.out_storage = Alloc(place_, dt, out_n);
    b.input = b.in_storage;
    b.output = b.out_storage;
  } else if (op == "allgather") {  // the input is this rank's block of the output
    b.out_storage = Alloc(place_, dt, out_n);
    b.input = b.out_storage.FlatView(rank_ * c, c);
    b.output = b.out_storage;
  } else if (op == "reducescatter") {  // the output is this rank's block of the input
    b.input = b.in_storage;
    b.output = b.in_storage.FlatView(rank_ * c, c);
  } else {
    b.input = b.in_storage;
    b.output = b.in_storage;
  }
  return b;
}

void BenchOp::Fill(OpBuffers* b, const SizePlan&) const {
  FillInput(&b->input, opts_.dtype, info_.reduces, opts_.redop, rank_);
  // An out-of-place output starts as a value no result has (127), so an element that is
  // never written counts as wrong instead of passing by accident.
  if (b->out_storage.initialized() && b->output.Holder() != b->input.Holder()) {
    phi::Fill(&b->out_storage, 127.0);
  }
}

BenchOp::Kind BenchOp::KindOf(const std::string& name) {
  static const std::pair<const char*, Kind> kKinds[] = {
      {"allreduce", Kind::kAllReduce}, {"allgather", Kind::kAllGather},
      {"reducescatter", Kind::kReduceScatter}, {"broadcast", Kind::kBroadcast},
      {"reduce", Kind::kReduce}, {"alltoall", Kind::kAllToAll}, {"gather", Kind::kGather},
      {"scatter", Kind::kScatter}, {"sendrecv", Kind::kSendRecv},
      {"isendrecv", Kind::kISendRecv}};
  for (const auto& k : kKinds) {
    if (name == k.first) return k.second;
  }
  PADDLE_THROW(phi::errors::InvalidArgument("comm_bench: no op named '%s'", name.c_str()));
}

BenchOp::Tasks BenchOp::Issue(OpBuffers* b, bool sync_op) const {
  const int next = (rank_ + 1) % world_, prev = (rank_ - 1 + world_) % world_;
  if (kind_ == Kind::kISendRecv) {
    // The same ring shift as two ungrouped ops (irecv, then isend): the point-to-point lanes'
    // path, where sendrecv measures a group's. Both tasks are the caller's to wait: the
    // input is the send's until its own task ends, whatever the receive's says.
    auto recv = pg_->Recv(&b->output, prev, false);
    auto send = pg_->Send(b->input, next, false);
    if (sync_op) {
      send->Wait();
      recv->Wait();
    }
    return {recv, send};
  }
  return {IssueOne(b, sync_op, next, prev), nullptr};
}

ProcessGroup::TaskPtr BenchOp::IssueOne(OpBuffers* b, bool sync_op, int next, int prev) const {
  const int root = opts_.root;
  DenseTensor& in = b->input;
  DenseTensor* out = &b->output;
  switch (kind_) {
    case Kind::kAllReduce:
      return pg_->AllReduce(out, in, AllreduceOptions{opts_.redop, 1.0}, sync_op);
    case Kind::kAllGather: return pg_->AllGather(out, in, sync_op);
    case Kind::kReduceScatter:
      return pg_->ReduceScatter(out, in, ReduceScatterOptions{opts_.redop, 1.0}, sync_op);
    case Kind::kBroadcast: return pg_->Broadcast(out, in, BroadcastOptions{root, 0}, sync_op);
    case Kind::kReduce:
      return pg_->Reduce(out, in, ReduceOptions{opts_.redop, 1.0, root}, sync_op);
    case Kind::kAllToAll: return pg_->AllToAll(out, in, {}, {}, sync_op);
    case Kind::kGather: return pg_->Gather(out, in, GatherOptions{root}, sync_op);
    case Kind::kScatter: return pg_->Scatter(out, in, ScatterOptions{root}, sync_op);
    case Kind::kSendRecv:
    case Kind::kISendRecv:
      break;
  }
  // sendrecv: a ring shift, as one group so the crossing send and receive never block.
  pg_->StartCoalescing();
  try {
    pg_->Send(in, next, sync_op);
    pg_->Recv(out, prev, sync_op);
  } catch (...) {
    pg_->EndCoalescing();
    throw;
  }
  return pg_->EndCoalescing();
}

int64_t BenchOp::Check(const OpBuffers& b, const SizePlan& plan) const {
  const std::string& op = info_.name;
  if ((op == "reduce" || op == "gather") && rank_ != opts_.root) return 0;
  CheckSpec s{Layout::kReduceSame, opts_.dtype, opts_.redop, rank_, world_, opts_.root,
              plan.block};
  if (op == "reducescatter") s.layout = Layout::kReduceBlock;
  if (op == "allgather" || op == "gather") s.layout = Layout::kConcat;
  if (op == "broadcast") s.layout = Layout::kFromRoot;
  if (op == "scatter") s.layout = Layout::kFromRootBlock;
  if (op == "alltoall") s.layout = Layout::kTranspose;
  if (op == "sendrecv" || op == "isendrecv") s.layout = Layout::kFromPrev;
  return CountWrong(b.output, s);
}

}  // namespace bench
}  // namespace paddle_like
