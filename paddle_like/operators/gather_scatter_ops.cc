// c_broadcast, c_allgather, c_reducescatter, c_scatter and alltoall. Shapes follow Paddle:
//
//   c_broadcast:     X -> Out (X's shape); root: the group rank that sends.
//   c_allgather:     X [d0, ...] -> Out [nranks * d0, ...], rank r's X at rows r*d0.
//   c_reducescatter: X [nranks * d, ...] -> Out [d, ...], the sum of every rank's block r.
//   c_scatter:       X [nranks * d, ...] (read on root) -> Out [d, ...]; root, nranks.
//   alltoall:        X [nranks * d, ...] -> Out (X's shape): block r goes to rank r, and
//                    Out's block r comes from rank r.
// Every op takes ring_id, use_calc_stream, and may set nranks (checked against the ring).
#include <string>

#include "paddle_like/operators/comm_ring.h"
#include "paddle_like/operators/register_ops.h"

namespace paddle_like {
namespace operators {

namespace {

// X's dims with dim 0 multiplied (mul) or divided (div) by nranks; a division checks that
// dim 0 is a multiple of nranks, naming the op and the shapes.
phi::DDim Dim0Scaled(const ExecutionContext& ctx, const DenseTensor& x, int nranks, bool div) {
  CheckArg(ctx, x.dims().size() >= 1,
           "X must have at least one dimension, got shape " + x.dims().to_str());
  std::vector<int64_t> d = x.dims().Get();
  if (div) {
    CheckArg(ctx, d[0] % nranks == 0,
             "X's first dimension (shape " + x.dims().to_str() + ") must be a multiple of nranks " +
                 std::to_string(nranks));
    d[0] /= nranks;
  } else {
    d[0] *= nranks;
  }
  return phi::DDim(d);
}

int RootAttr(const ExecutionContext& ctx, const CommOp& comm) {
  const int root = ctx.AttrOr<int>("root", 0);
  CheckArg(ctx, root >= 0 && root < comm.nranks,
           "root " + std::to_string(root) + " is not a rank of the " + std::to_string(comm.nranks) +
               "-rank ring " + std::to_string(comm.ring_id));
  return root;
}

void BroadcastKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  distributed::BroadcastOptions opts;
  opts.source_rank = RootAttr(ctx, comm);
  DenseTensor in = InputCopy(ctx, "X");
  DenseTensor* out = ctx.Output("Out");
  AllocateOut(ctx, out, in.dtype(), in.dims());
  IssueComm(ctx, comm, [&](bool sync_op, bool calc) {
    return comm.pg->Broadcast(out, in, opts, sync_op, calc);
  });
}

void AllGatherKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  DenseTensor in = InputCopy(ctx, "X");
  DenseTensor* out = ctx.Output("Out");
  AllocateOut(ctx, out, in.dtype(), Dim0Scaled(ctx, in, comm.nranks, false), &in);
  IssueComm(ctx, comm, [&](bool sync_op, bool calc) {
    return comm.pg->AllGather(out, in, 0, -1, sync_op, calc);
  });
}

void ReduceScatterKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  DenseTensor in = InputCopy(ctx, "X");
  phi::distributed::CheckReduceSupported(phi::distributed::ReduceOp::SUM, in.dtype());
  const phi::DDim out_dims = Dim0Scaled(ctx, in, comm.nranks, true);
  DenseTensor* out = ctx.Output("Out");
  AllocateOut(ctx, out, in.dtype(), out_dims, &in);
  IssueComm(ctx, comm, [&](bool sync_op, bool calc) {
    return comm.pg->ReduceScatter(out, in, distributed::ReduceScatterOptions(), sync_op, calc);
  });
}

void ScatterKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  distributed::ScatterOptions opts;
  opts.root_rank = RootAttr(ctx, comm);
  DenseTensor in = InputCopy(ctx, "X");
  const phi::DDim out_dims = Dim0Scaled(ctx, in, comm.nranks, true);
  DenseTensor* out = ctx.Output("Out");
  AllocateOut(ctx, out, in.dtype(), out_dims, &in);
  IssueComm(ctx, comm, [&](bool sync_op, bool calc) {
    return comm.pg->Scatter(out, in, opts, sync_op, calc);
  });
}

void AllToAllKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  DenseTensor in = InputCopy(ctx, "X");
  Dim0Scaled(ctx, in, comm.nranks, true);  // the shape check
  DenseTensor* out = ctx.Output("Out");
  AllocateOut(ctx, out, in.dtype(), in.dims(), &in);
  IssueComm(ctx, comm, [&](bool sync_op, bool calc) {
    return comm.pg->AllToAll(out, in, {}, {}, sync_op, calc);
  });
}

}  // namespace

void RegisterGatherScatterOps(KernelRegistry* r) {
  RegisterCommKernel(r, "c_broadcast", BroadcastKernel);
  RegisterCommKernel(r, "c_allgather", AllGatherKernel);
  RegisterReduceKernel(r, "c_reducescatter", ReduceScatterKernel);
  RegisterCommKernel(r, "c_scatter", ScatterKernel);
  RegisterCommKernel(r, "alltoall", AllToAllKernel);
}

}  // namespace operators
}  // namespace paddle_like
