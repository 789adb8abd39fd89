// The Task of the stream engine: an op's end event, its error, and its own stream records.
// Internal to distributed/ (backends and the engine); users see ProcessGroup::Task.
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "phi/core/allocator.h"
#include "phi/core/distributed/progress_poller.h"
#include "phi/core/stream.h"

namespace paddle_like {
namespace distributed {

// What an op is, for error messages and the flight recorder.
struct OpDesc {
  CommType type = CommType::UNKNOWN;
  // The collective sequence number (see p2p_seq below).
  uint64_t seq = 0;
  int64_t numel_in = 0;
  int64_t numel_out = 0;
  phi::DataType dtype = phi::DataType::UNDEFINED;
  int peer = -1;  // root or P2P peer; -1 when none
  int reduce_op = -1;  // ReduceOp of reducing ops; -1 otherwise
  int tag = 0;         // P2P tag
  std::string name{};  // CommNameScope at issue ("" when none)
  // Set on the notice a rank issues when its own argument checks failed, so that the other
  // ranks raise at once instead of waiting for it (op_agreement.h).
  bool local_failure = false;
  int64_t failure_serial = 0;
  // The op's own exchange carries the agreement check (the fused small all-reduce).
  bool agreed_in_op = false;
  // Collectives and point-to-point ops are numbered apart (as c10d's collective and P2P
  // sequence numbers): every rank of a group issues the same collectives, but only the two
  // ends of a send/recv take part in it. A collective (or a coalesced group holding one)
  // takes the next `seq`; a point-to-point op (or a group of them only) keeps the last `seq`
  // issued and takes the next `p2p_seq` instead, which is 0 for collectives. Ranks compare
  // progress by `seq` alone.
  uint64_t p2p_seq = 0;
  bool is_p2p() const { return p2p_seq != 0; }
  // "AllReduce seq 4 [NumelIn ...]"; a point-to-point op "Send p2p seq 2 (after seq 4) [...]".
  std::string ToString() const;
};

enum class TaskStatus : int { kIssued = 0, kStarted, kCompleted, kFailed };
const char* TaskStatusName(TaskStatus s);

// Shared by the task, the job that runs the op on the stream and the group's observers (the
// flight recorder, the trace): what the op is, how far it got and when.
//
// The times come from the kernel's coarse monotonic clock (CLOCK_MONOTONIC_COARSE: updated
// once a tick, 4 ms on this kernel) unless the op is traced (FLAGS_comm_trace_dir): the
// watchdog and the flight recorder look for ops that hang or crawl, for which milliseconds
// do, while a precise read (the vDSO's kvm-clock here) costs ~27 ns against ~4, and an op
// takes two: 7 % of a 2-rank 8-byte all-reduce. The coarse clock counts from steady_clock's
// origin but trails it (3-8 ms measured here), so an op's times are compared with its own
// clock (Age), and its durations are good to a tick.
struct TaskState {
  explicit TaskState(OpDesc&& op);  // (moved along, not copied: it holds a string)

  const OpDesc desc;
  // Times from steady_clock itself (the trace's microseconds), not the coarse clock.
  const bool precise_times;
  std::atomic<TaskStatus> status{TaskStatus::kIssued};
  // Sender of a receive; written by the engine when the receive completes, read after
  // the task's end event (which orders the two).
  int source_rank = -1;
  const std::chrono::steady_clock::time_point issued_at;
  std::atomic<int64_t> started_us{0};   // since issued_at; 0 until the stream runs it
  std::atomic<int64_t> finished_us{0};  // since issued_at; 0 until finished
  // Ended as an error before the stream got to it (Task::Abort, the watchdog's "fail").
  std::atomic<bool> aborted{false};
  // Someone already heard of this op's failure or timeout (a Wait raised it, or the
  // watchdog reported it): the watchdog does not act on it (again).
  std::atomic<bool> timeout_reported{false};

  TaskState(const TaskState&) = delete;
  TaskState& operator=(const TaskState&) = delete;
  // Logs the failure note when nobody heard of the failure (see NoteFailure).
  ~TaskState();

