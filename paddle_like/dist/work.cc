// Work and Future of paddle_like::dist: an issued op's handle, and its completion for
// callbacks (no thread per future: distributed.h, "Future").
#include <pthread.h>

#include <algorithm>
#include <thread>

#include "paddle_like/dist/dist_internal.h"
#include "paddle_like/dist/distributed.h"

namespace paddle_like {
namespace dist {

Work::Work(distributed::ProcessGroup::TaskPtr task, std::shared_ptr<Group> group,
           std::vector<DenseTensor> results, std::function<void()> on_done)
    : task_(std::move(task)),
      timeout_(group->timeout()),
      results_(std::move(results)),
      group_(std::move(group)),
      on_done_(std::move(on_done)) {}

void Work::abort() {
  const std::string why = "Work::abort() by the program";
  // The task first: aborting the communicators wakes the op blocked on them at once, and
  // its network error must not become the op's outcome before the abort does.
  task_->Abort(why);
  group_->abort_backends(why);
}

bool Work::wait(std::chrono::milliseconds timeout) {
  if (timeout >= std::chrono::milliseconds::zero()) {
    // A bound of the caller's: poll, so that running out leaves the op as it is (the
    // task's own Wait treats its timeout as the op's failure).
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto pause = std::chrono::microseconds(50);
    while (!task_->IsCompleted()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }
  try {
    task_->Wait(timeout_);  // complete (or the group's timeout): raises the op's error
  } catch (...) {
    error_ = std::current_exception();
    throw;
  }
  if (on_done_) {
    std::lock_guard<std::mutex> lk(done_mu_);
    if (!done_ran_) {
      on_done_();
      done_ran_ = true;
    }
  }
  return true;
}

bool Work::is_completed() { return task_->IsCompleted(); }

bool Work::is_success() {
  if (!is_completed()) return false;
  if (error_) return false;
  try {
    task_->Wait(timeout_);  // complete: returns at once, or rethrows the op's error
    return true;
  } catch (...) {
    error_ = std::current_exception();
    return false;
  }
}

std::exception_ptr Work::exception() {
  is_success();
  return error_;
}

int Work::source_rank() const { return task_->source_rank(); }

std::shared_ptr<Future> Work::get_future() {
  auto state = std::make_shared<FutureState>();
  state->work = shared_from_this();
  return std::make_shared<Future>(std::move(state));
}

Future::Future(std::shared_ptr<FutureState> state) : state_(std::move(state)) {}

std::shared_ptr<Future> Future::then(std::function<void(Work&)> callback) {
  auto next = std::make_shared<FutureState>();
  next->work = state_->work;
  next->before = state_;
  next->callback = std::move(callback);
  FutureCompletions::Instance().Watch(next);
  return std::make_shared<Future>(std::move(next));
}

void Future::wait() {
  state_->Complete();
  if (state_->error) std::rethrow_exception(state_->error);
}

bool Future::done() const { return state_->phase.load() == FutureState::kDone; }

// ------------------------------------------------------------------ future completion
bool FutureState::Ready() const {
  if (before && before->phase.load() != kDone && !before->Ready()) return false;
  return work->is_completed();
}

void FutureState::Complete() {
  if (before) before->Complete();  // its callback first, in this thread if nobody ran it
  int expected = kPending;
  if (phase.compare_exchange_strong(expected, kRunning)) {
    try {
      if (callback) {
        callback(*work);
      } else {
        work->wait();
      }
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lk(mu);
      phase.store(kDone);
    }
    cv.notify_all();
    return;
  }
  std::unique_lock<std::mutex> lk(mu);
  cv.wait(lk, [this] { return phase.load() == kDone; });
}

FutureCompletions& FutureCompletions::Instance() {
  // Never destroyed: its thread outlives static users. A forked child has no thread: the
  // fork handlers keep the lock consistent and let the child start its own.
  static auto* completions = [] {
    auto* c = new FutureCompletions();
    pthread_atfork([] { Instance().mu_.lock(); }, [] { Instance().mu_.unlock(); },
                   [] {
                     FutureCompletions& self = Instance();
                     self.started_ = false;
                     self.pending_.clear();  // the parent's ops: not this process's
                     self.mu_.unlock();
                   });
    return c;
  }();
  return *completions;
}

void FutureCompletions::Watch(std::shared_ptr<FutureState> state) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    pending_.push_back(std::move(state));
    if (!started_) {
      started_ = true;
      std::thread([this] { Loop(); }).detach();
    }
  }
  cv_.notify_one();
}

// Polls the pending callbacks' ops, sleeping longer while nothing ends (50 us up to 2 ms):
// a waiter runs its callback itself at once, so this only bounds how late a callback nobody
// waits for runs.
void FutureCompletions::Loop() {
  auto pause = std::chrono::microseconds(50);
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return !pending_.empty(); });
    std::vector<std::shared_ptr<FutureState>> ready;
    for (auto it = pending_.begin(); it != pending_.end();) {
      const int phase = (*it)->phase.load();
      if (phase == FutureState::kDone || phase == FutureState::kRunning) {
        it = pending_.erase(it);  // a waiter took it
      } else if ((*it)->Ready()) {
        ready.push_back(std::move(*it));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    lk.unlock();
    for (auto& state : ready) state->Complete();
    if (ready.empty()) {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(2000));
    } else {
      pause = std::chrono::microseconds(50);
    }
    lk.lock();
  }
}

}  // namespace dist
}  // namespace paddle_like
