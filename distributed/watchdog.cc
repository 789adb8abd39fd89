#include "distributed/watchdog.h"

#include <glog/logging.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <set>
#include <thread>
#include <vector>

#include "distributed/rank_progress.h"
#include "phi/core/distributed/store/tcp_store.h"
#include "phi/core/errors.h"
#include "phi/core/flags.h"

namespace paddle_like {
namespace distributed {

namespace {

std::atomic<bool> g_dump_requested{false};
void OnSigusr1(int) { g_dump_requested.store(true); }  // lock-free atomic: signal-safe

// Set by a rank that timed out: every rank of the group dumps its flight recorder, so the
// dumps can be compared (tools/fr_trace), the ranks that did not time out included.
const char* kDumpRequestKey = "wd/dump_request";

bool MakeDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) return true;
  LOG(WARNING) << "watchdog: cannot create " << dir << ": " << std::strerror(errno);
  return false;
}

}  // namespace

class Watchdog {
 public:
  static Watchdog& Get() {
    static auto* w = new Watchdog();  // leaked: its thread may outlive static destructors
    return *w;
  }

  void Add(const std::shared_ptr<WatchTarget>& t) {
    std::lock_guard<std::mutex> lk(mu_);
    auto w = std::make_shared<Watched>();
    w->target = t;
    targets_.push_back(std::move(w));
    if (!started_) {
      started_ = true;
      std::atexit([] {
        Watchdog& w = Watchdog::Get();
        std::lock_guard<std::mutex> tick(w.tick_mu_);
        w.exiting_ = true;
      });
      struct sigaction old {};
      if (::sigaction(SIGUSR1, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
        ::signal(SIGUSR1, OnSigusr1);
      }
      std::thread([this] { Loop(); }).detach();  // lives as long as the process
    }
  }

  int DumpAll(const std::string& dir) {
    if (!MakeDir(dir)) return 0;
    int files = 0;
    for (auto& [t, w] : Live()) {
      std::string path = dir + "/fr_g" + std::to_string(t->gid_) + "_r" +
                         std::to_string(t->rank_) + ".txt";
      std::ofstream f(path);
      f << "# " << t->describe_ << " size=" << t->size_ << "\n" << t->recorder_->DumpRecords();
      if (f) ++files;
    }
    return files;
  }

 private:
  struct Watched {
    std::weak_ptr<WatchTarget> target;
    std::set<std::pair<uint64_t, uint64_t>> reported;  // (seq, p2p_seq) already reported
    int64_t beat = 0;
    bool dumped_on_request = false;
  };

  // The groups still alive (and forgets the others).
  std::vector<std::pair<std::shared_ptr<WatchTarget>, std::shared_ptr<Watched>>> Live() {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<std::pair<std::shared_ptr<WatchTarget>, std::shared_ptr<Watched>>> out;
    for (auto it = targets_.begin(); it != targets_.end();) {
      if (auto t = (*it)->target.lock()) {
        out.emplace_back(std::move(t), *it);
        ++it;
      } else {
        it = targets_.erase(it);
      }
    }
    return out;
  }

  void Loop() {
    while (true) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::max(10, FLAGS_comm_watchdog_interval_ms)));
      // At exit the flags and glog are destroyed: the atexit hook stops the loop between
      // ticks (it waits for a tick in progress).
      std::lock_guard<std::mutex> tick(tick_mu_);
      if (exiting_) return;
      if (g_dump_requested.exchange(false)) {
        std::string dir = FLAGS_comm_dump_dir.empty()
                              ? "/tmp/paddle_like_fr_" + std::to_string(::getpid())
                              : FLAGS_comm_dump_dir;
        LOG(WARNING) << "watchdog: SIGUSR1: " << DumpAll(dir) << " flight recorder(s) in "
                     << dir;
      }
      for (auto& [t, w] : Live()) Tick(*t, *w);
    }
  }

  void Tick(WatchTarget& t, Watched& watched) {
    {
      std::lock_guard<std::mutex> lk(t.mu_);
      if (t.retired_) return;  // being destroyed: not a hang to report
    }
    Watched* w = &watched;
    auto entries = t.recorder_->Snapshot();
    TaskState* oldest = nullptr;
    const Progress mine = LocalProgress(entries, &oldest);
    try {
      t.store_->set(ProgressKey(t.rank_), Encode(++w->beat, mine));
      t.published_ms_.store(mine.wall_ms);
      if (!FLAGS_comm_dump_dir.empty() && !w->dumped_on_request &&
          t.store_->check({kDumpRequestKey})) {
        w->dumped_on_request = true;
        LOG(WARNING) << "watchdog: " << t.describe_ << ": a rank timed out; "
                     << DumpAll(FLAGS_comm_dump_dir) << " flight recorder(s) written to "
                     << FLAGS_comm_dump_dir;
      }
    } catch (const std::exception& e) {
      LOG_FIRST_N(WARNING, 1) << "watchdog: " << t.describe_
                              << ": cannot publish progress: " << e.what();
    }
    if (!oldest) return;
    auto age = oldest->Age();
    auto limit = t.timeout_.load() + std::chrono::milliseconds(FLAGS_comm_watchdog_interval_ms);
    const std::pair<uint64_t, uint64_t> id{oldest->desc.seq, oldest->desc.p2p_seq};
    if (age < limit || oldest->timeout_reported.load() || oldest->aborted.load() ||
        w->reported.count(id)) {
      return;
    }
    w->reported.insert(id);
    oldest->timeout_reported.store(true);
    Act(t, *oldest, Report(t, *oldest));
  }

  std::string Report(WatchTarget& t, const TaskState& stuck) {
    return "Watchdog: " + t.describe_ + ": " + stuck.desc.ToString() +
           " has not finished well after " + std::to_string(t.timeout_.load().count()) +
           " ms (the group's timeout), and nobody waited for it." +
           ProgressReport(*t.store_, t.gid_, t.size_, stuck.desc, t.rank_, *t.recorder_,
                          std::chrono::seconds(2));
  }

  void Act(WatchTarget& t, const TaskState& stuck, const std::string& report) {
    // Held throughout: the group cannot be retired (destroyed) while we act on it, and one
    // retired since the tick began is left alone.
    std::lock_guard<std::mutex> retire_guard(t.mu_);
    if (t.retired_) return;
    std::string text = report;
    if (!FLAGS_comm_dump_dir.empty()) {
      text += "\n  Flight recorders written to " + FLAGS_comm_dump_dir + " (" +
              std::to_string(DumpAll(FLAGS_comm_dump_dir)) +
              " file(s) here; every rank of the group is asked to dump too); tools/fr_trace " +
              FLAGS_comm_dump_dir + " compares them.";
      try {
        t.store_->set(kDumpRequestKey, std::to_string(stuck.desc.seq));
      } catch (const std::exception& e) {
        text += " (cannot ask the other ranks: " + std::string(e.what()) + ")";
      }
    }
    text += "\n  Last ops of this group:\n" + t.recorder_->Dump();
    LOG(ERROR) << text;
    const std::string& action = FLAGS_comm_watchdog_action;
    if (action == "log") return;
    if (action == "fail") {
      // The stuck ops' outcome first: failing the communicators wakes an op blocked on them
      // at once, and its network error must not win over the report.
      for (const auto& e : t.recorder_->Snapshot()) {
        if (!Stuck(*e)) continue;
        try {
          PADDLE_THROW(phi::errors::Timeout("%s", report.c_str()));
        } catch (...) {
          e->SetError(std::current_exception());
        }
        e->aborted.store(true);
      }
      if (t.fail_) t.fail_(report);
      return;
    }
    if (!FLAGS_comm_dump_dir.empty()) {
      // Give the other ranks' watchdogs two ticks to answer the dump request.
      std::this_thread::sleep_for(std::chrono::milliseconds(2 * FLAGS_comm_watchdog_interval_ms + 200));
    }
    std::fprintf(stderr, "%s\nwatchdog: aborting the process (FLAGS_comm_watchdog_action=%s; "
                 "exit code %d)\n", report.c_str(), action.c_str(), kWatchdogExitCode);
    std::fflush(stderr);
    google::FlushLogFiles(google::GLOG_INFO);
    // _Exit runs no destructors: a store this process hosts would vanish under the ranks
    // that still need it to name the failure.
    phi::distributed::TCPStore::KeepHostedStoresForOtherProcesses();
    std::_Exit(kWatchdogExitCode);
  }

  std::mutex mu_;
  std::vector<std::shared_ptr<Watched>> targets_;
  bool started_ = false;
  std::mutex tick_mu_;  // held by a tick; the atexit hook takes it to stop the loop
  bool exiting_ = false;
};

