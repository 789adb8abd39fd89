#include "phi/core/distributed/liveness.h"

#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "phi/core/flags.h"

namespace phi {
namespace distributed {
namespace {

std::string BeatKey(int init_rank) { return "liveness/" + std::to_string(init_rank); }
std::string DeadKey(int init_rank) { return BeatKey(init_rank) + "/dead"; }

std::string HostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return buf;
}

}  // namespace

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool RankLiveness::well() const { return alive() && what == kLivenessRunning; }

std::string RankLiveness::ToString() const {
  std::string r = "rank " + std::to_string(rank) + ": ";
  const std::string age = std::to_string(age_ms) + " ms ago";
  switch (state) {
    case State::kUnknown:
      return r + "unknown (" + what + ")";
    case State::kNeverSeen:
      return r + "never seen (no heartbeat: not started yet, or died before its first)";
    case State::kAlive:
      return r + "alive" + (what == kLivenessRunning ? "" : ", " + what) + " (heartbeat " + age + ")";
    case State::kSilent:
      return r + "silent (last heartbeat " + age +
             ": stopped, hung, or cut off from the store)" +
             (what == kLivenessRunning ? "" : "; it last said: " + what);
    case State::kExited:
      return r + "exited (it ended its heartbeat at exit)";
    case State::kDead:
      return r + "dead (" + what + ")";
  }
  return r + "?";
}

std::string ListLiveness(const std::vector<RankLiveness>& facts, bool trouble_only) {
  std::string out;
  for (const RankLiveness& f : facts) {
    if (f.state == RankLiveness::State::kUnknown) continue;
    if (trouble_only && f.well()) continue;
    out += (out.empty() ? "" : "; ") + f.ToString();
  }
  return out;
}

std::string DescribeLiveness(const std::vector<RankLiveness>& facts, bool trouble_only) {
  const std::string known = ListLiveness(facts, trouble_only);
  if (!known.empty()) return " [liveness: " + known + "]";
  // Of the unknowns only the store's silence is worth saying: the others mean that nobody
  // keeps the facts here (no dist world, or the heartbeat turned off).
  for (const RankLiveness& f : facts) {
    if (f.state == RankLiveness::State::kUnknown &&
        f.what.find("store") != std::string::npos) {
      return " [liveness unknown: " + f.what + "]";
    }
  }
  return "";
}

void MarkRankDead(Store& world, int init_rank, const std::string& why) {
  world.set(DeadKey(init_rank), std::vector<uint8_t>(why.begin(), why.end()));
}

// ------------------------------------------------------------------ the service
struct Liveness::Impl {
  mutable std::mutex mu;
  std::condition_variable cv;
  std::thread thread;
  bool stop = false;
  int init_rank = -1;
  std::chrono::milliseconds interval{500};
  std::shared_ptr<Store> beat_store;   // the heartbeat thread's
  std::shared_ptr<Store> query_store;  // Query's, under query_mu
  const Store* world_id = nullptr;     // which world the beat is for (not kept alive here)
  std::mutex query_mu;
  std::string state = kLivenessRunning;
  uint64_t wanted = 0, written = 0;  // state versions: Announce waits for written >= wanted
  std::map<int, std::vector<int>> groups;
  bool failing = false;  // the last beat did not reach the store
  const std::string self = " " + std::to_string(::getpid()) + " " + HostName();

  std::vector<uint8_t> Value(const std::string& st) const {
    std::string v = std::to_string(WallMs()) + self + "|" + st;
    return std::vector<uint8_t>(v.begin(), v.end());
  }

