// CommContext: one engine's communicator for one group, offering the engine's primitive
// calls on a given stream. Everything a process group can do beyond these primitives
// (gather, scatter, all-to-all, barrier) is written once, in the collective engine
// (distributed/process_group_with_stream.cc), out of them.
//
// Contract for every primitive:
//  - Buffers are contiguous and already validated by the engine (counts in elements).
//  - The call runs "on `stream`": the engine invokes it from inside Stream::Launch, so a
//    CPU backend runs it to completion on the stream's worker thread, and a CUDA backend
//    enqueues it on the stream's cudaStream_t and returns.
//  - Failures raise phi errors (External for engine failures, Timeout when the engine
//    timed out, Unavailable when a peer is gone). Nothing exits the process.
//  - Between GroupStart and GroupEnd the calls form one engine group (ncclGroupStart/End;
//    the CPU engine posts sends and receives and waits for them all at GroupEnd, and may
//    fuse all-reduces). Groups nest; only the outermost GroupEnd issues.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "phi/core/data_type.h"
#include "phi/core/distributed/allreduce_plan.h"
#include "phi/core/distributed/progress_poller.h"
#include "phi/core/distributed/reduce_op.h"

namespace phi {
class Stream;
namespace distributed {

class CommContext {
 public:
  CommContext(int rank, int size) : rank_(rank), size_(size) {}
  virtual ~CommContext() = default;
  CommContext(const CommContext&) = delete;
  CommContext& operator=(const CommContext&) = delete;

  int GetRank() const { return rank_; }
  int GetSize() const { return size_; }
  virtual std::string BackendName() const = 0;

