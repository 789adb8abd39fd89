// The point-to-point reactor's hand-over between a polling thread and its own thread
// (phi/core/distributed/p2p_reactor_internal.h): while a thread polls, and for kLinger after
// one that did not block, the reactor thread keeps off the sockets; a poller that blocks
// hands them back at once. A real eventfd stands for a socket.
#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "phi/core/distributed/p2p_reactor_internal.h"

namespace paddle_like {
namespace testing {
namespace {

using phi::distributed::P2PReactor;
using Clock = std::chrono::steady_clock;

// An eventfd watched by the process's reactor; counts the handler's runs and drains the fd.
class WatchedFd {
 public:
  WatchedFd() : reactor_(P2PReactor::Get()), fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    reactor_->PostAndWait([this] {
      token_ = reactor_->Watch(fd_, EPOLLIN, [this](uint32_t) {
        uint64_t v;
        if (::read(fd_, &v, sizeof(v)) == sizeof(v)) runs_.fetch_add(1);
      });
    });
  }
  ~WatchedFd() {
    reactor_->PostAndWait([this] { reactor_->Unwatch(token_); });
    ::close(fd_);
  }
  void Signal() {
    const uint64_t one = 1;
    ASSERT_EQ(::write(fd_, &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
  }
  int runs() const { return runs_.load(); }
  // Whether the handler ran (by the reactor thread: nobody here calls Progress) within
  // `limit`.
  bool RanWithin(std::chrono::milliseconds limit) const {
    const auto until = Clock::now() + limit;
    while (Clock::now() < until) {
      if (runs() > 0) return true;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return runs() > 0;
  }
  P2PReactor* reactor() const { return reactor_.get(); }

 private:
  std::shared_ptr<P2PReactor> reactor_;
  int fd_;
  uint64_t token_ = 0;
  std::atomic<int> runs_{0};
};

// A poller that did not block (its ops completed) leaves the sockets to the reactor thread
// after the linger, with no wake-up: an event that comes then is served by the thread.
TEST(P2PReactor, AfterAPollerThatDidNotBlockTheThreadServesTheSocketsAgain) {
  WatchedFd w;
  w.reactor()->BeginPolling();
  w.reactor()->PostAndWait([] {});  // the reactor thread now parks (see the next test)
  w.reactor()->EndPolling(/*blocking=*/false);
  w.Signal();
  // The linger is 1 ms; the reactor's longest sleep is 200 ms, which a missed hand-back
  // would take.
  EXPECT_TRUE(w.RanWithin(std::chrono::milliseconds(100)))
      << "the reactor thread did not return to the sockets after the linger";
}

// While a thread polls, the reactor thread does not read the sockets (the poller does, with
// Progress); a poller that blocks hands them back at once.
TEST(P2PReactor, WhileAThreadPollsTheThreadKeepsOffTheSocketsUntilThePollerBlocks) {
  WatchedFd w;
  w.reactor()->BeginPolling();
  // BeginPolling wakes nobody: a reactor thread asleep in epoll_wait then may still serve
  // the next event (handlers tolerate that). A posted task brings it round its loop, after
  // which it parks for as long as the polling lasts.
  w.reactor()->PostAndWait([] {});
  w.Signal();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // many lingers long
  EXPECT_EQ(w.runs(), 0) << "the reactor thread served a socket while a thread polled";
  const auto handed_back = Clock::now();
  w.reactor()->EndPolling(/*blocking=*/true);
  EXPECT_TRUE(w.RanWithin(std::chrono::milliseconds(100)));
  EXPECT_LT(Clock::now() - handed_back, std::chrono::milliseconds(100));
}

// A poller serves the sockets itself.
TEST(P2PReactor, APollerServesTheSocketsItself) {
  WatchedFd w;
  w.reactor()->BeginPolling();
  w.Signal();
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (w.runs() == 0 && Clock::now() < until) w.reactor()->Progress();
  EXPECT_EQ(w.runs(), 1);
  w.reactor()->EndPolling(/*blocking=*/false);
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
