// The stream-collective engine, written once for every backend.
//
// Each op: validate -> get the group's CommContext -> order the comm stream after the calc
// stream -> create the Task (rank, op, sequence number, sync_op, use_calc_stream) -> issue
// the engine's primitive on the stream -> record the task's end event and each tensor's
// allocation as used by that stream -> Wait when sync_op. Gather, Scatter, AllToAll and
// Barrier are built here from the primitives. A backend (ProcessGroupGloo,
// ProcessGroupNCCL) only says how to create its CommContext and what its places are.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "distributed/process_group.h"
#include "phi/core/distributed/comm_context.h"
#include "phi/core/inline_function.h"
#include "phi/core/distributed/store/store.h"

namespace paddle_like {
namespace distributed {

class CollectiveFingerprintChecker;
class OpObserver;
class FlightRecorder;
class StreamTask;
class TaskReporter;
struct OpDesc;
struct TaskState;
struct CoalescingState;
class WatchTarget;

// The tensors an op uses (their memory is recorded on its stream until the op ends), as Run
// takes them: a braced list of up to kInline is kept inline and a vector is referred to, so
// that issuing an op allocates no list.
class TensorRefs {
 public:
  static constexpr size_t kInline = 4;
  TensorRefs() = default;
  TensorRefs(std::initializer_list<const DenseTensor*> l) {  // NOLINT: Run's braced lists
    if (l.size() <= kInline) {
      std::copy(l.begin(), l.end(), inline_);
      size_ = l.size();
    } else {
      more_.assign(l.begin(), l.end());
      list_ = &more_;
    }
  }
  TensorRefs(const std::vector<const DenseTensor*>& v) : list_(&v) {}  // NOLINT: as above
  TensorRefs(const TensorRefs&) = delete;
  TensorRefs& operator=(const TensorRefs&) = delete;
  const DenseTensor* const* begin() const { return list_ ? list_->data() : inline_; }
  const DenseTensor* const* end() const { return begin() + size(); }
  size_t size() const { return list_ ? list_->size() : size_; }

 private:
  const DenseTensor* inline_[kInline] = {};
  size_t size_ = 0;
  const std::vector<const DenseTensor*>* list_ = nullptr;
  std::vector<const DenseTensor*> more_;
};

// An op's body as the engine runs it on a stream. Inline storage: op bodies capture up to
// about 120 bytes (the fused all-reduce's: its agreement record, buffers, reduction and the
// group's pointer), which std::function would allocate for on every op (inline_function.h).
using CommFn =
    phi::InlineFunction<void(phi::distributed::CommContext*, phi::Stream*, TaskState*), 160>;

class ProcessGroupWithStream : public ProcessGroup {
 public:
  // timeout <= 0: FLAGS_default_group_timeout_s. `group_desc`: the user's description of the
  // group (new_group's group_desc), in every message about it and in its flight-recorder dump.
  ProcessGroupWithStream(std::shared_ptr<phi::distributed::Store> store, int rank, int size,
                         int gid, std::chrono::milliseconds timeout,
                         std::string group_desc = {});
  ~ProcessGroupWithStream() override;

  phi::DeviceContext* GetDeviceContext(const phi::Place& place,
                                       bool use_calc_stream = false) const override;
  std::chrono::milliseconds timeout() const { return timeout_.load(); }
  const std::string& group_desc() const { return group_desc_; }
  void SetTimeout(std::chrono::milliseconds timeout) override;
  // The last collective sequence number this group issued (OpDesc::seq), and the last
  // point-to-point one (OpDesc::p2p_seq).
  uint64_t seq() const;
  uint64_t p2p_seq() const;
  // Aborts the group's communicators: every later op raises at once (see
  // CommContext::Abort). Pair it with Task::Abort for the ops in flight.
  void AbortComm(const std::string& why);
  // The flight recorder's view of this group's last ops, one per line.
  std::string DumpRecentOps() const;

  using ProcessGroup::AllGather;
  using ProcessGroup::AllReduce;
  using ProcessGroup::AllToAll;
  using ProcessGroup::Broadcast;
  using ProcessGroup::Gather;
  using ProcessGroup::Recv;
  using ProcessGroup::Reduce;
  using ProcessGroup::ReduceScatter;
  using ProcessGroup::Scatter;
  using ProcessGroup::Send;

