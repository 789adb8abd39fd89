#include "distributed/stream_task.h"

#include <glog/logging.h>

#include "phi/core/errors.h"

namespace paddle_like {
namespace distributed {

std::string OpDesc::ToString() const {
  std::string s = CommTypeToString(type);
  if (is_p2p()) {
    s += " p2p seq " + std::to_string(p2p_seq) + " (after seq " + std::to_string(seq) + ")";
  } else {
    s += " seq " + std::to_string(seq);
  }
  s += " [NumelIn " + std::to_string(numel_in) + ", NumelOut " + std::to_string(numel_out) +
       ", " + phi::DataTypeToString(dtype);
  if (peer >= 0) s += ", peer/root " + std::to_string(peer);
  s += "]";
  if (!name.empty()) s += " '" + name + "'";
  return s;
}

const char* TaskStatusName(TaskStatus s) {
  switch (s) {
    case TaskStatus::kIssued: return "issued";
    case TaskStatus::kStarted: return "started";
    case TaskStatus::kCompleted: return "completed";
    case TaskStatus::kFailed: return "failed";
  }
  return "?";
}

void TaskState::SetError(std::exception_ptr e) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!error_) error_ = e;
    has_error_.store(true, std::memory_order_release);
  }
  MarkFinished(TaskStatus::kFailed);
}

TaskState::~TaskState() {
  if (!failure_note_.empty() && !timeout_reported.load()) {
    LOG(ERROR) << failure_note_ << " (no caller waited on this op)";
  }
}

void TaskState::NoteFailure(std::string text) {
  std::lock_guard<std::mutex> lk(mu_);
  if (failure_note_.empty()) failure_note_ = std::move(text);
}

std::exception_ptr TaskState::error() const {
  if (!has_error_.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

void TaskState::MarkStarted() {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                std::chrono::steady_clock::now() - issued_at)
                .count();
  started_us.store(us > 0 ? us : 1, std::memory_order_relaxed);
  status.store(TaskStatus::kStarted, std::memory_order_release);  // publishes started_us
}

void TaskState::MarkStartedAtIssue() {
  started_us.store(1, std::memory_order_relaxed);  // MarkStarted's, within a microsecond
  status.store(TaskStatus::kStarted, std::memory_order_release);
}

void TaskState::MarkFinished(TaskStatus s) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                std::chrono::steady_clock::now() - issued_at)
                .count();
  finished_us.store(us > 0 ? us : 1, std::memory_order_relaxed);
  // Release, not seq_cst (a fence on every op): readers only need what came before it.
  status.store(s, std::memory_order_release);
}

StreamTask::StreamTask(int rank, OpDesc desc, bool sync_op,
                       std::shared_ptr<const std::string> group_desc,
                       phi::Stream* calc_stream, bool blocking_wait,
                       std::chrono::milliseconds timeout,
                       std::shared_ptr<const TaskReporter> reporter)
    : Task(rank, desc.type, sync_op),
      desc_(std::move(desc)),
      group_desc_(std::move(group_desc)),
      calc_stream_(calc_stream),
      blocking_wait_(blocking_wait),
      timeout_(timeout),
      reporter_(std::move(reporter)) {}

void StreamTask::Issue(std::shared_ptr<phi::Event> end_event, phi::Stream* stream,
                       const std::vector<std::shared_ptr<phi::Allocation>>& holders) {
  end_event_ = std::move(end_event);  // set once; its readers take no lock (as they never did)
  if (holders.empty()) return;  // a sync op run inline: nothing in use after it
  std::lock_guard<std::mutex> lk(records_mu_);
  for (const auto& h : holders) {
    auto r = phi::memory::RecordStream(h, stream);
    if (r.token != 0) records_.push_back(HolderRecord{h, r});
  }
  if (!records_.empty()) has_records_.store(true, std::memory_order_release);
}

