#include "phi/core/distributed/p2p_reactor_internal.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <vector>

#include <glog/logging.h>

#include "phi/core/distributed/p2p_shm_channel.h"
#include "phi/core/errors.h"

namespace phi {
namespace distributed {
namespace {
// The loop looks at its timers at least this often, so a deadline set by another thread's
// post is never missed by much even without a Rearm.
constexpr int kMaxSleepMs = 200;
constexpr uint64_t kWakeToken = 0;
constexpr int kPollEvents = 64;

// The reactor whose work this thread runs now, if any.
thread_local const P2PReactor* tl_working = nullptr;

// Marks this thread as running `r`'s work for the scope (the caller holds its lock).
class WorkScope {
 public:
  explicit WorkScope(const P2PReactor* r) : prev_(tl_working) { tl_working = r; }
  ~WorkScope() { tl_working = prev_; }

 private:
  const P2PReactor* prev_;
};
// A task must not end the work of whoever runs it (the loop, a poster, a waiter).
void RunTask(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    LOG(ERROR) << "point-to-point reactor: a task raised: " << e.what();
  }
}
}  // namespace

std::shared_ptr<P2PReactor> P2PReactor::Get() {
  static std::mutex mu;
  static std::weak_ptr<P2PReactor> current;
  static pid_t owner = 0;
  std::lock_guard<std::mutex> lk(mu);
  std::shared_ptr<P2PReactor> r = current.lock();
  if (r && owner != ::getpid()) {
    // A forked child: the parent's reactor thread does not exist here. Its object is left
    // alone (its destructor would join a thread that is not ours).
    new std::shared_ptr<P2PReactor>(std::move(r));
    r.reset();
  }
  if (!r) {
    r.reset(new P2PReactor());
    current = r;
    owner = ::getpid();
  }
  return r;
}

P2PReactor::P2PReactor() {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  PADDLE_ENFORCE(epoll_fd_ >= 0 && wake_fd_ >= 0,
                 errors::Unavailable("point-to-point reactor: epoll/eventfd failed: %s",
                                     std::strerror(errno)));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeToken;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  thread_ = std::thread([this] { Loop(); });
}

P2PReactor::~P2PReactor() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) {
    if (OnReactorThread()) {
      thread_.detach();  // the last holder let go from a callback: the loop sees stop_
    } else {
      thread_.join();
    }
  }
  ::close(wake_fd_);
  ::close(epoll_fd_);
}

void P2PReactor::Post(std::function<void()> fn) {
  bool was_empty, parked;
  {
    std::lock_guard<std::mutex> lk(mu_);
    was_empty = posted_.empty();
    posted_.push_back(std::move(fn));
    parked = parked_;
  }
  if (was_empty) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
    if (parked) park_cv_.notify_one();
  }
}

void P2PReactor::RunOrPost(std::function<void()> fn) {
  if (tl_working == this) return Post(std::move(fn));
  std::unique_lock<std::mutex> work(work_mu_, std::try_to_lock);
  if (!work.owns_lock()) return Post(std::move(fn));
  WorkScope scope(this);
  RunPosted();  // what was posted before runs first
  RunTask(fn);
  RunPosted();  // what fn's callbacks posted
}

bool P2PReactor::Progress() {
  if (tl_working == this) return false;
  std::unique_lock<std::mutex> work(work_mu_, std::try_to_lock);
  if (!work.owns_lock()) return false;
  WorkScope scope(this);
  RunPosted();
  // With channels, a turn's messages are in them (their writers ring no doorbell while this
  // thread polls): the sockets, which then carry only accepts, ends and others' doorbells,
  // are looked at every 8th turn. The system call cost more than the rest of a turn (A/B,
  // 2 ranks, 8 B: 2.55 against 2.85 us).
  if (!polled_channels_.load(std::memory_order_relaxed) || (++progress_turns_ & 7) == 1) {
    epoll_event events[kPollEvents];
    const int n = ::epoll_wait(epoll_fd_, events, kPollEvents, 0);
    // A drained wake-up was meant for the reactor thread: run what it announced.
    if (Dispatch(events, n)) RunPosted();
  }
  RunPollHooks();
  return true;
}

