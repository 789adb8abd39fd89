// The MPI CommContext's class (internal to the MPI engine: mpi_comm_context.cc holds start-up
// and the collectives, mpi_p2p.cc point-to-point and groups, mpi_progress.cc the thread that
// completes posted point-to-point requests, mpi_types.cc the mapping of our dtypes and reduce
// ops onto MPI's).
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "phi/core/distributed/comm_context.h"
#include "phi/core/distributed/cpu_comm_context.h"
#include "phi/core/errors.h"

namespace phi {
namespace distributed {

// Raises External with MPI's own error string when `rc` is not MPI_SUCCESS.
void CheckMpi(int rc, const char* what, const std::string& where);

// What MPI sees of a buffer of our dtype: a type and a count of it.
struct MpiBuffer {
  MPI_Datatype type;
  int count;
};
// For moving bytes (broadcast, gather, send): an unsigned type of the element's width, so
// that counts of up to INT_MAX elements fit (complex types as their real view).
MpiBuffer MpiMoveBuffer(DataType dtype, int64_t count);
// For reducing a real (or bool) dtype under `op`: MPI's own type and op where MPI has them,
// a committed contiguous byte type with a user-defined MPI_Op over the shared CPU kernels
// (cpu_reduce.h) for float16 and bfloat16. AVG and PREMUL_SUM reduce as SUM (the caller
// scales before or divides after, as the Gloo engine does).
struct MpiReduction {
  MPI_Datatype type;
  MPI_Op op;
};
MpiReduction MpiReductionFor(DataType real_dtype, ReduceOp op);
// Raises InvalidArgument when `count` does not fit MPI's int counts.
int MpiCount(int64_t count, const char* what);

class MpiCommContext;

// One thread per process completes the MPI engine's posted sends and receives: it polls
// MPI_Testsome over every pending request of every communicator (MPI has no completion
// callback), ends a request at its deadline (its communicator broken: a send cannot be taken
// back) or when its communicator is broken or aborted, and runs each op's `done`. While
// requests are pending it polls under the spin rule (spin_policy.h), then sleeps in growing
// steps up to 200 us; with none it lingers for the spin bound after the last completion (the
// next op then needs no wake-up), then blocks. So posted ops cost one thread in all, however many
// are in flight.
class MpiProgress {
 public:
  struct Op {
    MPI_Request req = MPI_REQUEST_NULL;
    MpiCommContext* owner = nullptr;
    PendingCpuP2P what;  // the receive's checks (dtype, count, tag), *source
    std::chrono::steady_clock::time_point deadline;
    CommContext::P2PDone done;
  };
  static MpiProgress& Get();
  void Add(Op op);
  // Ends `owner`'s pending ops now (Unavailable: why); returns once none of them is polled
  // or completing. The owner's destructor calls it before freeing its communicator.
  void Drop(MpiCommContext* owner, const std::string& why);
  // Looks at the communicators' broken state now (an abort).
  void Wake();
  // Before MPI_Finalize: ends what is pending and stops the thread.
  void Stop();
  // Lets go of a request that will not complete: a receive is cancelled and waited for (its
  // buffer is free after), a send is freed (MPI may not take it back).
  static void Cancel(Op* op);

 private:
  MpiProgress() = default;
  void Loop();
  // The poller's: end active_[i] with `error` (null: completed with `status`).
  void End(size_t i, std::exception_ptr error, const MPI_Status* status);

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Op> incoming_;                 // under mu_
  std::vector<std::pair<MpiCommContext*, std::string>> drops_;  // under mu_
  uint64_t drops_done_ = 0, drops_asked_ = 0;  // under mu_
  bool started_ = false, stop_ = false;  // under mu_
  std::chrono::microseconds spin_bound_{0};  // under mu_: SpinPolicy::Bound() at the last Add
  // Something new (an op, a drop, an abort): set under mu_, also read without it while
  // the thread lingers.
  std::atomic<bool> news_{false};
  // The thread's.
  std::vector<Op> active_;
  std::vector<MPI_Request> reqs_;
};

class MpiCommContext : public CpuCommContext {
 public:
  MpiCommContext(MPI_Comm comm, int rank, int size, std::chrono::milliseconds timeout,
                 std::string describe);
  ~MpiCommContext() override;

  std::string BackendName() const override { return "MPI"; }
  bool SupportsAnySource() const override { return true; }  // MPI_ANY_SOURCE