  void Loop() {
    std::unique_lock<std::mutex> lk(mu);
    while (!stop) {
      const uint64_t version = wanted;
      const std::string st = state;
      auto store = beat_store;
      const int rank = init_rank;
      lk.unlock();
      bool ok = true;
      try {
        store->set(BeatKey(rank), Value(st));
      } catch (const std::exception& e) {
        // The store is gone (its host exited) or cut off: said once; the beat goes on trying
        // (a store that comes back sees it again). Meanwhile the others see this rank go
        // silent, which is the truth from where they stand.
        ok = false;
        if (!failing) {
          LOG(WARNING) << "liveness: rank " << rank << " cannot reach the store (" << e.what()
                       << "); its heartbeat goes on trying";
        }
      }
      lk.lock();
      failing = !ok;
      written = ok ? version : wanted;  // nobody waits for a write that cannot happen
      cv.notify_all();
      cv.wait_for(lk, interval, [this, version] { return stop || wanted != version; });
    }
  }
};

Liveness::Liveness() : impl_(new Impl()) {}

Liveness& Liveness::Process() {
  static auto* l = new Liveness();  // leaked: its thread may outlive static destructors
  return *l;
}

void Liveness::Start(const std::shared_ptr<Store>& world, int init_rank,
                     std::chrono::milliseconds interval) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lk(m.mu);
  if (interval < m.interval || !m.thread.joinable()) m.interval = interval;
  if (m.thread.joinable() && m.init_rank == init_rank && m.world_id == world.get()) {
    m.cv.notify_all();  // a shorter interval applies from now
    return;
  }
  if (m.thread.joinable()) {  // a new world (init after destroy): the old beat ends
    m.stop = true;
    m.cv.notify_all();
    std::thread t = std::move(m.thread);
    lk.unlock();
    t.join();
    lk.lock();
  }
  std::shared_ptr<Store> beat = world->Clone();
  std::shared_ptr<Store> query = world->Clone();
  m.beat_store = beat ? beat : world;
  m.query_store = query ? query : world;
  // A beat that cannot reach the store gives up within a few beats, so the loop (and Stop,
  // at exit) never waits out the world store's long timeout.
  if (beat) beat->set_timeout(std::max(4 * interval, std::chrono::milliseconds(2000)));
  m.init_rank = init_rank;
  m.world_id = world.get();
  m.stop = false;
  m.state = kLivenessRunning;
  // A mark left by an earlier process of this rank goes; if this one ends without Stop
  // (killed, crashed, _exit), the store marks it dead the moment its connection closes.
  m.beat_store->delete_key(DeadKey(init_rank));
  const std::string ended =
      "its process ended without a goodbye (killed or crashed: its store connection closed)";
  if (FLAGS_liveness_dead_on_close) {
    m.beat_store->SetOnClose(DeadKey(init_rank),
                             std::vector<uint8_t>(ended.begin(), ended.end()));
  }
  m.beat_store->set(BeatKey(init_rank), m.Value(m.state));  // visible before Start returns
  m.thread = std::thread([&m] { m.Loop(); });
  // Stopped before static destructors (glog's among them) run under it.
  static bool at_exit = (std::atexit([] { Liveness::Process().Stop(); }), true);
  (void)at_exit;
}

void Liveness::Stop() {
  Impl& m = *impl_;
  std::thread t;
  std::shared_ptr<Store> store;
  int rank;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    if (!m.thread.joinable()) return;
    m.stop = true;
    m.state = kLivenessExited;
    t = std::move(m.thread);
    store = std::move(m.beat_store);
    rank = m.init_rank;
  }
  m.cv.notify_all();
  t.join();
  try {
    store->set_timeout(std::min(m.interval * 2, std::chrono::milliseconds(1000)));
    store->CancelSetOnClose(DeadKey(rank));
    store->set(BeatKey(rank), m.Value(kLivenessExited));
  } catch (const std::exception&) {
    // The store went first: the others see the beat stop, which is also true.
  }
  // The connections close: a store host lingers while clients are connected.
  std::lock_guard<std::mutex> q(m.query_mu);
  std::lock_guard<std::mutex> lk(m.mu);
  m.query_store.reset();
  m.world_id = nullptr;
}

std::chrono::milliseconds Liveness::interval() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->interval;
}

std::chrono::milliseconds Liveness::silent_after() const {
  return 3 * interval() + std::chrono::milliseconds(1000);
}

void Liveness::Announce(const std::string& state) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lk(m.mu);
  m.state = state;
  const uint64_t version = ++m.wanted;
  if (!m.thread.joinable()) return;
  m.cv.notify_all();
  m.cv.wait_for(lk, m.interval, [&m, version] { return m.written >= version || m.stop; });
}

