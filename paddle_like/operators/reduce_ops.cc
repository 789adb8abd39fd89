// c_allreduce_{sum,max,min,prod,avg}, mp_allreduce_sum and c_reduce_{sum,max,min,prod}:
// one table names each op's reduction, one kernel per family.
//
//   c_allreduce_*: X -> Out (may be X itself); ring_id, use_calc_stream.
//   c_reduce_*:    X -> Out; root_id (group rank); ring_id, use_calc_stream. Out holds the
//                  result on the root; elsewhere it holds X.
#include <string>
#include <utility>

#include "paddle_like/operators/comm_ring.h"
#include "paddle_like/operators/register_ops.h"
#include "phi/core/errors.h"

namespace paddle_like {
namespace operators {

namespace {

using phi::distributed::ReduceOp;

constexpr std::pair<const char*, ReduceOp> kAllReduceOps[] = {
    {"c_allreduce_sum", ReduceOp::SUM}, {"c_allreduce_max", ReduceOp::MAX},
    {"c_allreduce_min", ReduceOp::MIN}, {"c_allreduce_prod", ReduceOp::PRODUCT},
    {"c_allreduce_avg", ReduceOp::AVG}, {"mp_allreduce_sum", ReduceOp::SUM},
};
constexpr std::pair<const char*, ReduceOp> kReduceOps[] = {
    {"c_reduce_sum", ReduceOp::SUM},
    {"c_reduce_max", ReduceOp::MAX},
    {"c_reduce_min", ReduceOp::MIN},
    {"c_reduce_prod", ReduceOp::PRODUCT},
};

template <size_t N>
ReduceOp ReductionOf(const std::pair<const char*, ReduceOp> (&table)[N], const std::string& type) {
  for (const auto& e : table) {
    if (type == e.first) return e.second;
  }
  PADDLE_THROW(phi::errors::NotFound("%s is not a reduction operator.", type.c_str()));
}

void AllReduceKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  distributed::AllreduceOptions opts;
  opts.reduce_op = ReductionOf(kAllReduceOps, ctx.Type());
  phi::distributed::CheckReduceSupported(opts.reduce_op, ctx.Input("X").dtype());
  DenseTensor in = InputCopy(ctx, "X");
  DenseTensor* out = ctx.Output("Out");
  AllocateOut(ctx, out, in.dtype(), in.dims());
  IssueComm(ctx, comm, [&](bool sync_op, bool calc) {
    return comm.pg->AllReduce(out, in, opts, sync_op, calc);
  });
}

void ReduceKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  distributed::ReduceOptions opts;
  opts.reduce_op = ReductionOf(kReduceOps, ctx.Type());
  opts.root_rank = ctx.AttrOr<int>("root_id", 0);
  CheckArg(ctx, opts.root_rank >= 0 && opts.root_rank < comm.nranks,
           "root_id " + std::to_string(opts.root_rank) + " is not a rank of the " +
               std::to_string(comm.nranks) + "-rank ring " + std::to_string(comm.ring_id));
  phi::distributed::CheckReduceSupported(opts.reduce_op, ctx.Input("X").dtype());
  DenseTensor in = InputCopy(ctx, "X");
  DenseTensor* out = ctx.Output("Out");
  // Only the root's Out is written by the engine; the others keep X there.
  if (out->Holder() != in.Holder()) phi::Copy(in, ctx.GetPlace(), out);
  IssueComm(ctx, comm,
            [&](bool sync_op, bool calc) { return comm.pg->Reduce(out, in, opts, sync_op, calc); });
}

}  // namespace

void RegisterReduceOps(KernelRegistry* r) {
  for (const auto& e : kAllReduceOps) RegisterReduceKernel(r, e.first, AllReduceKernel);
  for (const auto& e : kReduceOps) RegisterReduceKernel(r, e.first, ReduceKernel);
}

}  // namespace operators
}  // namespace paddle_like