  // Reductions: MPI's own type and op, or a user MPI_Op over the shared CPU kernels
  // (mpi_types.cc); complex, AVG and PREMUL_SUM prepared by CpuCommContext. The all-reduce
  // is CpuCommContext's (engine groups fused), running AllReducePrepared.
  void Reduce(const void* send, void* recv, int64_t count, DataType dtype, const Reduction& red,
              int root, Stream*) override;
  void ReduceScatter(const void* send, void* recv, int64_t recv_count, DataType dtype,
                     const Reduction& red, Stream*) override;
  // Moving bytes: MPI_Bcast / MPI_Allgather on an unsigned type of the element's width.
  void Broadcast(const void* send, void* recv, int64_t count, DataType dtype, int root,
                 Stream*) override;
  void AllGather(const void* send, void* recv, int64_t send_count, DataType dtype,
                 Stream*) override;
  // Point to point and groups (mpi_p2p.cc): nonblocking, completed together.
  void Recv(void* recv, int64_t count, DataType dtype, int peer, int tag, Stream*,
            int* source) override;
  void Send(const void* send, int64_t count, DataType dtype, int peer, int tag,
            Stream*) override;
  void SetTimeout(std::chrono::milliseconds timeout) override { timeout_.store(timeout); }
  // Posted (mpi_progress.cc): MPI_Isend / MPI_Irecv, completed by MpiProgress's thread.
  bool PostsP2P() const override { return true; }
  void PostSend(const void* send, int64_t count, DataType dtype, int peer, int tag,
                P2PDone done) override;
  void PostRecv(void* recv, int64_t count, DataType dtype, int peer, int tag, int* source,
                P2PDone done) override;
  void WakeOnAbort(const std::string& why) override;
  // The agreement check's exchange: one MPI_Allgather of a fixed kExchangeSlot bytes per rank
  // ([u64 length][data]); small, because over shared memory the bytes cost more than the
  // message (a 4 KiB slot added ~4 us to an 8 B all-reduce).
  size_t VariableGatherCapacity() const override {
    return GetSize() > 1 ? kExchangeSlot - sizeof(uint64_t) : 0;
  }
  const char* VariableAllGather(const void* send, size_t bytes, size_t* stride,
                                std::vector<size_t>* lengths, Stream*) override;
  // MPI_Alltoallv, after the ranks agree on every pair's count (MPI_Alltoall of the counts,
  // then one MPI_Allreduce of "all mine match", so that every rank raises or none does).
  // FLAGS_mpi_native_collectives=false turns it off, and the native gather and scatter (the
  // engine's grouped sends and receives then; for comparing them).
  bool HasNativeGatherScatter() override;
  void Gather(const void* send, void* recv, int64_t count, DataType dtype, int root,
              Stream*) override;
  void Scatter(const void* send, void* recv, int64_t count, DataType dtype, int root,
               Stream*) override;
  bool AllToAllV(const void* send, const std::vector<int64_t>& send_counts,
                 const std::vector<int64_t>& send_offsets, void* recv,
                 const std::vector<int64_t>& recv_counts,
                 const std::vector<int64_t>& recv_offsets, DataType dtype, Stream*) override;

 private:
  friend class MpiProgress;
  using DeferredP2P = PendingCpuP2P;

  // A completed receive: raises InvalidArgument when the sender sent another count than
  // `op` expects; writes *op.source.
  void CheckReceived(const DeferredP2P& op, const MPI_Status& status) const;
  // The error code of a failed MPI_Test*/MPI_Wait* call: the failing request's own under
  // MPI_ERR_IN_STATUS.
  static int FailedCode(int rc, const MPI_Status* statuses, int n);

  bool AllReducePrepared(const void* send, void* recv, int64_t count, DataType dtype,
                         ReduceOp op) override;
  // Posts one nonblocking send or receive (mpi_p2p.cc).
  MPI_Request Post(const DeferredP2P& op);
  // Posts it and hands it to MpiProgress, whose thread runs `done` (mpi_progress.cc).
  void PostP2P(const DeferredP2P& op, P2PDone done);
  // Completes `reqs` together: polls MPI_Testall so that the group's timeout and Abort end
  // the wait (a blocking MPI_Waitall would wait forever for a peer that never sends).
  void WaitAll(std::vector<MPI_Request>* reqs, std::vector<MPI_Status>* statuses,
               const char* what);
  // Posts every send and receive, then completes them together.
  void RunP2PBatch(const std::vector<DeferredP2P>& ops) override;
  void CheckPeer(int peer, bool any_allowed, const char* what) const;
  int CheckTag(int tag) const;

  // Every MPI call's result goes through here: a failure marks the communicator broken.
  void Call(int rc, const char* what);

  MPI_Comm comm_;
  static constexpr size_t kExchangeSlot = 256;
  std::vector<char> exchange_send_, exchange_all_;  // VariableAllGather's buffers
  std::atomic<std::chrono::milliseconds> timeout_;
  int tag_ub_ = 32767;  // MPI_TAG_UB of the communicator (the standard's minimum until read)
  // All-reduces of more than segment_above_bytes_ run as MPI_Allreduce calls of
  // segment_bytes_ each (FLAGS_mpi_allreduce_segment_bytes / _above; 0 bytes: never).
  // Why: past ~24 MiB OpenMPI's own all-reduce on one node falls from ~4.5 to ~2 GB/s
  // (its scratch no longer fits the caches and is fresh memory per call), while 1 MiB pieces
  // keep ~3.8-4 GB/s (docs/benchmarks.md, "MPI backend").
  size_t segment_bytes_ = size_t{1} << 20;
  size_t segment_above_bytes_ = size_t{16} << 20;
};

}  // namespace distributed
}  // namespace phi