  TaskPtr AllReduce(DenseTensor* out, const DenseTensor& in, const AllreduceOptions& opts,
                    bool sync_op, bool use_calc_stream) override;
  TaskPtr Broadcast(DenseTensor* out, const DenseTensor& in, const BroadcastOptions& opts,
                    bool sync_op, bool use_calc_stream) override;
  TaskPtr Reduce(DenseTensor* out, const DenseTensor& in, const ReduceOptions& opts,
                 bool sync_op, bool use_calc_stream) override;
  TaskPtr AllGather(DenseTensor* out, const DenseTensor& in, int64_t offset, int64_t numel,
                    bool sync_op, bool use_calc_stream) override;
  TaskPtr ReduceScatter(DenseTensor* out, const DenseTensor& in,
                        const ReduceScatterOptions& opts, bool sync_op,
                        bool use_calc_stream) override;
  TaskPtr Scatter(DenseTensor* out, const DenseTensor& in, const ScatterOptions& opts,
                  bool sync_op, bool use_calc_stream) override;
  TaskPtr Gather(DenseTensor* out, const DenseTensor& in, const GatherOptions& opts,
                 bool sync_op, bool use_calc_stream) override;
  TaskPtr Gather(std::vector<DenseTensor>* outs, const DenseTensor& in,
                 const GatherOptions& opts, bool sync_op, bool use_calc_stream) override;
  TaskPtr AllToAll(DenseTensor* out, const DenseTensor& in,
                   const std::vector<int64_t>& out_split_sizes,
                   const std::vector<int64_t>& in_split_sizes, bool sync_op,
                   bool use_calc_stream) override;
  TaskPtr AllToAll(std::vector<DenseTensor>* outs, const std::vector<DenseTensor>& ins,
                   bool sync_op, bool use_calc_stream) override;
  TaskPtr Send(const DenseTensor& tensor, int dst_rank, int64_t offset, int64_t numel,
               bool sync_op, bool use_calc_stream, const P2POptions& opts = {}) override;
  TaskPtr Recv(DenseTensor* tensor, int src_rank, int64_t offset, int64_t numel, bool sync_op,
               bool use_calc_stream, const P2POptions& opts = {}) override;
  TaskPtr Barrier(const BarrierOptions& opts = BarrierOptions()) override;

  void StartCoalescing() override;
  TaskPtr EndCoalescing() override;

 protected:
  // ---- what a backend provides.
  // The group's communicator on `place`, created on first use through store().
  virtual phi::distributed::CommContext* GetOrCreateCommContext(const phi::Place& place) = 0;
  // Raises InvalidArgument when the backend cannot run on `place`.
  virtual void CheckPlace(const phi::Place& place) const = 0;
  // Where a barrier's one-element all-reduce runs.
  virtual phi::Place BarrierPlace(const BarrierOptions& opts) const = 0;
  // Whether Task::Wait blocks the host on a device stream (FLAGS_comm_blocking_wait, plus
  // the backend's own flag). CPU calc streams always block: they are the host.
  virtual bool BlockingWait() const;
  // Whether the comm streams of device places take the device's greatest priority.
  virtual bool HighPriorityCommStream() const { return false; }
  // Gives the communicators that exist the new timeout (SetTimeout). A backend whose
  // communicators live outside comm_stream_contexts_' places overrides it.
  virtual void SetCommTimeout(std::chrono::milliseconds timeout);

  const std::shared_ptr<phi::distributed::Store>& store() const { return store_; }
  // Finishes every job queued on the comm streams and destroys them. A backend calls it
  // first in its destructor, while its communicator still exists.
  void ShutdownStreams();
  // "ProcessGroupGloo(gid 0, rank 1/4)": the prefix of every message about this group.
  const std::string& Describe() const;
  // The same string, shared with jobs that may outlive the group (it is the reporter's).
  std::shared_ptr<const std::string> DescribePtr() const;

