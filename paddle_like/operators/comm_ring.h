// How a collective operator finds its group and issues its op: the one path every
// collective kernel takes.
//
// A kernel reads `ring_id` (default 0) and finds the ProcessGroup registered under it in
// distributed::ProcessGroupIdMap; the op then goes through that ProcessGroup, so sequence
// numbers, the flight recorder, timeouts and allocation tracking apply as to any other op.
//
// Streams (`use_calc_stream`, default false, as in Paddle):
//  - true: the op runs on the calc stream and is complete for it when the kernel returns;
//  - false: the op runs on the group's comm stream and the kernel returns at once. The
//    executor remembers it (PendingComm): a later op touching its tensors, or
//    c_sync_comm_stream of its ring, orders the calc stream after it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "paddle_like/dist/distributed.h"
#include "paddle_like/framework/execution_context.h"

namespace paddle_like {
namespace operators {

using distributed::ProcessGroup;
using framework::ExecutionContext;
using phi::DenseTensor;

// Registers the process group that `group` uses for `device` tensors ("cpu", "cuda") under
// `ring_id` (-1: the group's id), so that operators with that ring_id use it. The map then
// keeps the group alive. PreconditionNotMet when the id is taken; non-members may not
// register (PreconditionNotMet). Returns the ring id.
int RegisterCommRing(const dist::GroupPtr& group, int ring_id = -1,
                     const std::string& device = "cpu");

// A collective op's group and stream, resolved and checked before anything is issued.
struct CommOp {
  std::shared_ptr<ProcessGroup> pg;
  int ring_id = 0;
  int rank = 0;    // this process's rank in the group
  int nranks = 1;  // the group's size
  bool use_calc_stream = false;
};

// Finds the group of the op's ring_id: NotFound naming the ring ids that exist. When the op
// sets `nranks` (or `rank`), it must equal the group's size (rank): InvalidArgument.
CommOp ResolveComm(const ExecutionContext& ctx);

// Runs `issue(sync_op, use_calc_stream)` on the op's stream (see above). On the comm stream
// the task is handed to the executor with every variable of the op.
template <typename IssueFn>
ProcessGroup::TaskPtr IssueComm(const ExecutionContext& ctx, const CommOp& comm, IssueFn&& issue);
// The same for ops whose kernel needs the result before it returns (a local step after the
// exchange): issued on the op's stream, then the calc stream waits for it.
template <typename IssueFn>
void IssueCommAndWait(const ExecutionContext& ctx, const CommOp& comm, IssueFn&& issue) {
  ProcessGroup::TaskPtr task = issue(comm.use_calc_stream, comm.use_calc_stream);
  if (!comm.use_calc_stream) task->Wait();
}

// InvalidArgument "<op>: <message>" unless `cond` (shape and attribute checks of kernels).
void CheckArg(const ExecutionContext& ctx, bool cond, const std::string& message);
// Every variable name of the op's inputs and outputs.
std::vector<std::string> OpVarNames(const ExecutionContext& ctx);
// Gives `out` contiguous storage of `dims` x dtype on the op's place (kept when it already
// has exactly that: in-place ops reuse their input), but never the storage of
// `must_not_alias` (ops whose engine primitive cannot run in place).
void AllocateOut(const ExecutionContext& ctx, DenseTensor* out, phi::DataType dtype,
                 const phi::DDim& dims, const DenseTensor* must_not_alias = nullptr);
// The op's one input slot, as a tensor of its own (sharing storage): it stays valid when
// the output is the same variable and gets new storage.
inline DenseTensor InputCopy(const ExecutionContext& ctx, const std::string& slot) {
  return ctx.Input(slot);
}

template <typename IssueFn>
ProcessGroup::TaskPtr IssueComm(const ExecutionContext& ctx, const CommOp& comm, IssueFn&& issue) {
  ProcessGroup::TaskPtr task = issue(comm.use_calc_stream, comm.use_calc_stream);
  if (!comm.use_calc_stream) ctx.pending_comm()->Add(comm.ring_id, task, OpVarNames(ctx));
  return task;
}

}  // namespace operators
}  // namespace paddle_like
