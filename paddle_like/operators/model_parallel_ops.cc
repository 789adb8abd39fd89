// The model-parallel glue of Megatron layers (Paddle's mp_ops):
//
//   c_identity: Out = X. Forward of a column-parallel input; its gradient is c_allreduce_sum.
//   c_concat:   X [..., d] -> Out [..., nranks * d]: every rank's X along the last axis, in
//               rank order (all-gather, then a local concat). Its gradient is c_split.
//   c_split:    X [..., nranks * d] -> Out [..., d]: this rank's block of the last axis (no
//               communication). Its gradient is c_concat.
// Attributes: ring_id, use_calc_stream, and rank / nranks (checked against the ring).
#include <string>
#include <vector>

#include "paddle_like/operators/comm_ring.h"
#include "paddle_like/operators/register_ops.h"
#include "phi/kernels/math_kernels.h"

namespace paddle_like {
namespace operators {

namespace {

int64_t LastDim(const ExecutionContext& ctx, const DenseTensor& x) {
  CheckArg(ctx, x.dims().size() >= 1,
           "X must have at least one dimension, got shape " + x.dims().to_str());
  return x.dims()[x.dims().size() - 1];
}

void IdentityKernel(const ExecutionContext& ctx) {
  ResolveComm(ctx);  // the ring must exist even though nothing is sent
  const DenseTensor& in = ctx.Input("X");
  DenseTensor* out = ctx.Output("Out");
  if (out != &in) phi::Copy(in, ctx.GetPlace(), out);
}

void ConcatKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  DenseTensor in = InputCopy(ctx, "X");
  LastDim(ctx, in);
  // Rank r's X lands in row r of `gathered`.
  DenseTensor gathered(ctx.GetPlace(), in.dtype(), phi::DDim({comm.nranks, in.numel()}));
  IssueCommAndWait(ctx, comm, [&](bool sync_op, bool calc) {
    return comm.pg->AllGather(&gathered, in, 0, -1, sync_op, calc);
  });
  std::vector<DenseTensor> parts;
  std::vector<const DenseTensor*> ptrs;
  parts.reserve(comm.nranks);
  for (int r = 0; r < comm.nranks; ++r) {
    parts.push_back(gathered.Slice(r, r + 1));
    parts.back().Resize(in.dims());
    ptrs.push_back(&parts.back());
  }
  phi::ConcatKernel(ptrs, -1, ctx.Output("Out"));
}

void SplitKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  DenseTensor in = InputCopy(ctx, "X");
  const int64_t last = LastDim(ctx, in);
  CheckArg(ctx, last % comm.nranks == 0,
           "X's last dimension (shape " + in.dims().to_str() + ") must be a multiple of nranks " +
               std::to_string(comm.nranks));
  std::vector<DenseTensor> parts(static_cast<size_t>(comm.nranks));
  std::vector<DenseTensor*> ptrs;
  for (auto& p : parts) ptrs.push_back(&p);
  phi::SplitKernel(in, std::vector<int64_t>(comm.nranks, last / comm.nranks), -1, ptrs);
  *ctx.Output("Out") = parts[comm.rank];
}

}  // namespace

void RegisterModelParallelOps(KernelRegistry* r) {
  RegisterCommKernel(r, "c_identity", IdentityKernel);
  RegisterCommKernel(r, "c_concat", ConcatKernel);
  RegisterCommKernel(r, "c_split", SplitKernel);
}

}  // namespace operators
}  // namespace paddle_like