 private:
  // Posts a send or receive (CommContext::PostSend/PostRecv) that ends with `done`.
  using PostFn = std::function<void(phi::distributed::CommContext*, TaskState*,
                                    phi::distributed::CommContext::P2PDone done)>;
  // The one path every op takes: picks and orders the stream, creates the task, runs the
  // agreement check (CPU collectives) and `fn` on the stream. fn may be null (a notice).
  // `post`, given for a send or receive: how to post it where the communicator posts
  // point-to-point ops (CPU places, not coalescing, not on the calc stream); it then runs
  // on the comm stream without blocking, and the op ends when the engine's callback says.
  TaskPtr Run(OpDesc&& desc, const phi::Place& place, const TensorRefs& tensors,
              CommFn fn, bool sync_op, bool use_calc_stream, PostFn post = nullptr);
  // Runs `body` (an op's checks, then Run). When the checks fail on this rank before the op
  // took a sequence number, the other ranks are told through the agreement check (they
  // raise at once, naming this rank and the reason) and the error is rethrown here.
  // A template (not a std::function) because every op passes through it: no allocation.
  template <typename Body>
  TaskPtr Guarded(CommType type, Body&& body) {
    const uint64_t before = OpsIssued();
    try {
      return body();
    } catch (...) {
      AfterFailedIssue(type, before, std::current_exception());
      throw;
    }
  }
  // Every op issued, of both numberings (Guarded's "did the op take a number" test).
  uint64_t OpsIssued() const;
  // Guarded's failure path: tells the other ranks when `error` is this rank's own checks
  // failing before the op took a sequence number (`before` is OpsIssued() then).
  void AfterFailedIssue(CommType type, uint64_t before, std::exception_ptr error);
  void NotifyLocalFailure(CommType type, const std::string& reason);
  // Whether an all-reduce runs FusedSmallAllReduce (op_agreement.h: one exchange with its
  // agreement record where the communicator's plan gathers it): agreeing in band, not
  // coalescing.
  bool UseFusedAllReduce(const phi::Place& place) const;
  phi::DeviceContext* CommStreamContext(const phi::Place& place) const;
  // The lane of point-to-point ops with one (peer, tag, direction) on a CPU place: where
  // their ends are marked and their tensors recorded. Ops of one lane end in order, as the
  // engines match them; ops of different lanes do not wait for each other, so a pending
  // receive never holds up another tag's. For a communicator that posts point-to-point ops
  // the lane is a CpuCompletionStream (no thread: the engine's callback completes its
  // ticket); for one that blocks (MPI) a worker stream runs them. Holds mu_.
  std::shared_ptr<phi::Stream> P2PLaneLocked(const OpDesc& desc, bool posted);
  // The events the stream of a new op waits for before it (see the .cc). Holds mu_; clears
  // the pending lane ops that a comm- or calc-stream op now waits for.
  std::vector<std::shared_ptr<phi::Event>> OrderLocked(phi::Stream* stream, phi::Stream* calc,
                                                       phi::Stream* comm_stream, bool on_lane);
  // Whether ops on `place` run the in-band agreement check (op_agreement.h): a CPU place, the
  // flag on, more than one rank.
  bool AgreesInBand(const phi::Place& place) const;
  // A task for `desc`, shown to the observers.
  std::shared_ptr<StreamTask> NewTask(OpDesc&& desc, bool sync_op, phi::Stream* calc);

  std::shared_ptr<phi::distributed::Store> store_;
  std::atomic<std::chrono::milliseconds> timeout_;
  const std::string group_desc_;
  mutable std::mutex mu_;
  uint64_t seq_ = 0;      // collectives issued (OpDesc::seq)
  uint64_t p2p_seq_ = 0;  // point-to-point ops issued (OpDesc::p2p_seq)
  // Lock-free copies for the issuing thread's own questions (OpsIssued, UseFusedAllReduce):
  // every op asks them, and another thread's issue in between is a race the caller has
  // anyway. Written under mu_ with what they copy.
  std::atomic<uint64_t> ops_issued_{0};  // seq_ + p2p_seq_
  std::atomic<bool> coalescing_now_{false};  // coalescing_ != nullptr
  // The CPU place's comm stream context, once created (comm_stream_contexts_ owns it).
  mutable std::atomic<phi::DeviceContext*> cpu_comm_context_{nullptr};
  // Each place's comm stream (as a DeviceContext), created on first use.
  mutable std::map<phi::Place, std::unique_ptr<phi::DeviceContext>> comm_stream_contexts_;
  std::map<std::tuple<int, int, int>, std::shared_ptr<phi::Stream>> p2p_lanes_;
  static constexpr size_t kMaxIdleP2PLanes = 32;  // more only while all of them are busy
  // Ends of worker-lane ops (blocking engines) that the next op on the comm or calc stream
  // must wait for: such an engine's communicator is never used by two threads at once.
  std::vector<std::shared_ptr<phi::Event>> pending_p2p_;
  int64_t local_failures_ = 0;  // serial of this rank's failure notices
  bool checker_raised_ = false;  // an observer's check raised (on every rank)
  std::string aborted_;          // AbortComm's reason; every later op raises it at issue
  std::unique_ptr<CoalescingState> coalescing_;  // non-null between Start/EndCoalescing
  std::shared_ptr<FlightRecorder> recorder_;
  // This group as the watchdog sees it (retired first thing in the destructor).
  std::shared_ptr<WatchTarget> watch_;
  // This group's name and what a task's timeout adds about it (shared by every task): built
  // at the first call of Reporter(), once the backend's name can be asked.
  const std::shared_ptr<const TaskReporter>& Reporter() const;
  mutable std::once_flag reporter_once_;
  mutable std::atomic<bool> reporter_built_{false};  // reporter_ is set
  mutable std::shared_ptr<const TaskReporter> reporter_;
  // FLAGS_collective_check=store: the store-based fingerprint check (names missing ranks).
  std::shared_ptr<CollectiveFingerprintChecker> checker_;
  // What sees every op (op_observer.h): the flight recorder, the comm timeline, the checker.
  // Fixed at construction.
  std::vector<std::shared_ptr<OpObserver>> observers_;
  bool checks_before_issue_ = false;  // some observer's BeforeIssue does something
};

}  // namespace distributed
}  // namespace paddle_like
