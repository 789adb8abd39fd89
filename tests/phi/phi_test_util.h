// Helpers for the phi core tests: a one-shot gate (a latch of count 1) and a hang guard.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>

namespace phi_test {

// Jobs block on Wait() until the test calls Open().
class Gate {
 public:
  void Open() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return open_; });
  }
  // False when the deadline passed first.
  bool WaitFor(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, timeout, [&] { return open_; });
  }
  bool is_open() {
    std::lock_guard<std::mutex> lk(mu_);
    return open_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// A test whose failure mode is a deadlock must fail, not hang until ctest's timeout: when
// `done` is not ready within `timeout`, report `what` and end the process (its threads are
// stuck, so a normal exit would hang in their joins).
template <typename T>
void MustFinishWithin(std::future<T>& done, std::chrono::milliseconds timeout,
                      const std::string& what) {
  if (done.wait_for(timeout) != std::future_status::ready) {
    std::fprintf(stderr, "FATAL: deadlock: %s did not finish within %lld ms\n", what.c_str(),
                 static_cast<long long>(timeout.count()));
    std::fflush(stderr);
    std::_Exit(1);
  }
}

// Polls `cond` (a state another thread makes observable) until it holds or the deadline
// passes. Polling, not sleeping: it returns as soon as the state is there.
inline bool PollUntil(const std::function<bool()>& cond,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace phi_test
