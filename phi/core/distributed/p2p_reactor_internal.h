// The reactor: one thread per process that waits on every point-to-point socket (epoll) and
// runs what the endpoints ask of it (p2p_transport_internal.h). It lives while an endpoint
// holds it; the last one to go ends the thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace phi {
namespace distributed {

class P2PReactor {
 public:
  using Clock = std::chrono::steady_clock;
  using FdHandler = std::function<void(uint32_t events)>;
  // Expires what is due at `now`; returns its next deadline (Clock::time_point::max() for
  // none).
  using Timer = std::function<Clock::time_point(Clock::time_point now)>;

  // The process's reactor, started on first use.
  static std::shared_ptr<P2PReactor> Get();
  ~P2PReactor();  // ends the thread (only the last holder destroys it)

  // Runs `fn` on the reactor thread soon, in the order posted. Any thread.
  void Post(std::function<void()> fn);
  // Runs `fn` there and waits for it. Not from the reactor thread.
  void PostAndWait(std::function<void()> fn);
  bool OnReactorThread() const { return std::this_thread::get_id() == thread_.get_id(); }

  // Reactor thread only. Watch returns a token that names the registration (an fd number
  // may be reused at once after close; a token never is).
  uint64_t Watch(int fd, uint32_t events, FdHandler handler);
  void Modify(uint64_t token, uint32_t events);
  void Unwatch(uint64_t token);  // before the fd is closed
  uint64_t AddTimer(Timer timer);
  void RemoveTimer(uint64_t id);
  // A timer's deadline moved earlier: the loop recomputes before it sleeps again.
  void Rearm() { rearm_ = true; }

 private:
  P2PReactor();
  void Loop();
  void RunPosted();

  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: Post wakes the loop
  std::mutex mu_;
  std::deque<std::function<void()>> posted_;  // under mu_
  bool stop_ = false;                         // under mu_
  struct Watched {
    int fd;
    FdHandler handler;
  };
  std::unordered_map<uint64_t, Watched> watched_;  // reactor thread only
  std::unordered_map<uint64_t, Timer> timers_;     // reactor thread only
  uint64_t next_token_ = 1;
  bool rearm_ = false;
  std::thread thread_;
};

}  // namespace distributed
}  // namespace phi
