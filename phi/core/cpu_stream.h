// CPU streams: the host stream (work runs on the calling thread) and the worker stream
// (an in-order worker thread), with the events they record.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "phi/core/stream.h"

namespace phi {

// Progress counters shared by a CPU stream and the events recorded on it. Events hold a
// shared_ptr, so an event outlives its stream safely (a destroyed stream has drained).
struct CpuStreamProgress {
  std::mutex mu;
  std::condition_variable cv;  // progress waiters (events); notified only when waiters > 0
  uint64_t submitted = 0;  // sequence number of the last job submitted
  uint64_t completed = 0;  // sequence number of the last job finished (in order)
  int waiters = 0;         // threads blocked in CpuEvent::Synchronize
  std::string name;        // the stream's description, for messages
};

class CpuEvent : public Event {
 public:
  // One shared event that is complete: the end of work that ran before its issuer returned
  // (Stream::RunIfIdle), shared by everyone that needs such an end. It must never be
  // recorded.
  static const std::shared_ptr<Event>& Completed();

  void Record(Stream* stream) override;
  bool Query() const override;
  void Synchronize(std::chrono::milliseconds timeout) const override;

 private:
  std::shared_ptr<CpuStreamProgress> progress_;  // null: never recorded, or host stream
  uint64_t ticket_ = 0;
};

// True on a thread that is running a CpuWorkerStream job (the worker thread, or a caller
// running a job inline through RunIfIdle). Such a thread must not block on a stream
// event it may itself be holding up (the allocator's bounded pending list checks this).
bool InCpuStreamJob();

// The calc stream of the CPU: the calling thread. Its work is done when Launch returns,
// so its events are complete at once; WaitEvent blocks the host (it is the host).
class CpuHostStream : public Stream {
 public:
  Place place() const override { return CPUPlace(); }
  bool IsHostStream() const override { return true; }
  void Launch(std::function<void()> fn) override { fn(); }
  bool RunIfIdle(const std::function<void()>& fn) override {
    fn();
    return true;
  }
  void WaitEvent(const Event& event) override;
  bool Query() const override { return true; }
  void Synchronize(std::chrono::milliseconds) const override {}
  std::unique_ptr<Event> CreateEvent() const override;
};

// A CPU stream that counts its progress in CpuStreamProgress, where CpuEvents record.
class CpuProgressStream : public Stream {
 public:
  Place place() const override { return CPUPlace(); }
  bool Query() const override;
  void Synchronize(std::chrono::milliseconds timeout) const override;
  std::unique_ptr<Event> CreateEvent() const override;

 protected:
  explicit CpuProgressStream(const std::string& name);
  friend class CpuEvent;
  // The ticket of an event recorded now: the last job submitted. Holds progress_->mu.
  virtual uint64_t RecordTicketLocked() { return progress_->submitted; }
  std::shared_ptr<CpuStreamProgress> progress_;
};

// Work that completes on a thread that is not the stream's (the point-to-point transport's
// reactor): Begin() takes the next ticket for an op started elsewhere, Complete(ticket)
// marks it done, in any order, from any thread. An event recorded on the stream passes once
// every ticket up to its own is done. No thread of its own; Launch runs the job at once.
class CpuCompletionStream : public CpuProgressStream {
 public:
  explicit CpuCompletionStream(std::string name);
  uint64_t Begin();
  void Complete(uint64_t ticket);
  void Launch(std::function<void()> fn) override;
  // Blocks the caller (the stream has no thread to block).
  void WaitEvent(const Event& event) override;
  std::string DebugString() const override;

 private:
  std::string name_;
  std::set<uint64_t> done_ahead_;  // completed past the first pending one; progress_->mu
};

// An in-order worker thread. A job that throws is logged and the stream goes on: callers
// that care (the collective engine) catch inside their jobs and keep the error.
//
// RunIfIdle, the path of every small sync op, takes no lock when nobody else uses the stream
// meanwhile: it claims the stream with one compare-and-swap of `busy_` (from 0: no job
// launched and unfinished, no inline job) and releases it with another. The inline job has no
// sequence number unless someone needs one while it runs: an event recorded on the stream
// then (RecordTicketLocked) gives it the next one, which it completes at its end, and a job
// launched then waits behind it; either makes the release take the lock.
class CpuWorkerStream : public CpuProgressStream {
 public:
  explicit CpuWorkerStream(std::string name = "cpu-worker");
  ~CpuWorkerStream() override;  // drains submitted work, then joins

  void Launch(std::function<void()> fn) override;
  bool RunIfIdle(const std::function<void()>& fn) override;
  void WaitEvent(const Event& event) override;
  bool Query() const override;
  std::string DebugString() const override;

 protected:
  uint64_t RecordTicketLocked() override;

 private:
  struct Job {
    uint64_t seq;
    std::function<void()> fn;
  };
  void Loop();
  static void RunJob(const std::function<void()>& fn, const std::string& name);
  // Marks progress (completed = seq) and wakes event waiters, if any. Holds progress_->mu.
  void CompleteLocked(uint64_t seq);

  // busy_'s bits: an inline job runs; an event recorded meanwhile gave it inline_ticket_;
  // and above them, kJob for each launched job not yet finished.
  static constexpr uint64_t kInline = 1, kTicketed = 2, kJob = 4;

  std::string name_;
  // The worker sleeps here, apart from event waiters, so that finishing an inline job
  // (the sync fast path) does not wake an idle worker for nothing.
  std::condition_variable work_cv_;
  std::deque<Job> queue_;          // guarded by progress_->mu
  std::atomic<uint64_t> busy_{0};  // changed under progress_->mu, except by RunIfIdle's claim
                                   // and its lock-free release
  uint64_t inline_ticket_ = 0;     // progress_->mu; valid while kTicketed is set
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace phi