void P2PReactor::BeginPolling() {
  std::lock_guard<std::mutex> lk(mu_);
  if (++pollers_ == 1 && !channels_marked_) {
    for (const auto& ch : channels_) ch->SetPolling(true);
    channels_marked_ = true;
  }
}

void P2PReactor::AddPolledChannel(std::shared_ptr<ShmChannel> channel) {
  std::lock_guard<std::mutex> lk(mu_);
  channel->SetPolling(channels_marked_);
  channels_.push_back(std::move(channel));
  polled_channels_.store(true, std::memory_order_relaxed);
}

void P2PReactor::RemovePolledChannel(const ShmChannel* channel) {
  std::shared_ptr<ShmChannel> last;  // unmapped outside the lock
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = channels_.begin(); it != channels_.end(); ++it) {
      if (it->get() == channel) {
        last = std::move(*it);
        channels_.erase(it);
        polled_channels_.store(!channels_.empty(), std::memory_order_relaxed);
        break;
      }
    }
  }
}

void P2PReactor::UnmarkChannels() {
  std::lock_guard<std::mutex> lk(mu_);
  if (!channels_marked_) return;
  for (const auto& ch : channels_) ch->SetPolling(false);
  channels_marked_ = false;
}

uint64_t P2PReactor::AddPollHook(std::function<void()> hook) {
  const uint64_t id = next_token_++;
  poll_hooks_[id] = std::move(hook);
  return id;
}

void P2PReactor::RemovePollHook(uint64_t id) { poll_hooks_.erase(id); }

void P2PReactor::RunPollHooks() {
  if (poll_hooks_.empty()) return;
  // A hook may remove hooks (an endpoint that closes): the ids first, in a buffer kept across
  // turns (a spinning waiter runs this on every turn; the work never runs it nested).
  std::vector<uint64_t>& ids = hook_ids_;
  ids.clear();
  for (const auto& kv : poll_hooks_) ids.push_back(kv.first);
  for (uint64_t id : ids) {
    auto it = poll_hooks_.find(id);
    if (it == poll_hooks_.end()) continue;
    std::function<void()> hook = it->second;
    RunTask(hook);
  }
}

void P2PReactor::EndPolling(bool blocking) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (--pollers_ > 0) return;
    linger_until_ = blocking ? Clock::time_point{} : Clock::now() + kLinger;
    if (parked_) {
      // Not blocking: no wake-up; the parked thread sees the linger end on its own (Loop),
      // and unmarks the channels before it goes back to the sockets.
      if (blocking) park_cv_.notify_one();
      return;
    }
  }
  // The thread sleeps on the sockets (it was there when the polling began) with the channels
  // marked as polled: their writers ring no doorbell, so it must come round, to park for
  // the linger or to unmark them and look at them before it sleeps again.
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

void P2PReactor::PostAndWait(std::function<void()> fn) {
  PADDLE_ENFORCE(!OnReactorThread() && tl_working != this,
                 errors::PreconditionNotMet("PostAndWait from inside the reactor's work"));
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Post([&] {
    fn();
    std::lock_guard<std::mutex> lk(mu);
    done = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> lk(mu);
  cv.wait(lk, [&] { return done; });
}

uint64_t P2PReactor::Watch(int fd, uint32_t events, FdHandler handler) {
  const uint64_t token = next_token_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = token;
  PADDLE_ENFORCE(::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) == 0,
                 errors::Unavailable("point-to-point reactor: epoll_ctl(ADD, fd %d) failed: %s",
                                     fd, std::strerror(errno)));
  watched_[token] = Watched{fd, std::move(handler)};
  return token;
}

void P2PReactor::Modify(uint64_t token, uint32_t events) {
  auto it = watched_.find(token);
  if (it == watched_.end()) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = token;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, it->second.fd, &ev);
}