  void MarkStarted();
  // Started as it was issued (a sync op run on the issuing thread): no clock read.
  void MarkStartedAtIssue();
  void SetError(std::exception_ptr e);
  // What to log about this op's failure if no caller ever hears of it: a failure that a
  // Wait raises reaches the program as an exception and is not logged as well, so a
  // program sees each error once.
  void NoteFailure(std::string text);
  std::exception_ptr error() const;
  void MarkFinished(TaskStatus s);
  // How long the op took, for reports: "in 12 us" (precise times), "in under 4 ms" or
  // "in about 8 ms" (coarse ones); "" until it finished.
  std::string TookText() const;
  // Time since the op was issued, on the op's clock.
  std::chrono::microseconds Age() const;

 private:
  // The op's clock: steady_clock's with precise_times, else the coarse one.
  std::chrono::steady_clock::time_point Now() const;
  // Age() in microseconds, at least 1 (0 means "not yet" in started_us and finished_us).
  int64_t UsSinceIssue() const;
  mutable std::mutex mu_;
  std::exception_ptr error_;
  std::atomic<bool> has_error_{false};  // error() asks after every op: no lock without one
  std::string failure_note_;
};

// What a task says about its group: one per group, shared by its tasks (issuing a task
// copies one pointer: every shared pointer a task holds is two atomic operations per op).
class TaskReporter {
 public:
  explicit TaskReporter(std::string group) : group_(std::move(group)) {}
  virtual ~TaskReporter() = default;
  // "ProcessGroupGloo(gid 0, rank 1/4)": the prefix of every message about the group.
  const std::string& group() const { return group_; }
  // The group's last ops (the flight recorder), one per line.
  virtual std::string RecentOps() const = 0;
  // Who has not issued `desc` and where each rank is (the watchdog's progress report,
  // bounded in time); empty when the group is not watched.
  virtual std::string ProgressFor(const OpDesc& desc) const = 0;

 private:
  const std::string group_;
};

class StreamTask : public ProcessGroup::Task {
 public:
  // `timeout`: the group's, used by Wait() without one and by Synchronize().
  // `reporter`: the group's name and what a timeout adds about it.
  StreamTask(int rank, OpDesc&& desc, bool sync_op, phi::Stream* calc_stream,
             bool blocking_wait, std::chrono::milliseconds timeout,
             std::shared_ptr<const TaskReporter> reporter);

  // Called once the op is on the stream: the end event (shared by the tasks of one
  // coalesced group) and the allocations to record as used by `stream`.
  void Issue(std::shared_ptr<phi::Event> end_event, phi::Stream* stream,
             const std::vector<std::shared_ptr<phi::Allocation>>& holders);
  // A posted point-to-point op: a host wait for it spins first (the CPU transports' spin
  // rule), serving the engine's progress itself, before it sleeps. Before Issue.
  void ServeWhileWaiting(std::shared_ptr<phi::distributed::ProgressPoller> poller) {
    poller_ = std::move(poller);
  }

  // A sync op that ran on the issuing thread and has ended: Issue with a completed event,
  // then what Wait does after its wait (raise the op's error).
  void IssueRanInline();

  bool IsCompleted() override;
  bool Wait(std::chrono::milliseconds timeout = ProcessGroup::kUnsetTimeout) override;
  void Synchronize() override;
  int source_rank() const override { return state_->source_rank; }
  void Abort(const std::string& why) override;

  const std::shared_ptr<TaskState>& state() const { return state_; }
  const OpDesc& desc() const { return state_->desc; }

 private:
  void CheckIssued() const;
  void RethrowIfFailed() const;
  std::string ProgressReport() const;
  void HostWait(std::chrono::milliseconds timeout);
  // Erases this task's records, and only this task's; only once the end event passed.
  void EraseOwnRecords();

  struct HolderRecord {
    std::weak_ptr<phi::Allocation> holder;
    phi::memory::StreamRecord record;
  };
  const std::string& group() const { return reporter_->group(); }

  std::shared_ptr<TaskState> state_;
  phi::Stream* calc_stream_;
  bool blocking_wait_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<const TaskReporter> reporter_;
  // The end event: end_event_'s, or the process's completed event for an op that ran inline
  // (not held: it lives as long as the process). Null until issued.
  phi::Event* end_ = nullptr;
  std::shared_ptr<phi::Event> end_event_;
  std::shared_ptr<phi::distributed::ProgressPoller> poller_;
  std::mutex records_mu_;
  std::vector<HolderRecord> records_;
  std::atomic<bool> has_records_{false};  // Issue recorded some (EraseOwnRecords skips the lock)
};

}  // namespace distributed
}  // namespace paddle_like
