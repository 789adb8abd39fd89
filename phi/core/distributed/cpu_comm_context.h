// CpuCommContext: what every host-memory engine (Gloo, MPI) does alike, written once:
//   - the broken state: the first failure's message; every later call raises it at once
//     (the engine's connections may hold stale bytes after a failure);
//   - the engine group (GroupStart/GroupEnd): the all-reduces and the sends and receives
//     called inside it are kept, and at the outermost GroupEnd the sends and receives are
//     all posted before any is waited for (a ring of blocking sends would deadlock), then the
//     all-reduces run fused, one per (dtype, op, factor) (cpu_coalesce.h);
//   - the reduction's pre- and post-processing: complex as its real view, PREMUL_SUM's input
//     scaled, and AVG's divide after the sum where the engine's path did not divide while the
//     data was in cache (cpu_reduce.h).
// An engine says how to run one prepared all-reduce, how to post and finish a batch of sends
// and receives, and what its Abort wakes.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "phi/core/distributed/comm_context.h"
#include "phi/core/distributed/cpu_coalesce.h"
#include "phi/core/distributed/cpu_reduce.h"

namespace phi {
namespace distributed {

class CpuCommContext : public CommContext {
 public:
  // `engine`: its name in messages ("Gloo"); `describe`: the communicator, in every error.
  CpuCommContext(int rank, int size, const char* engine, std::string describe);

  // Inside an engine group: kept, and run fused at the outermost GroupEnd; else at once.
  void AllReduce(const void* send, void* recv, int64_t count, DataType dtype,
                 const Reduction& red, Stream*) final;
  void GroupStart() final { group_.Start(); }
  void GroupEnd() final;
  // Nothing of the group was posted yet: dropping it is enough.
  void GroupAbort() final { group_.Abort(); }
  // Marks the communicator broken ("aborted: <why>"), then wakes what the engine waits in.
  void Abort(const std::string& why) final;

 protected:
  // An all-reduce outside any group: prepared, run by the engine, finished.
  void RunAllReduce(const void* send, void* recv, int64_t count, DataType dtype,
                    const Reduction& red);
  // The engine's all-reduce of prepared input (a real dtype) under `op` (never PREMUL_SUM: it
  // arrives as SUM of the scaled input). For AVG it sums, and returns true when it divided
  // the sum by the group's size itself (a path that divides each slice as it reduces it,
  // while it is in cache); false: the caller divides.
  virtual bool AllReducePrepared(const void* send, void* recv, int64_t count, DataType dtype,
                                 ReduceOp op) = 0;
  // Posts every send and receive of `ops` before waiting for any; raises the first error.
  virtual void RunP2PBatch(const std::vector<PendingCpuP2P>& ops) = 0;
  // What Abort wakes besides marking the communicator broken (blocked waits, connections).
  virtual void WakeOnAbort(const std::string& why) { (void)why; }

  // A send or receive: kept when an engine group is open on this thread (true), else the
  // caller runs it now (false).
  bool DeferToGroup(const PendingCpuP2P& op);

  // The reduction's pre- and post-processing, also for the engine's other reducing calls
  // (Reduce, ReduceScatter): the input as the engine reduces it and the op it reduces with,
  // then AVG's divide of the `count` elements at `out` (a no-op for other ops).
  struct PreparedReduction {
    CpuReduceInput in;
    ReduceOp op;  // PREMUL_SUM as SUM; AVG stays (its kernel sums)
  };
  PreparedReduction PrepareReduction(const void* send, int64_t count, DataType dtype,
                                     const Reduction& red) const;
  void FinishReduction(const Reduction& red, DataType real_dtype, void* out,
                       int64_t count) const;

  // The broken state. MarkBroken keeps the first reason; ThrowIfBroken raises Unavailable
  // with it; Broken() returns it ("" while usable).
  void MarkBroken(const std::string& why);
  void ThrowIfBroken() const;
  std::string Broken() const;
  const std::string& describe() const { return describe_; }

 private:
  const char* engine_;
  const std::string describe_;
  mutable std::mutex broken_mu_;
  std::string broken_;
  std::atomic<bool> is_broken_{false};  // the common path reads this, not the lock
  CpuGroupBatch<> group_;  // the open engine group (cpu_coalesce.h)
};

}  // namespace distributed
}  // namespace phi
