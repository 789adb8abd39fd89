#include "phi/core/cpu_stream.h"

#include <glog/logging.h>

#include "phi/core/errors.h"

namespace phi {

namespace {
thread_local int tls_stream_job_depth = 0;
struct StreamJobScope {
  StreamJobScope() { ++tls_stream_job_depth; }
  ~StreamJobScope() { --tls_stream_job_depth; }
};
}  // namespace

bool InCpuStreamJob() { return tls_stream_job_depth > 0; }

// ------------------------------------------------------------------ CpuEvent
const std::shared_ptr<Event>& CpuEvent::Completed() {
  // Never destroyed: a task that ran inline points at it without holding it, and may be
  // waited on while statics are being torn down.
  static const auto* done = new std::shared_ptr<Event>(std::make_shared<CpuEvent>());
  return *done;
}

void CpuEvent::Record(Stream* stream) {
  if (stream->IsHostStream()) {  // host work is done when recorded
    progress_.reset();
    return;
  }
  auto* worker = dynamic_cast<CpuProgressStream*>(stream);
  PADDLE_ENFORCE_NOT_NULL(worker, errors::InvalidArgument(
                                      "CpuEvent can only be recorded on a CPU stream, got %s",
                                      stream->DebugString().c_str()));
  progress_ = worker->progress_;
  std::lock_guard<std::mutex> lk(progress_->mu);
  ticket_ = worker->RecordTicketLocked();
}

bool CpuEvent::Query() const {
  if (!progress_) return true;
  std::lock_guard<std::mutex> lk(progress_->mu);
  return progress_->completed >= ticket_;
}

void CpuEvent::Synchronize(std::chrono::milliseconds timeout) const {
  if (!progress_) return;
  std::unique_lock<std::mutex> lk(progress_->mu);
  ++progress_->waiters;
  bool done = progress_->cv.wait_for(lk, timeout,
                                     [&] { return progress_->completed >= ticket_; });
  --progress_->waiters;
  if (!done) {
    PADDLE_THROW(errors::Timeout(
        "Event on %s did not complete within %lld ms (waiting for job %llu, completed %llu).",
        progress_->name.c_str(), static_cast<long long>(timeout.count()),
        static_cast<unsigned long long>(ticket_),
        static_cast<unsigned long long>(progress_->completed)));
  }
}

// ------------------------------------------------------------------ CpuHostStream
void CpuHostStream::WaitEvent(const Event& event) {
  // The host stream is the host: waiting means blocking. No deadline here on purpose;
  // callers with a deadline (Task::Wait) call Event::Synchronize themselves.
  event.Synchronize(std::chrono::hours(24 * 365));
}

std::unique_ptr<Event> CpuHostStream::CreateEvent() const { return std::make_unique<CpuEvent>(); }

// ------------------------------------------------------------------ CpuProgressStream
CpuProgressStream::CpuProgressStream(const std::string& name)
    : progress_(std::make_shared<CpuStreamProgress>()) {
  progress_->name = name;
}

bool CpuProgressStream::Query() const {
  std::lock_guard<std::mutex> lk(progress_->mu);
  return progress_->completed == progress_->submitted;
}

void CpuProgressStream::Synchronize(std::chrono::milliseconds timeout) const {
  CpuEvent e;
  e.Record(const_cast<CpuProgressStream*>(this));
  e.Synchronize(timeout);
}

std::unique_ptr<Event> CpuProgressStream::CreateEvent() const {
  return std::make_unique<CpuEvent>();
}

// ------------------------------------------------------------------ CpuCompletionStream
CpuCompletionStream::CpuCompletionStream(std::string name)
    : CpuProgressStream("CpuCompletionStream(" + name + ")"), name_(std::move(name)) {}

uint64_t CpuCompletionStream::Begin() {
  std::lock_guard<std::mutex> lk(progress_->mu);
  return ++progress_->submitted;
}

void CpuCompletionStream::Complete(uint64_t ticket) {
  std::lock_guard<std::mutex> lk(progress_->mu);
  if (ticket != progress_->completed + 1) {
    done_ahead_.insert(ticket);
    return;
  }
  progress_->completed = ticket;
  while (!done_ahead_.empty() && *done_ahead_.begin() == progress_->completed + 1) {
    progress_->completed = *done_ahead_.begin();
    done_ahead_.erase(done_ahead_.begin());
  }
  if (progress_->waiters > 0) progress_->cv.notify_all();
}

void CpuCompletionStream::Launch(std::function<void()> fn) {
  const uint64_t ticket = Begin();
  try {
    fn();
  } catch (const std::exception& e) {
    LOG(ERROR) << name_ << ": job raised and nobody caught it: " << e.what();
  }
  Complete(ticket);
}

void CpuCompletionStream::WaitEvent(const Event& event) {
  event.Synchronize(std::chrono::hours(24 * 365));
}

std::string CpuCompletionStream::DebugString() const {
  return "CpuCompletionStream(" + name_ + ", id " + std::to_string(id()) + ")";
}

// ------------------------------------------------------------------ CpuWorkerStream
CpuWorkerStream::CpuWorkerStream(std::string name)
    : CpuProgressStream(""), name_(std::move(name)) {
  progress_->name = DebugString();
  worker_ = std::thread([this] { Loop(); });
}

CpuWorkerStream::~CpuWorkerStream() {
  {
    std::lock_guard<std::mutex> lk(progress_->mu);
    stop_ = true;
  }
  work_cv_.notify_all();
  worker_.join();
}

void CpuWorkerStream::RunJob(const std::function<void()>& fn, const std::string& name) {
  StreamJobScope scope;
  try {
    fn();
  } catch (const std::exception& e) {
    LOG(ERROR) << name << ": job raised and nobody caught it: " << e.what();
  }
}

void CpuWorkerStream::Launch(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lk(progress_->mu);
    queue_.push_back(Job{++progress_->submitted, std::move(fn)});
    busy_.fetch_add(kJob, std::memory_order_acq_rel);
  }
  work_cv_.notify_one();
}

