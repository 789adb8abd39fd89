// monitored_barrier: a barrier through the group's store in which rank 0 names every rank
// that did not arrive within the timeout.
#include <chrono>
#include <string>
#include <vector>

#include "paddle_like/dist/dist_internal.h"
#include "paddle_like/dist/distributed.h"
#include "phi/core/distributed/liveness.h"
#include "phi/core/distributed/rank_list.h"
#include "phi/core/errors.h"

namespace paddle_like {
namespace dist {

void monitored_barrier(const GroupPtr& group, std::chrono::milliseconds timeout,
                       bool wait_all_ranks) {
  GroupPtr g = ResolveGroup(group, "monitored_barrier");
  if (!g) return;
  if (timeout <= std::chrono::milliseconds::zero()) timeout = g->timeout();
  const std::string base = "monitored_barrier/" + std::to_string(g->NextMonitoredBarrier()) + "/";
  const auto& store = g->store();
  store->set(base + "arrived/" + std::to_string(g->rank()), "1");
  if (g->rank() != 0) {
    // Rank 0 decides within `timeout`; the margin covers its publishing the verdict.
    try {
      store->wait({base + "result"}, timeout + std::chrono::seconds(5));
    } catch (const phi::TimeoutError&) {
      PADDLE_THROW(phi::errors::Timeout(
          "monitored_barrier on group '%s': rank %d (global) never reported; it died or "
          "hangs.",
          g->name().c_str(), g->ranks()[0]));
    }
    const std::string verdict = store->get_string(base + "result");
    PADDLE_ENFORCE(verdict == "ok", phi::errors::Timeout("monitored_barrier on group '%s': %s",
                                                         g->name().c_str(), verdict.c_str()));
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<int> missing;  // group ranks
  for (int r = 1; r < g->size(); ++r) {
    const std::string key = base + "arrived/" + std::to_string(r);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    bool arrived = false;
    if (left > std::chrono::milliseconds::zero()) {
      try {
        store->wait({key}, left);
        arrived = true;
      } catch (const phi::TimeoutError&) {
      }
    } else {
      arrived = store->check({key});  // past the deadline: only who is there already
    }
    if (!arrived) {
      missing.push_back(r);
      if (!wait_all_ranks) break;
    }
  }
  if (missing.empty()) {
    store->set(base + "result", "ok");
    return;
  }
  // Global ranks in the verdict and in the liveness facts.
  auto facts = phi::distributed::Liveness::Process().Query(g->gid(), missing);
  std::vector<int> global;
  for (auto& f : facts) {
    f.rank = g->ranks()[static_cast<size_t>(f.rank)];
    global.push_back(f.rank);
  }
  const std::string verdict = "rank(s) " + phi::distributed::JoinRanks(global) +
                              " (global) did not arrive within " +
                              std::to_string(timeout.count()) + " ms" +
                              (wait_all_ranks ? "" : " (the first missing one)") +
                              phi::distributed::DescribeLiveness(facts, /*trouble_only=*/false);
  store->set(base + "result", verdict);
  PADDLE_THROW(phi::errors::Timeout("monitored_barrier on group '%s': %s", g->name().c_str(),
                                    verdict.c_str()));
}

}  // namespace dist
}  // namespace paddle_like