void P2PReactor::Unwatch(uint64_t token) {
  auto it = watched_.find(token);
  if (it == watched_.end()) return;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.fd, nullptr);
  watched_.erase(it);
}

uint64_t P2PReactor::AddTimer(Timer timer) {
  const uint64_t id = next_token_++;
  timers_[id] = std::move(timer);
  rearm_ = true;
  return id;
}

void P2PReactor::RemoveTimer(uint64_t id) { timers_.erase(id); }

void P2PReactor::RunPosted() {
  std::deque<std::function<void()>> batch;
  {
    std::lock_guard<std::mutex> lk(mu_);
    batch.swap(posted_);
  }
  for (auto& fn : batch) RunTask(fn);
}

bool P2PReactor::Dispatch(const epoll_event* events, int n) {
  bool woken = false;
  for (int i = 0; i < n; ++i) {
    const uint64_t token = events[i].data.u64;
    if (token == kWakeToken) {
      uint64_t drained;
      (void)!::read(wake_fd_, &drained, sizeof(drained));
      woken = true;
      continue;
    }
    auto it = watched_.find(token);
    if (it == watched_.end()) continue;  // unwatched since (by an earlier handler, or holder)
    FdHandler handler = it->second.handler;  // a copy: the handler may unwatch itself
    try {
      handler(events[i].events);
    } catch (const std::exception& e) {
      LOG(ERROR) << "point-to-point reactor: a socket handler raised: " << e.what();
    }
  }
  return woken;
}

void P2PReactor::Loop() {
  std::vector<epoll_event> events(kPollEvents);
  Clock::time_point next = Clock::time_point::max();
  for (;;) {
    int sleep_ms = kMaxSleepMs;
    {
      std::lock_guard<std::mutex> work(work_mu_);
      WorkScope scope(this);
      RunPosted();
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (stop_) return;
      }
      if (rearm_ || Clock::now() >= next) {
        rearm_ = false;
        next = Clock::time_point::max();
        const Clock::time_point now = Clock::now();
        std::vector<uint64_t> ids;
        for (const auto& kv : timers_) ids.push_back(kv.first);
        for (uint64_t id : ids) {  // a timer may remove timers
          auto it = timers_.find(id);
          if (it != timers_.end()) next = std::min(next, it->second(now));
        }
        if (rearm_) continue;  // a timer posted or re-armed: look again first
      }
      if (next != Clock::time_point::max()) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
        sleep_ms = static_cast<int>(
            std::max<int64_t>(0, std::min<int64_t>(left.count() + 1, kMaxSleepMs)));
      }
    }
    {
      // While threads poll the sockets themselves, and for kLinger after the last one that
      // did not block, sleep off them until a task is posted, a timer is due, or the
      // polling is over. The sleep is at most kLinger at a time: the end of a linger comes
      // without a wake-up (EndPolling), so the thread looks again that often.
      std::unique_lock<std::mutex> lk(mu_);
      auto off_sockets = [&] { return pollers_ > 0 || Clock::now() < linger_until_; };
      if (off_sockets()) {
        parked_ = true;
        park_cv_.wait_for(lk, std::min<Clock::duration>(std::chrono::milliseconds(sleep_ms),
                                                        kLinger),
                          [&] { return stop_ || !posted_.empty() || !off_sockets(); });
        parked_ = false;
        continue;
      }
    }
    // Back on the sockets: the channels' writers ring doorbells from now on, and what they
    // wrote before they could see that is looked at here.
    UnmarkChannels();
    {
      std::lock_guard<std::mutex> work(work_mu_);
      WorkScope scope(this);
      RunPollHooks();
      if (rearm_) continue;
    }
    const int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()),
                               sleep_ms);
    std::lock_guard<std::mutex> work(work_mu_);
    WorkScope scope(this);
    Dispatch(events.data(), n);
    if (n == static_cast<int>(events.size())) events.resize(events.size() * 2);
    if (rearm_) next = Clock::now();  // look at the timers on the next turn
  }
}

}  // namespace distributed
}  // namespace phi
