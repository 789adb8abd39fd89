// Expert-parallel routing (Paddle's MoE ops). With E = n_expert experts per rank and
// counts of E * nranks entries, entry j * E + i refers to expert i of rank j:
//
//   global_scatter: X (rows sorted by destination: for j, for i, local_count[j*E+i] rows),
//                   local_count, global_count -> Out, the rows this rank's experts get,
//                   sorted by expert then source rank (global_count[j*E+i] rows from rank j
//                   for expert i).
//   global_gather:  the inverse: X sorted like global_scatter's Out -> Out sorted like
//                   global_scatter's X.
// global_count is what an alltoall of local_count gives. Counts may be uneven or zero.
// One engine all-to-all with per-rank row counts moves the rows; the expert-major order is a
// local row permutation (after the exchange for global_scatter, so that kernel waits for
// the exchange; before it for global_gather). ring_id, use_calc_stream.
#include <cstring>
#include <string>
#include <vector>

#include "paddle_like/operators/comm_ring.h"
#include "paddle_like/operators/register_ops.h"

namespace paddle_like {
namespace operators {

namespace {

struct Routing {
  int64_t experts = 0;                 // E
  std::vector<int64_t> local, global;  // E * nranks counts
  int64_t local_rows = 0, global_rows = 0;
  // Rows per peer rank (the all-to-all's splits).
  std::vector<int64_t> local_per_rank, global_per_rank;
};

Routing ReadCounts(const ExecutionContext& ctx, const CommOp& comm) {
  const DenseTensor& lc = ctx.Input("local_count");
  const DenseTensor& gc = ctx.Input("global_count");
  CheckArg(ctx, lc.dtype() == phi::DataType::INT64 && gc.dtype() == phi::DataType::INT64,
           "local_count and global_count must be int64");
  CheckArg(ctx, lc.numel() == gc.numel() && lc.numel() > 0 && lc.numel() % comm.nranks == 0,
           "local_count (" + std::to_string(lc.numel()) + ") and global_count (" +
               std::to_string(gc.numel()) +
               ") must have the same number of entries, a positive multiple of nranks " +
               std::to_string(comm.nranks));
  Routing r;
  r.experts = lc.numel() / comm.nranks;
  r.local = lc.ToVector<int64_t>();
  r.global = gc.ToVector<int64_t>();
  r.local_per_rank.assign(comm.nranks, 0);
  r.global_per_rank.assign(comm.nranks, 0);
  for (int64_t k = 0; k < lc.numel(); ++k) {
    CheckArg(ctx, r.local[k] >= 0 && r.global[k] >= 0, "counts must not be negative");
    r.local_per_rank[k / r.experts] += r.local[k];
    r.global_per_rank[k / r.experts] += r.global[k];
    r.local_rows += r.local[k];
    r.global_rows += r.global[k];
  }
  return r;
}

phi::DDim WithRows(const DenseTensor& x, int64_t rows) {
  std::vector<int64_t> d = x.dims().Get();
  d[0] = rows;
  return phi::DDim(d);
}

// Moves rows between the rank-major order (for j, for i) and the expert-major order
// (for i, for j) of `counts`. to_expert_major: src is rank-major.
void PermuteRows(const DenseTensor& src, DenseTensor* dst, const std::vector<int64_t>& counts,
                 int64_t experts, int nranks, bool to_expert_major) {
  const size_t row_bytes = src.numel() == 0 ? 0 : src.nbytes() / src.dims()[0];
  std::vector<int64_t> rank_major_off(counts.size()), expert_major_off(counts.size());
  int64_t off = 0;
  for (size_t k = 0; k < counts.size(); ++k) rank_major_off[k] = off, off += counts[k];
  off = 0;
  for (int64_t i = 0; i < experts; ++i) {
    for (int j = 0; j < nranks; ++j) {
      expert_major_off[j * experts + i] = off;
      off += counts[j * experts + i];
    }
  }
  const char* s = static_cast<const char*>(src.data());
  char* d = static_cast<char*>(dst->data());
  for (size_t k = 0; k < counts.size(); ++k) {
    const int64_t from = to_expert_major ? rank_major_off[k] : expert_major_off[k];
    const int64_t to = to_expert_major ? expert_major_off[k] : rank_major_off[k];
    if (counts[k] > 0) std::memcpy(d + to * row_bytes, s + from * row_bytes, counts[k] * row_bytes);
  }
}

void CheckX(const ExecutionContext& ctx, const DenseTensor& x, int64_t rows, const char* which) {
  CheckArg(ctx, x.dims().size() >= 1 && x.dims()[0] == rows,
           "X has shape " + x.dims().to_str() + " but " + which + " sums to " +
               std::to_string(rows) + " rows");
}

void GlobalScatterKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  DenseTensor x = InputCopy(ctx, "X");
  const Routing r = ReadCounts(ctx, comm);
  CheckX(ctx, x, r.local_rows, "local_count");
  DenseTensor received(ctx.GetPlace(), x.dtype(), WithRows(x, r.global_rows));
  IssueCommAndWait(ctx, comm, [&](bool sync_op, bool calc) {
    return comm.pg->AllToAll(&received, x, r.global_per_rank, r.local_per_rank, sync_op, calc);
  });
  DenseTensor* out = ctx.Output("Out");
  AllocateOut(ctx, out, x.dtype(), received.dims(), &x);
  PermuteRows(received, out, r.global, r.experts, comm.nranks, /*to_expert_major=*/true);
}

void GlobalGatherKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  DenseTensor x = InputCopy(ctx, "X");
  const Routing r = ReadCounts(ctx, comm);
  CheckX(ctx, x, r.global_rows, "global_count");
  DenseTensor send(ctx.GetPlace(), x.dtype(), x.dims());
  PermuteRows(x, &send, r.global, r.experts, comm.nranks, /*to_expert_major=*/false);
  DenseTensor* out = ctx.Output("Out");
  AllocateOut(ctx, out, x.dtype(), WithRows(x, r.local_rows), &x);
  IssueComm(ctx, comm, [&](bool sync_op, bool calc) {
    return comm.pg->AllToAll(out, send, r.local_per_rank, r.global_per_rank, sync_op, calc);
  });
}

}  // namespace

void RegisterExpertParallelOps(KernelRegistry* r) {
  RegisterCommKernel(r, "global_scatter", GlobalScatterKernel);
  RegisterCommKernel(r, "global_gather", GlobalGatherKernel);
}

}  // namespace operators
}  // namespace paddle_like