bool CpuWorkerStream::RunIfIdle(const std::function<void()>& fn) {
  // Claim the stream: jobs launched meanwhile queue behind this one, and the worker does not
  // start them until it is done (in-order semantics hold).
  uint64_t idle = 0;
  if (!busy_.compare_exchange_strong(idle, kInline, std::memory_order_acq_rel)) return false;
  RunJob(fn, name_);
  uint64_t alone = kInline;
  if (busy_.compare_exchange_strong(alone, 0, std::memory_order_acq_rel)) return true;
  // Someone used the stream while the job ran. Under the lock no event can ticket a next
  // inline job before this one's ticket is completed.
  std::lock_guard<std::mutex> lk(progress_->mu);
  const uint64_t before = busy_.fetch_and(~(kInline | kTicketed), std::memory_order_acq_rel);
  if (before & kTicketed) CompleteLocked(inline_ticket_);
  if (before >= kJob) work_cv_.notify_one();  // jobs queued behind the inline one
  return true;
}

uint64_t CpuWorkerStream::RecordTicketLocked() {
  // An inline job with no job queued behind it is the stream's last work: it takes the next
  // ticket, which its end completes. Behind queued jobs, the last of them stands for it (the
  // worker starts them after it).
  uint64_t running = kInline;
  if (busy_.compare_exchange_strong(running, kInline | kTicketed, std::memory_order_acq_rel)) {
    inline_ticket_ = ++progress_->submitted;
  }
  return progress_->submitted;
}

bool CpuWorkerStream::Query() const { return busy_.load(std::memory_order_acquire) == 0; }

void CpuWorkerStream::CompleteLocked(uint64_t seq) {
  progress_->completed = seq;
  if (progress_->waiters > 0) progress_->cv.notify_all();
}

void CpuWorkerStream::Loop() {
  StreamJobScope scope;  // the worker thread only runs jobs (and drops their captures)
  std::unique_lock<std::mutex> lk(progress_->mu);
  while (true) {
    work_cv_.wait(lk, [&] {
      return (!queue_.empty() && (busy_.load(std::memory_order_acquire) & kInline) == 0) ||
             (stop_ && queue_.empty());
    });
    if (queue_.empty()) return;  // stop_ and drained
    Job job = std::move(queue_.front());
    queue_.pop_front();
    lk.unlock();
    RunJob(job.fn, name_);
    job.fn = nullptr;  // release captures before reporting completion
    lk.lock();
    CompleteLocked(job.seq);
    busy_.fetch_sub(kJob, std::memory_order_acq_rel);
  }
}

void CpuWorkerStream::WaitEvent(const Event& event) {
  // The worker blocks on the event; the host returns at once. Events are immutable once
  // recorded from the waiter's point of view, so copy what we need.
  auto* cpu_event = dynamic_cast<const CpuEvent*>(&event);
  PADDLE_ENFORCE_NOT_NULL(cpu_event, errors::InvalidArgument(
                                         "%s can only wait on a CpuEvent", name_.c_str()));
  if (cpu_event->Query()) return;  // already passed: nothing to order
  auto copy = std::make_shared<CpuEvent>(*cpu_event);
  Launch([copy] { copy->Synchronize(std::chrono::hours(24 * 365)); });
}

std::string CpuWorkerStream::DebugString() const {
  return "CpuWorkerStream(" + name_ + ", id " + std::to_string(id()) + ")";
}

}  // namespace phi
