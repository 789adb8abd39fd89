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

// Shared by the task and the job that runs the op on the stream.
struct TaskState {
  std::atomic<TaskStatus> status{TaskStatus::kIssued};
  // Sender of a receive; written by the engine when the receive completes, read after
  // the task's end event (which orders the two).
  int source_rank = -1;
  std::chrono::steady_clock::time_point issued_at = std::chrono::steady_clock::now();
  std::atomic<int64_t> started_us{0};   // since issued_at; 0 until the stream runs it
  std::atomic<int64_t> finished_us{0};  // since issued_at; 0 until finished
  // Ended as an error before the stream got to it (Task::Abort, the watchdog's "fail").
  std::atomic<bool> aborted{false};
  // Someone already heard of this op's failure or timeout (a Wait raised it, or the
  // watchdog reported it): the watchdog does not act on it (again).
  std::atomic<bool> timeout_reported{false};

  TaskState() = default;
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

 private:
  mutable std::mutex mu_;
  std::exception_ptr error_;
  std::atomic<bool> has_error_{false};  // error() asks after every op: no lock without one
  std::string failure_note_;
};

// What a task's timeout adds about its group: one per group, shared by its tasks (so that
// issuing a task copies one pointer, not two closures).
class TaskReporter {
 public:
  virtual ~TaskReporter() = default;
  // The group's last ops (the flight recorder), one per line.
  virtual std::string RecentOps() const = 0;
  // Who has not issued `desc` and where each rank is (the watchdog's progress report,
  // bounded in time); empty when the group is not watched.
  virtual std::string ProgressFor(const OpDesc& desc) const = 0;
};

class StreamTask : public ProcessGroup::Task {
 public:
  // `timeout`: the group's, used by Wait() without one and by Synchronize().
  // `reporter` (may be null): what a timeout adds about the group.
  StreamTask(int rank, OpDesc desc, bool sync_op, std::shared_ptr<const std::string> group_desc,
             phi::Stream* calc_stream, bool blocking_wait, std::chrono::milliseconds timeout,
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

  bool IsCompleted() override;
  bool Wait(std::chrono::milliseconds timeout = ProcessGroup::kUnsetTimeout) override;
  void Synchronize() override;
  int source_rank() const override { return state_->source_rank; }
  void Abort(const std::string& why) override;

  const std::shared_ptr<TaskState>& state() const { return state_; }
  const OpDesc& desc() const { return desc_; }

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
  OpDesc desc_;
  std::shared_ptr<const std::string> group_desc_;
  phi::Stream* calc_stream_;
  bool blocking_wait_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<const TaskReporter> reporter_;
  std::shared_ptr<TaskState> state_ = std::make_shared<TaskState>();
  std::shared_ptr<phi::Event> end_event_;
  std::shared_ptr<phi::distributed::ProgressPoller> poller_;
  std::mutex records_mu_;
  std::vector<HolderRecord> records_;
  std::atomic<bool> has_records_{false};  // Issue recorded some (EraseOwnRecords skips the lock)
};

}  // namespace distributed
}  // namespace paddle_like
