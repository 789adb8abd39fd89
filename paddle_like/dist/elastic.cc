#include "paddle_like/dist/elastic.h"

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "paddle_like/dist/dist_internal.h"
#include "phi/core/errors.h"
#include "phi/core/distributed/rank_list.h"

namespace paddle_like {
namespace dist {

using phi::distributed::JoinRanks;

namespace {

using Clock = std::chrono::steady_clock;

std::string HeartbeatKey(int rank) { return "elastic/hb/" + std::to_string(rank); }
std::string DeadKey(int rank) { return "elastic/dead/" + std::to_string(rank); }
std::string JoinKey(int rank) { return "elastic/join/" + std::to_string(rank); }
const char* kDecisionKey = "elastic/decision";

std::string Encode(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}

std::vector<int> Decode(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  return out;
}

// This process's heartbeat: a thread bumping its counter on its own store connection.
class Heartbeat {
 public:
  static Heartbeat& Get() {
    static auto* h = new Heartbeat();  // leaked: the thread may outlive static destructors
    return *h;
  }

  void Start(const ElasticOptions& o) {
    std::lock_guard<std::mutex> lk(mu_);
    if (thread_.joinable()) return;
    std::shared_ptr<Store> root = RootStore();
    std::shared_ptr<Store> own = root->Clone();
    store_ = own ? own : root;
    key_ = HeartbeatKey(InitRank());
    interval_ = o.heartbeat_interval;
    stop_ = false;
    store_->add(key_, 1);  // visible before Start returns
    thread_ = std::thread([this] { Loop(); });
    // Stopped before static destructors (glog's among them) run under it.
    static bool at_exit = (std::atexit([] { Heartbeat::Get().Stop(); }), true);
    (void)at_exit;
  }

  void Stop() {
    std::thread t;
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
      t = std::move(thread_);
    }
    cv_.notify_all();
    if (t.joinable()) t.join();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lk(mu_);
    while (!cv_.wait_for(lk, interval_, [this] { return stop_; })) {
      auto store = store_;
      lk.unlock();
      try {
        store->add(key_, 1);
      } catch (const std::exception& e) {
        LOG(WARNING) << "heartbeat: cannot reach the store (" << e.what() << "); stopping";
        return;
      }
      lk.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
  std::shared_ptr<Store> store_;
  std::string key_;
  std::chrono::milliseconds interval_{200};
  bool stop_ = false;
};

// What this rank sees of the members' heartbeats: a rank is dead once its counter has not
// moved for the deadline (counted from when this view began), or a launcher marked it dead.
class LivenessView {
 public:
  LivenessView(std::shared_ptr<Store> root, std::vector<int> members,
               std::chrono::milliseconds deadline)
      : root_(std::move(root)), members_(std::move(members)), deadline_(deadline) {
    Update();
  }

  void Update() {
    auto now = Clock::now();
    for (int r : members_) {
      int64_t beat = root_->add(HeartbeatKey(r), 0);
      auto it = seen_.find(r);
      if (it == seen_.end() || it->second.beat != beat) seen_[r] = {beat, now};
      if (!marked_.count(r) && root_->check({DeadKey(r)})) marked_.insert(r);
    }
  }

  bool Dead(int r) const {
    if (marked_.count(r)) return true;
    auto it = seen_.find(r);
    return it != seen_.end() && Clock::now() - it->second.changed > deadline_;
  }

 private:
  struct Seen {
    int64_t beat;
    Clock::time_point changed;
  };
  std::shared_ptr<Store> root_;
  std::vector<int> members_;
  std::chrono::milliseconds deadline_;
  std::map<int, Seen> seen_;
  std::set<int> marked_;
};

}  // namespace

void start_heartbeat(const ElasticOptions& options) { Heartbeat::Get().Start(options); }
void stop_heartbeat() { Heartbeat::Get().Stop(); }

ShrinkResult agree_and_shrink(const GroupPtr& group, const ElasticOptions& options) {
  const auto start = Clock::now();
  PADDLE_ENFORCE(group && group->is_member(),
                 phi::errors::InvalidArgument("agree_and_shrink: this rank is not a member of "
                                              "the group."));
  PADDLE_ENFORCE(group != world(),
                 phi::errors::InvalidArgument(
                     "agree_and_shrink works on a group made with new_group (shrinking the "
                     "world renumbers ranks): DataParallel's elastic mode makes its own."));
  const int me = group->ranks()[group->rank()];
  const std::vector<int> members = group->ranks();
  start_heartbeat(options);

  // Close this rank's side first: a survivor still blocked in an op with us fails now.
  group->abort_backends("a member of the group failed; the survivors are shrinking it");
  group->drop_backends();

  std::shared_ptr<Store> store = group->store();
  store->set(JoinKey(me), "1");
  VLOG(1) << "elastic: rank " << me << " joined the shrink of group '" << group->name() << "'";
  if (options.after_join) options.after_join();

  const auto join_timeout = options.join_timeout > std::chrono::milliseconds::zero()
                                ? options.join_timeout
                                : group->timeout();
  LivenessView view(RootStore(), members, options.heartbeat_deadline);
  std::string decision;
  std::vector<int> waiting;
  while (true) {
    if (store->check({kDecisionKey})) {
      decision = store->get_string(kDecisionKey);
      break;
    }
    view.Update();
    std::vector<int> proposal;
    waiting.clear();
    for (int r : members) {
      bool joined = r == me || store->check({JoinKey(r)});
      bool dead = r != me && view.Dead(r);
      if (joined && !dead) proposal.push_back(r);
      if (!joined && !dead) waiting.push_back(r);
    }
    if (waiting.empty()) {
      const std::string mine = Encode(proposal);
      auto stored = store->compare_set(kDecisionKey, {},
                                       std::vector<uint8_t>(mine.begin(), mine.end()));
      decision.assign(stored.begin(), stored.end());
      break;
    }
    PADDLE_ENFORCE(Clock::now() - start < join_timeout,
                   phi::errors::Timeout(
                       "agree_and_shrink on group '%s': ranks %s are alive (their heartbeats "
                       "move) but did not join the shrink within %lld ms.",
                       group->name().c_str(), JoinRanks(waiting).c_str(),
                       static_cast<long long>(join_timeout.count())));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  std::vector<int> survivors = Decode(decision);
  PADDLE_ENFORCE(std::find(survivors.begin(), survivors.end(), me) != survivors.end(),
                 phi::errors::PreconditionNotMet(
                     "agree_and_shrink on group '%s': the other ranks declared this rank (%d) "
                     "dead (its heartbeat stopped for more than %lld ms) and went on as ranks "
                     "%s; this rank can no longer take part.",
                     group->name().c_str(), me,
                     static_cast<long long>(options.heartbeat_deadline.count()),
                     JoinRanks(survivors).c_str()));
  ShrinkResult result;
  for (int r : members) {
    if (std::find(survivors.begin(), survivors.end(), r) == survivors.end()) {
      result.lost.push_back(r);
    }
  }
  if (!result.lost.empty()) {
    std::vector<int> lost_in_group;  // shrink_group takes the group's own ranks
    for (int r : result.lost) lost_in_group.push_back(get_group_rank(group, r));
    result.group = shrink_group(lost_in_group, group);
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  LOG(INFO) << "elastic: group '" << group->name() << "' lost ranks " << JoinRanks(result.lost)
            << "; " << survivors.size() << " remain (agreed in " << result.seconds << " s)";
  return result;
}

}  // namespace dist
}  // namespace paddle_like
