// monitored_barrier: a barrier through the group's store in which rank 0 names every rank
// that did not arrive within the timeout.
#include <chrono>
#include <string>

#include "paddle_like/dist/dist_internal.h"
#include "paddle_like/dist/distributed.h"
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
  std::string missing;
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
      missing += (missing.empty() ? "" : ", ") + std::to_string(g->ranks()[r]);
      if (!wait_all_ranks) break;
    }
  }
  if (missing.empty()) {
    store->set(base + "result", "ok");
    return;
  }
  const std::string verdict = "rank(s) " + missing + " (global) did not arrive within " +
                              std::to_string(timeout.count()) + " ms" +
                              (wait_all_ranks ? "" : " (the first missing one)");
  store->set(base + "result", verdict);
  PADDLE_THROW(phi::errors::Timeout("monitored_barrier on group '%s': %s", g->name().c_str(),
                                    verdict.c_str()));
}

}  // namespace dist
}  // namespace paddle_like
