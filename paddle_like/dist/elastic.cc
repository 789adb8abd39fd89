#include "paddle_like/dist/elastic.h"

#include <glog/logging.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <thread>

#include "paddle_like/dist/dist_internal.h"
#include "phi/core/errors.h"
#include "phi/core/distributed/liveness.h"
#include "phi/core/distributed/rank_list.h"

namespace paddle_like {
namespace dist {

using phi::distributed::JoinRanks;

namespace {

using Clock = std::chrono::steady_clock;

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

// Who of `group` is dead, as this rank sees it through the process's liveness service
// (phi/core/distributed/liveness.h): marked dead (by the launcher), exited, or silent for
// more than `deadline`. A rank never seen is given `deadline` from when this view began.
class DeadRanks {
 public:
  DeadRanks(const GroupPtr& group, std::chrono::milliseconds deadline)
      : group_(group), deadline_(deadline), since_(Clock::now()) {}

  // The global ranks of the group that are dead now.
  std::set<int> Now() const {
    using State = phi::distributed::RankLiveness::State;
    std::vector<int> group_ranks;
    for (int r = 0; r < group_->size(); ++r) group_ranks.push_back(r);
    std::set<int> dead;
    for (const auto& f : phi::distributed::Liveness::Process().Query(
             group_->gid(), group_ranks, std::chrono::seconds(2), deadline_)) {
      const bool gone = f.state == State::kDead || f.state == State::kExited ||
                        f.state == State::kSilent ||
                        (f.state == State::kNeverSeen && Clock::now() - since_ > deadline_);
      if (gone) dead.insert(group_->ranks()[static_cast<size_t>(f.rank)]);
    }
    return dead;
  }

 private:
  GroupPtr group_;
  std::chrono::milliseconds deadline_;
  Clock::time_point since_;
};

}  // namespace

void start_heartbeat(const ElasticOptions& options) {
  phi::distributed::Liveness::Process().Start(RootStore(), InitRank(),
                                              options.heartbeat_interval);
}
void stop_heartbeat() { phi::distributed::Liveness::Process().Stop(); }

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
  const DeadRanks liveness(group, options.heartbeat_deadline);
  std::string decision;
  std::vector<int> waiting;
  while (true) {
    if (store->check({kDecisionKey})) {
      decision = store->get_string(kDecisionKey);
      break;
    }
    const std::set<int> dead_now = liveness.Now();
    std::vector<int> proposal;
    waiting.clear();
    for (int r : members) {
      bool joined = r == me || store->check({JoinKey(r)});
      bool dead = r != me && dead_now.count(r) > 0;
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
  // The abort above is over for this process: it runs again, in the survivors' group.
  phi::distributed::Liveness::Process().Announce(phi::distributed::kLivenessRunning);
  LOG(INFO) << "elastic: group '" << group->name() << "' lost ranks " << JoinRanks(result.lost)
            << "; " << survivors.size() << " remain (agreed in " << result.seconds << " s)";
  return result;
}

}  // namespace dist
}  // namespace paddle_like