void StreamTask::CheckIssued() const {
  PADDLE_ENFORCE_NOT_NULL(
      end_event_, phi::errors::PreconditionNotMet(
                      "%s: %s was issued inside StartCoalescing(); wait for it after "
                      "EndCoalescing().",
                      group_desc_->c_str(), desc_.ToString().c_str()));
}

std::string StreamTask::ProgressReport() const {
  return reporter_ ? reporter_->ProgressFor(desc_) : std::string();
}

void StreamTask::RethrowIfFailed() const {
  if (auto e = state_->error()) {
    state_->timeout_reported.store(true);  // the caller hears of it: not the watchdog's case
    const std::string context = *group_desc_ + ": " + desc_.ToString() + " failed";
    if (!state_->aborted.load()) {  // an abort's reason (the watchdog's report) says enough
      try {
        std::rethrow_exception(e);
      } catch (const phi::TimeoutError& timeout) {
        // The op timed out by itself (the backend's timeout): say who did not issue it.
        // The same form as RethrowWithContext.
        throw phi::TimeoutError(context + ": " + timeout.what() + ProgressReport());
      } catch (...) {  // not a timeout: raised as it is below
      }
    }
    phi::RethrowWithContext(e, context);
  }
}

void StreamTask::Abort(const std::string& why) {
  if (end_event_ && end_event_->Query()) return;  // already finished
  try {
    PADDLE_THROW(phi::errors::Unavailable("%s: %s was aborted: %s", group_desc_->c_str(),
                                          desc_.ToString().c_str(), why.c_str()));
  } catch (...) {
    state_->SetError(std::current_exception());
  }
  state_->aborted.store(true);
}

bool StreamTask::IsCompleted() {
  if (state_->aborted.load()) return true;
  if (!end_event_) return false;
  if (!end_event_->Query()) return false;
  EraseOwnRecords();
  return true;
}

void StreamTask::HostWait(std::chrono::milliseconds timeout) {
  thread_local phi::distributed::SpinPolicy spin;
  const bool spun =
      poller_ && phi::distributed::SpinServing(&spin, poller_.get(),
                                               [this] { return end_event_->Query(); });
  try {
    if (!spun) end_event_->Synchronize(timeout);
    if (poller_ && !spun) spin.Ended();
  } catch (const phi::TimeoutError& e) {
    std::string msg = *group_desc_ + ": " + desc_.ToString() + " did not complete within " +
                      std::to_string(timeout.count()) + " ms (Timeout(ms)=" +
                      std::to_string(timeout.count()) + ", state " +
                      TaskStatusName(state_->status.load()) +
                      "). A rank may have died, or not called this op, or called a different "
                      "one.";
    msg += ProgressReport();
    if (reporter_) {
      msg += "\nLast ops of this group (flight recorder):\n" + reporter_->RecentOps();
    }
    state_->timeout_reported.store(true);
    VLOG(1) << msg;  // raised: the caller reports it
    PADDLE_THROW(phi::errors::Timeout(msg));
  }
}

bool StreamTask::Wait(std::chrono::milliseconds timeout) {
  CheckIssued();
  if (state_->aborted.load()) RethrowIfFailed();
  if (timeout <= std::chrono::milliseconds::zero()) timeout = timeout_;
  if (blocking_wait_ || calc_stream_->IsHostStream()) {
    HostWait(timeout);
  } else {
    calc_stream_->WaitEvent(*end_event_);
  }
  RethrowIfFailed();
  if (end_event_->Query()) EraseOwnRecords();
  return true;
}

void StreamTask::Synchronize() {
  CheckIssued();
  HostWait(timeout_);
  RethrowIfFailed();
  EraseOwnRecords();
}

void StreamTask::EraseOwnRecords() {
  if (!has_records_.load(std::memory_order_acquire)) return;  // the common sync op: none
  std::vector<HolderRecord> mine;
  {
    std::lock_guard<std::mutex> lk(records_mu_);
    mine.swap(records_);
  }
  for (auto& r : mine) {
    if (auto h = r.holder.lock()) phi::memory::EraseStream(h, r.record);
  }
}

}  // namespace distributed
}  // namespace paddle_like
