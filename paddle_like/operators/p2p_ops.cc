// Point-to-point operators (Paddle's pipeline-parallel ops). `peer` is a group rank.
//
//   send_v2:     X; peer, dynamic_shape (send X's shape first, so the receiver needs none).
//   recv_v2:     -> Out; peer, out_shape, dtype (VarType number), dynamic_shape.
//   partial_send / partial_recv: part `id` of `num` equal parts of the flat tensor (the
//                receiver allocates Out of out_shape x dtype and fills only that part).
//   partial_allgather: X -> Out (X's shape): rank r contributes part r of nranks equal parts
//                of X's flat elements; Out holds every rank's part. nranks, rank (or their
//                partial_send spelling num, id: checked alike).
// All take ring_id and use_calc_stream.
#include <string>
#include <vector>

#include "paddle_like/framework/var_type.h"
#include "paddle_like/operators/comm_ring.h"
#include "paddle_like/operators/register_ops.h"

namespace paddle_like {
namespace operators {

namespace {

int PeerAttr(const ExecutionContext& ctx, const CommOp& comm) {
  const int peer = ctx.Attr<int>("peer");
  CheckArg(ctx, peer >= 0 && peer < comm.nranks && peer != comm.rank,
           "peer " + std::to_string(peer) + " must be another rank of the " +
               std::to_string(comm.nranks) + "-rank ring " + std::to_string(comm.ring_id) +
               " (this process is rank " + std::to_string(comm.rank) + ")");
  return peer;
}

// The part [offset, offset + count) that `num` and `id` select of `numel` elements.
std::pair<int64_t, int64_t> PartOf(const ExecutionContext& ctx, int64_t numel) {
  const int num = ctx.Attr<int>("num");
  const int id = ctx.Attr<int>("id");
  CheckArg(ctx, num >= 1 && id >= 0 && id < num,
           "needs 0 <= id < num, got id " + std::to_string(id) + ", num " + std::to_string(num));
  CheckArg(ctx, numel % num == 0,
           "the tensor's " + std::to_string(numel) + " elements must split into num " +
               std::to_string(num) + " equal parts");
  return {id * (numel / num), numel / num};
}

// out_shape and dtype of a receiving op: a shape with no negative dims (Paddle's recv_v2
// needs it unless dynamic_shape) and a tensor dtype.
phi::DDim OutShapeAttr(const ExecutionContext& ctx) {
  std::vector<int64_t> shape = ctx.AttrOr<std::vector<int64_t>>("out_shape", {});
  bool ok = !shape.empty();
  for (int64_t d : shape) ok = ok && d >= 0;
  CheckArg(ctx, ok, "out_shape must be given with non-negative dims (or set dynamic_shape)");
  return phi::DDim(shape);
}

void SendKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  const int peer = PeerAttr(ctx, comm);
  DenseTensor in = InputCopy(ctx, "X");
  if (ctx.AttrOr<bool>("dynamic_shape", false)) {
    // The rank, then the dims, as int64: the receiver allocates from them.
    DenseTensor ndim = DenseTensor::FromVector<int64_t>({in.dims().size()});
    DenseTensor dims =
        DenseTensor::FromVector<int64_t>(in.dims().Get(), phi::DDim({in.dims().size()}));
    IssueComm(ctx, comm, [&](bool sync_op, bool calc) {
      return comm.pg->Send(ndim, peer, 0, -1, sync_op, calc);
    });
    if (in.dims().size() > 0) {
      IssueComm(ctx, comm, [&](bool sync_op, bool calc) {
        return comm.pg->Send(dims, peer, 0, -1, sync_op, calc);
      });
    }
  }
  IssueComm(ctx, comm,
            [&](bool sync_op, bool calc) { return comm.pg->Send(in, peer, 0, -1, sync_op, calc); });
}

void RecvKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  const int peer = PeerAttr(ctx, comm);
  const phi::DataType dtype = framework::FromVarType(ctx.Attr<int>("dtype"));
  phi::DDim shape;
  if (ctx.AttrOr<bool>("dynamic_shape", false)) {
    // The allocation needs the shape now: these receives complete before the kernel goes on.
    DenseTensor ndim(ctx.GetPlace(), phi::DataType::INT64, phi::DDim({1}));
    IssueCommAndWait(ctx, comm, [&](bool sync_op, bool calc) {
      return comm.pg->Recv(&ndim, peer, 0, -1, sync_op, calc);
    });
    const int64_t n = ndim.data<int64_t>()[0];
    CheckArg(ctx, n >= 0 && n <= 64, "received a shape of " + std::to_string(n) + " dims");
    std::vector<int64_t> dims(static_cast<size_t>(n));
    if (n > 0) {
      DenseTensor t(ctx.GetPlace(), phi::DataType::INT64, phi::DDim({n}));
      IssueCommAndWait(ctx, comm, [&](bool sync_op, bool calc) {
        return comm.pg->Recv(&t, peer, 0, -1, sync_op, calc);
      });
      dims = t.ToVector<int64_t>();
    }
    shape = phi::DDim(dims);
  } else {
    shape = OutShapeAttr(ctx);
  }
  DenseTensor* out = ctx.Output("Out");
  AllocateOut(ctx, out, dtype, shape);
  IssueComm(ctx, comm, [&](bool sync_op, bool calc) {
    return comm.pg->Recv(out, peer, 0, -1, sync_op, calc);
  });
}

void PartialSendKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  const int peer = PeerAttr(ctx, comm);
  DenseTensor in = InputCopy(ctx, "X");
  const auto part = PartOf(ctx, in.numel());
  IssueComm(ctx, comm, [&](bool sync_op, bool calc) {
    return comm.pg->Send(in, peer, part.first, part.second, sync_op, calc);
  });
}

void PartialRecvKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  const int peer = PeerAttr(ctx, comm);
  const phi::DataType dtype = framework::FromVarType(ctx.Attr<int>("dtype"));
  const phi::DDim shape = OutShapeAttr(ctx);
  const auto part = PartOf(ctx, shape.numel());
  DenseTensor* out = ctx.Output("Out");
  AllocateOut(ctx, out, dtype, shape);
  IssueComm(ctx, comm, [&](bool sync_op, bool calc) {
    return comm.pg->Recv(out, peer, part.first, part.second, sync_op, calc);
  });
}

void PartialAllGatherKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  // `num` / `id` (the partial_send spelling) may stand for nranks / rank: the parts are
  // always one per rank, each rank contributing its own.
  if (ctx.op().HasAttr("num")) {
    CheckArg(ctx, ctx.Attr<int>("num") == comm.nranks,
             "num is " + std::to_string(ctx.Attr<int>("num")) + " but ring " +
                 std::to_string(comm.ring_id) + " has " + std::to_string(comm.nranks) +
                 " ranks (one part per rank)");
  }
  if (ctx.op().HasAttr("id")) {
    CheckArg(ctx, ctx.Attr<int>("id") == comm.rank,
             "id is " + std::to_string(ctx.Attr<int>("id")) + " but this process is rank " +
                 std::to_string(comm.rank) + " (each rank contributes its own part)");
  }
  const DenseTensor& x = ctx.Input("X");
  CheckArg(ctx, x.numel() % comm.nranks == 0,
           "X's " + std::to_string(x.numel()) + " elements must split into nranks " +
               std::to_string(comm.nranks) + " equal parts");
  const int64_t part = x.numel() / comm.nranks;
  // Out is usually X itself (Paddle runs it in place): gather from a copy, never from the
  // buffer being written.
  DenseTensor in;
  phi::Copy(x, ctx.GetPlace(), &in);
  DenseTensor* out = ctx.Output("Out");
  AllocateOut(ctx, out, in.dtype(), in.dims(), &in);
  IssueComm(ctx, comm, [&](bool sync_op, bool calc) {
    return comm.pg->AllGather(out, in, comm.rank * part, part, sync_op, calc);
  });
}

}  // namespace

void RegisterP2POps(KernelRegistry* r) {
  RegisterCommKernel(r, "send_v2", SendKernel);
  RegisterCommKernel(r, "recv_v2", RecvKernel);
  RegisterCommKernel(r, "partial_send", PartialSendKernel);
  RegisterCommKernel(r, "partial_recv", PartialRecvKernel);
  RegisterCommKernel(r, "partial_allgather", PartialAllGatherKernel);
}

}  // namespace operators
}  // namespace paddle_like