  virtual void AllReduce(const void* send, void* recv, int64_t count, DataType dtype,
                         const Reduction& reduction, Stream* stream) = 0;
  // On the root, `send` is the source (copied to `recv` when they differ); elsewhere only
  // `recv` is used.
  virtual void Broadcast(const void* send, void* recv, int64_t count, DataType dtype,
                         int root, Stream* stream) = 0;
  // `recv` is written on the root only.
  virtual void Reduce(const void* send, void* recv, int64_t count, DataType dtype,
                      const Reduction& reduction, int root, Stream* stream) = 0;
  // `recv` holds size * send_count elements, rank r's block at r * send_count.
  virtual void AllGather(const void* send, void* recv, int64_t send_count, DataType dtype,
                         Stream* stream) = 0;
  // `send` holds size * recv_count elements; rank r receives the reduction of block r.
  virtual void ReduceScatter(const void* send, void* recv, int64_t recv_count, DataType dtype,
                             const Reduction& reduction, Stream* stream) = 0;
  // Tags separate concurrent streams of messages between one pair where the engine
  // supports it (Gloo slots); NCCL matches in call order and ignores the tag.
  virtual void Send(const void* send, int64_t count, DataType dtype, int peer, int tag,
                    Stream* stream) = 0;
  // peer == kAnyPeer receives from whichever rank sends first, where SupportsAnySource();
  // the sender's rank is written to *source when source != nullptr (once the receive has
  // completed, which for an asynchronous engine is when its stream passes the call).
  virtual void Recv(void* recv, int64_t count, DataType dtype, int peer, int tag,
                    Stream* stream, int* source = nullptr) = 0;
  virtual bool SupportsAnySource() const { return false; }
  // Point-to-point posted without blocking: `done` runs once when the op completed (null)
  // or failed, on the engine's own thread (it must not block), or on the caller's when the
  // op fails before it is posted. The buffer is the op's until then. Where PostsP2P(), the
  // process group runs ungrouped sends and receives this way: no thread waits for an op in
  // flight. The peer and tag rules are Send's and Recv's.
  using P2PDone = std::function<void(std::exception_ptr)>;
  virtual bool PostsP2P() const { return false; }
  // Where PostsP2P(): what a thread waiting for a posted op polls (null: it just waits).
  virtual std::shared_ptr<ProgressPoller> P2PPoller() { return nullptr; }
  virtual void PostSend(const void* send, int64_t count, DataType dtype, int peer, int tag,
                        P2PDone done);
  virtual void PostRecv(void* recv, int64_t count, DataType dtype, int peer, int tag,
                        int* source, P2PDone done);
  // An all-gather whose block sizes may differ across ranks, up to VariableGatherCapacity()
  // bytes each (the same on every rank): the agreement check exchanges its record, and a
  // small all-reduce its payload with it, before the sizes are known to agree. Returns where
  // rank r's block starts (result + r * *stride, (*lengths)[r] bytes), valid until the next
  // call on this communicator. Capacity 0 (the default): not offered, and the check uses
  // fixed-size all-gathers instead.
  virtual size_t VariableGatherCapacity() const { return 0; }
  // The algorithm an all-reduce of `bytes` (of the reduced input) runs with
  // (allreduce_plan.h). kGathered: one exchange of every rank's input through
  // VariableAllGather, which the engine uses to carry the agreement record along
  // (op_agreement.h). Collective on first use (Gloo decides its transport then).
  virtual AllReduceAlgorithm PlanAllReduce(size_t bytes) {
    return bytes <= VariableGatherCapacity() ? AllReduceAlgorithm::kGathered
                                             : AllReduceAlgorithm::kNative;
  }
  // A native all-to-all with per-peer counts (MPI_Alltoallv), for engines where it beats the
  // engine's grouped sends and receives. Block r of `send` (send_counts[r] elements at element
  // offset send_offsets[r]) goes to rank r; block r of `recv` comes from rank r; this rank's own
  // block included. The engine checks pair sizes (a mismatch is an InvalidArgument on every
  // rank, nothing moved). Returns false without doing anything when not offered: the engine
  // then exchanges the blocks itself.
  // Native gather and scatter of equal blocks (MPI_Gather / MPI_Scatter), where the engine
  // has them: the same answer on every rank, so every rank takes the same path. `recv` (gather)
  // and `send` (scatter) are the root's `size` contiguous blocks; elsewhere unused.
  virtual bool HasNativeGatherScatter() { return false; }
  virtual void Gather(const void* send, void* recv, int64_t count, DataType dtype, int root,
                      Stream* stream);
  virtual void Scatter(const void* send, void* recv, int64_t count, DataType dtype, int root,
                       Stream* stream);
  virtual bool AllToAllV(const void* send, const std::vector<int64_t>& send_counts,
                         const std::vector<int64_t>& send_offsets, void* recv,
                         const std::vector<int64_t>& recv_counts,
                         const std::vector<int64_t>& recv_offsets, DataType dtype,
                         Stream* stream) {
    return false;
  }
  virtual const char* VariableAllGather(const void* send, size_t bytes, size_t* stride,
                                        std::vector<size_t>* lengths, Stream* stream);
  // Connects to every peer now (FLAGS_eager_communication_connection), within the
  // communicator's timeout, naming the ranks that never come. Engines that connect when
  // created do nothing here.
  virtual void ConnectAll() {}
  // Makes the communicator unusable now: every later call raises at once, and an engine that
  // can also stops the calls in flight (NCCL's ncclCommAbort; Gloo closes its connections,
  // which ends the peers' calls at once, while its own stuck call ends at its timeout on its
  // own thread). Idempotent.
  virtual void Abort(const std::string& why) {}
  // The timeout of the calls that start from now on (set_timeout on a group whose
  // communicator exists); a call already waiting keeps its deadline. Engines whose calls
  // have no timeout of their own (NCCL: the engine's tasks and watchdog time them) ignore it.
  virtual void SetTimeout(std::chrono::milliseconds timeout) {}

  virtual void GroupStart() = 0;
  virtual void GroupEnd() = 0;
  // Closes an open group after a failure without issuing it (the engine's guard calls it
  // so that an exception between GroupStart and GroupEnd never leaves a group open).
  virtual void GroupAbort() { GroupEnd(); }

  static constexpr int kAnyPeer = -1;

 private:
  int rank_;
  int size_;
};

// Opens an engine group for the scope; closes it on every path. End() issues the group;
// leaving the scope without End() (an exception) aborts it.
class CommGroupGuard {
 public:
  explicit CommGroupGuard(CommContext* comm) : comm_(comm) { comm_->GroupStart(); }
  ~CommGroupGuard();
  void End() {
    ended_ = true;
    comm_->GroupEnd();
  }
  CommGroupGuard(const CommGroupGuard&) = delete;
  CommGroupGuard& operator=(const CommGroupGuard&) = delete;

 private:
  CommContext* comm_;
  bool ended_ = false;
};

}  // namespace distributed
}  // namespace phi
