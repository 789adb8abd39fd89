// The reactor: one thread per process that waits on every point-to-point socket (epoll) and
// runs what the endpoints ask of it (p2p_transport_internal.h). It lives while an endpoint
// holds it; the last one to go ends the thread.
//
// The reactor's *work* (posted tasks, socket handlers, timers) runs under one lock, by
// whichever thread holds it: the reactor thread between its sleeps, a poster that finds it
// free (RunOrPost: a send is written at once, without waking the reactor thread), or a
// thread waiting for its ops (Progress: it reads the sockets itself instead of being woken
// by the reactor thread, which meanwhile stays off them, see BeginPolling). Everything the
// handlers touch is therefore only ever touched by one thread at a time, as if by one
// thread. A handler must tolerate an event already served by another holder (a socket read
// that finds nothing, a write with nothing queued): every socket is non-blocking.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "phi/core/distributed/progress_poller.h"

struct epoll_event;

namespace phi {
namespace distributed {

class ShmChannel;

class P2PReactor : public ProgressPoller {
 public:
  using Clock = std::chrono::steady_clock;
  using FdHandler = std::function<void(uint32_t events)>;
  // Expires what is due at `now`; returns its next deadline (Clock::time_point::max() for
  // none).
  using Timer = std::function<Clock::time_point(Clock::time_point now)>;

  // The process's reactor, started on first use.
  static std::shared_ptr<P2PReactor> Get();
  ~P2PReactor() override;  // ends the thread (only the last holder destroys it)

  // Runs `fn` as the reactor's work soon, after what was posted before. Any thread.
  void Post(std::function<void()> fn);
  // Runs `fn` now on this thread when the work's lock is free (after what was posted before),
  // else posts it. From inside the work (a handler or a callback) it posts: the work in
  // progress must not change under it.
  void RunOrPost(std::function<void()> fn);
  // Runs `fn` as the reactor's work and waits for it. Not from inside the work.
  void PostAndWait(std::function<void()> fn);
  bool OnReactorThread() const { return std::this_thread::get_id() == thread_.get_id(); }

  // A waiting thread's turn at the work: what was posted, then the sockets ready now (no
  // sleep). False when another thread holds the work (try again). Not from inside the work.
  bool Progress() override;
  // Between these, a thread polls with Progress: the reactor thread stays off the sockets
  // (each of its wake-ups would find them served and take a core the poller needs) and only
  // runs posted tasks and timers. After the last poller, it stays off for kLinger more
  // unless that poller blocks (ProgressPoller::EndPolling). Balanced calls; any thread.
  void BeginPolling() override;
  void EndPolling(bool blocking) override;
  // How long the reactor thread stays off the sockets after a poller that did not block: a
  // loop of sync ops polls again within microseconds, and an op nobody waits for is served
  // this much later at most.
  static constexpr std::chrono::microseconds kLinger{1000};

  // From inside the work only. Watch returns a token that names the registration (an fd
  // number may be reused at once after close; a token never is).
  uint64_t Watch(int fd, uint32_t events, FdHandler handler);
  void Modify(uint64_t token, uint32_t events);
  void Unwatch(uint64_t token);  // before the fd is closed
  uint64_t AddTimer(Timer timer);
  void RemoveTimer(uint64_t id);
  // Work for every turn at the sockets (Progress, and the loop before it sleeps): the
  // endpoints look at their shared-memory channels, which no epoll reports. Inside the work.
  uint64_t AddPollHook(std::function<void()> hook);
  void RemovePollHook(uint64_t id);
  // The shared-memory channels this process reads (p2p_shm_channel.h): marked as polled
  // while a thread polls or the reactor thread lingers (their writers then ring no
  // doorbell), unmarked before the reactor thread sleeps in epoll_wait (and looked at once
  // more, by the poll hooks). Any thread; the reactor keeps each mapped until removed.
  void AddPolledChannel(std::shared_ptr<ShmChannel> channel);
  void RemovePolledChannel(const ShmChannel* channel);
  // A timer's deadline moved earlier: the loop recomputes before it sleeps again.
  void Rearm() { rearm_ = true; }

 private:
  P2PReactor();
  void Loop();
  void RunPosted();
  void RunPollHooks();
  // Unmarks the polled channels if marked (before the thread sleeps on the sockets).
  void UnmarkChannels();
  // Runs the handlers of `n` events; true when one was Post's wake-up (drained).
  bool Dispatch(const ::epoll_event* events, int n);

  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: Post wakes the loop
  std::mutex work_mu_;  // held while the work runs (see the top of this file)
  std::mutex mu_;
  std::condition_variable park_cv_;           // the reactor thread, while threads poll
  std::deque<std::function<void()>> posted_;  // under mu_
  bool stop_ = false;                         // under mu_
  int pollers_ = 0;                           // under mu_
  Clock::time_point linger_until_{};          // under mu_: off the sockets until then
  bool parked_ = false;                       // under mu_: the thread waits on park_cv_
  struct Watched {
    int fd;
    FdHandler handler;
  };
  std::unordered_map<uint64_t, Watched> watched_;  // the work's
  std::unordered_map<uint64_t, Timer> timers_;     // the work's
  std::unordered_map<uint64_t, std::function<void()>> poll_hooks_;  // the work's
  std::vector<uint64_t> hook_ids_;  // the work's: RunPollHooks's scratch
  std::vector<std::shared_ptr<ShmChannel>> channels_;  // under mu_
  bool channels_marked_ = false;       // under mu_
  std::atomic<bool> polled_channels_{false};  // channels_ is not empty
  uint64_t progress_turns_ = 0;               // the work's: Progress calls
  uint64_t next_token_ = 1;
  bool rearm_ = false;
  std::thread thread_;
};

}  // namespace distributed
}  // namespace phi