void Liveness::MapGroup(int gid, std::vector<int> init_ranks) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->groups[gid] = std::move(init_ranks);
}

void Liveness::ForgetGroup(int gid) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->groups.erase(gid);
}

std::vector<RankLiveness> Liveness::Query(int gid, const std::vector<int>& ranks,
                                          std::chrono::milliseconds budget,
                                          std::chrono::milliseconds silent_after) {
  Impl& m = *impl_;
  if (silent_after <= std::chrono::milliseconds::zero()) silent_after = this->silent_after();
  std::vector<RankLiveness> out(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) out[i].rank = ranks[i];
  std::vector<int> init(ranks.size(), -1);
  std::shared_ptr<Store> store;
  std::string unknown;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    if (!m.thread.joinable()) {
      unknown = "no heartbeat service in this process";
    } else if (gid != kInitRanks && m.groups.count(gid) == 0) {
      unknown = "group " + std::to_string(gid) + " has no liveness mapping";
    } else {
      for (size_t i = 0; i < ranks.size(); ++i) {
        if (gid == kInitRanks) {
          init[i] = ranks[i];
        } else {
          const auto& map = m.groups[gid];
          if (ranks[i] >= 0 && ranks[i] < static_cast<int>(map.size())) init[i] = map[ranks[i]];
        }
      }
      store = m.query_store;
    }
  }
  if (!store) {
    for (auto& f : out) f.what = unknown;
    return out;
  }
  std::lock_guard<std::mutex> q(m.query_mu);
  const auto started = std::chrono::steady_clock::now();
  store->set_timeout(budget);
  std::string failed;  // once the store failed, nothing more is asked of it
  for (size_t i = 0; i < ranks.size(); ++i) {
    RankLiveness& f = out[i];
    if (init[i] < 0) {
      f.what = "not a rank of the group";
      continue;
    }
    if (failed.empty() && std::chrono::steady_clock::now() - started > budget) {
      failed = "the store did not answer within " + std::to_string(budget.count()) + " ms";
    }
    if (!failed.empty()) {
      f.what = failed;
      continue;
    }
    try {
      if (store->check({DeadKey(init[i])})) {
        f.state = RankLiveness::State::kDead;
        f.what = store->get_string(DeadKey(init[i]));
        continue;
      }
      if (!store->check({BeatKey(init[i])})) {
        f.state = RankLiveness::State::kNeverSeen;
        continue;
      }
      const std::string v = store->get_string(BeatKey(init[i]));
      const size_t bar = v.find('|');
      std::istringstream head(v.substr(0, bar));
      int64_t wall = 0;
      head >> wall;
      f.what = bar == std::string::npos ? kLivenessRunning : v.substr(bar + 1);
      f.age_ms = std::max<int64_t>(0, WallMs() - wall);
      if (f.what == kLivenessExited) {
        f.state = RankLiveness::State::kExited;
      } else if (f.age_ms > silent_after.count()) {
        f.state = RankLiveness::State::kSilent;
      } else {
        f.state = RankLiveness::State::kAlive;
      }
    } catch (const std::exception& e) {
      failed = std::string("the store did not answer: ") + e.what();
      f.what = failed;
    }
  }
  return out;
}

std::string Liveness::About(int gid, const std::vector<int>& ranks,
                            std::chrono::milliseconds budget) {
  if (ranks.empty()) return "";
  return DescribeLiveness(Query(gid, ranks, budget), /*trouble_only=*/false);
}

std::string Liveness::TroubleIn(int gid, int size, int self, std::chrono::milliseconds settle) {
  std::vector<int> others;
  for (int r = 0; r < size; ++r) {
    if (r != self) others.push_back(r);
  }
  if (others.empty()) return "";
  const auto until = std::chrono::steady_clock::now() + settle;
  while (true) {
    const std::vector<RankLiveness> facts = Query(gid, others);
    const bool all_well = std::all_of(facts.begin(), facts.end(),
                                      [](const RankLiveness& f) { return f.well(); });
    if (!all_well || std::chrono::steady_clock::now() >= until) {
      return DescribeLiveness(facts, /*trouble_only=*/true);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace distributed
}  // namespace phi