std::string WatchTarget::ReportFor(const OpDesc& op, std::chrono::milliseconds budget) {
  if (!watched_.load()) return "";
  // The store is asked only while this rank's progress gets through to it: otherwise it is
  // likely unreachable, and the caller is told at once instead of after the budget.
  const int64_t published = published_ms_.load();
  if (published == 0) {
    return "\n  (Which ranks are behind is unknown: no progress of this rank has reached the "
           "store yet.)";
  }
  const int64_t since = WallMs() - published;
  if (since > 2 * int64_t{FLAGS_comm_watchdog_interval_ms} + 500) {
    return "\n  (Which ranks are behind is unknown: this rank's progress has not reached the "
           "store for " + std::to_string(since) + " ms.)";
  }
  // The reads run on a thread of their own, on a connection of their own: a store behind a
  // partition would hold a client for its timeout plus a reply grace. The thread owns
  // everything it touches.
  auto outcome = std::make_shared<std::promise<std::string>>();
  std::future<std::string> report = outcome->get_future();
  std::thread([store = store_, gid = gid_, size = size_, rank = rank_, recorder = recorder_, op,
               budget, outcome] {
    try {
      std::shared_ptr<phi::distributed::Store> own = store->Clone();
      if (own) own->set_timeout(budget);
      outcome->set_value(
          ProgressReport(own ? *own : *store, gid, size, op, rank, *recorder, budget));
    } catch (...) {
      outcome->set_exception(std::current_exception());
    }
  }).detach();
  if (report.wait_for(budget) != std::future_status::ready) {
    return "\n  (Which ranks are behind is unknown: the store did not answer within " +
           std::to_string(budget.count()) + " ms.)";
  }
  try {
    return report.get();
  } catch (const std::exception& e) {
    return "\n  (Which ranks are behind is unknown: " + std::string(e.what()) + ")";
  }
}

WatchTarget::WatchTarget(std::string describe, int gid, int rank, int size,
                         std::chrono::milliseconds timeout,
                         std::shared_ptr<FlightRecorder> recorder,
                         std::shared_ptr<phi::distributed::Store> store,
                         std::function<void(const std::string&)> fail)
    : describe_(std::move(describe)),
      gid_(gid),
      rank_(rank),
      size_(size),
      timeout_(timeout),
      recorder_(std::move(recorder)),
      fail_(std::move(fail)) {
  std::shared_ptr<phi::distributed::Store> own = store ? store->Clone() : nullptr;
  store_ = own ? own : std::move(store);
}

void WatchTarget::Retire() {
  std::lock_guard<std::mutex> lk(mu_);
  fail_ = nullptr;
  retired_ = true;
}

void WatchGroup(const std::shared_ptr<WatchTarget>& target) {
  if (!FLAGS_comm_watchdog || !target || target->size_ < 2 || !target->store_) return;
  Watchdog::Get().Add(target);
  target->watched_.store(true);
}

int DumpFlightRecorders(const std::string& dir) { return Watchdog::Get().DumpAll(dir); }

}  // namespace distributed
}  // namespace paddle_like
