#include "distributed/stream_task.h"

#include <glog/logging.h>

#include <time.h>

#include "distributed/comm_trace.h"
#include "phi/core/cpu_stream.h"
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

namespace {
using Clock = std::chrono::steady_clock;

// CLOCK_MONOTONIC_COARSE: the last tick's CLOCK_MONOTONIC (steady_clock's clock), read
// without the time stamp counter.
Clock::time_point CoarseNow() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

int64_t CoarseResolutionUs() {
  static const int64_t us = [] {
    timespec res;
    if (::clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0) return int64_t{4000};
    return std::max<int64_t>(1, (res.tv_sec * 1000000000 + res.tv_nsec) / 1000);
  }();
  return us;
}
}  // namespace

TaskState::TaskState(OpDesc&& op)
    : desc(std::move(op)),
      precise_times(CommTraceEnabled()),
      issued_at(Now()) {}  // (declared after precise_times: Now() may read it)

Clock::time_point TaskState::Now() const { return precise_times ? Clock::now() : CoarseNow(); }

std::chrono::microseconds TaskState::Age() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(Now() - issued_at);
}

int64_t TaskState::UsSinceIssue() const {
  const int64_t us = Age().count();
  return us > 0 ? us : 1;
}

void TaskState::MarkStarted() {
  started_us.store(UsSinceIssue(), std::memory_order_relaxed);
  status.store(TaskStatus::kStarted, std::memory_order_release);  // publishes started_us
}

void TaskState::MarkStartedAtIssue() {
  started_us.store(1, std::memory_order_relaxed);  // MarkStarted's, within a microsecond
  status.store(TaskStatus::kStarted, std::memory_order_release);
}

void TaskState::MarkFinished(TaskStatus s) {
  finished_us.store(UsSinceIssue(), std::memory_order_relaxed);
  // Release, not seq_cst (a fence on every op): readers only need what came before it.
  status.store(s, std::memory_order_release);
}

std::string TaskState::TookText() const {
  const int64_t us = finished_us.load(std::memory_order_relaxed);
  if (us <= 0) return "";
  if (precise_times) return "in " + std::to_string(us) + " us";
  const int64_t tick = CoarseResolutionUs();
  const auto ms = [](int64_t v) { return std::to_string((v + 500) / 1000) + " ms"; };
  return us < tick ? "in under " + ms(tick) : "in about " + ms(us);
}

StreamTask::StreamTask(int rank, OpDesc&& desc, bool sync_op, phi::Stream* calc_stream,
                       bool blocking_wait, std::chrono::milliseconds timeout,
                       std::shared_ptr<const TaskReporter> reporter)
    : Task(rank, desc.type, sync_op),
      state_(std::make_shared<TaskState>(std::move(desc))),
      calc_stream_(calc_stream),
      blocking_wait_(blocking_wait),
      timeout_(timeout),
      reporter_(std::move(reporter)) {}

void StreamTask::Issue(std::shared_ptr<phi::Event> end_event, phi::Stream* stream,
                       const std::vector<std::shared_ptr<phi::Allocation>>& holders) {
  end_event_ = std::move(end_event);  // set once; its readers take no lock (as they never did)
  end_ = end_event_.get();
  if (holders.empty()) return;  // a sync op run inline: nothing in use after it
  std::lock_guard<std::mutex> lk(records_mu_);
  for (const auto& h : holders) {
    auto r = phi::memory::RecordStream(h, stream);
    if (r.token != 0) records_.push_back(HolderRecord{h, r});
  }
  if (!records_.empty()) has_records_.store(true, std::memory_order_release);
}

void StreamTask::IssueRanInline() {
  end_ = phi::CpuEvent::Completed().get();
  RethrowIfFailed();
}

void StreamTask::CheckIssued() const {
  PADDLE_ENFORCE_NOT_NULL(
      end_, phi::errors::PreconditionNotMet(
                      "%s: %s was issued inside StartCoalescing(); wait for it after "
                      "EndCoalescing().",
                      group().c_str(), desc().ToString().c_str()));
}

std::string StreamTask::ProgressReport() const {
  return reporter_->ProgressFor(desc());
}

void StreamTask::RethrowIfFailed() const {
  if (auto e = state_->error()) {
    state_->timeout_reported.store(true);  // the caller hears of it: not the watchdog's case
    const std::string context = group() + ": " + desc().ToString() + " failed";
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
  if (end_ && end_->Query()) return;  // already finished
  try {
    PADDLE_THROW(phi::errors::Unavailable("%s: %s was aborted: %s", group().c_str(),
                                          desc().ToString().c_str(), why.c_str()));
  } catch (...) {
    state_->SetError(std::current_exception());
  }
  state_->aborted.store(true);
}

bool StreamTask::IsCompleted() {
  if (state_->aborted.load()) return true;
  if (!end_) return false;
  if (!end_->Query()) return false;
  EraseOwnRecords();
  return true;
}

void StreamTask::HostWait(std::chrono::milliseconds timeout) {
  thread_local phi::distributed::SpinPolicy spin;
  const bool spun =
      poller_ && phi::distributed::SpinServing(&spin, poller_.get(),
                                               [this] { return end_->Query(); });
  try {
    if (!spun) end_->Synchronize(timeout);
    if (poller_ && !spun) spin.Ended();
  } catch (const phi::TimeoutError& e) {
    std::string msg = group() + ": " + desc().ToString() + " did not complete within " +
                      std::to_string(timeout.count()) + " ms (Timeout(ms)=" +
                      std::to_string(timeout.count()) + ", state " +
                      TaskStatusName(state_->status.load()) +
                      "). A rank may have died, or not called this op, or called a different "
                      "one.";
    msg += ProgressReport();
    msg += "\nLast ops of this group (flight recorder):\n" + reporter_->RecentOps();
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
    calc_stream_->WaitEvent(*end_);
  }
  RethrowIfFailed();
  if (end_->Query()) EraseOwnRecords();
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
