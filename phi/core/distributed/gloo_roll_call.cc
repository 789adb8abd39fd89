// GlooMesh::RollCall: after a Gloo timeout, find the silent ranks through the store.
//
// Why: a network partition or a SIGSTOPped rank sends no FIN and no RST, so the sockets stay
// open and Gloo only says "Timed out waiting ... for recv" without naming a peer. The ranks
// that are still alive all time out at about the same moment (an all-reduce stalls every
// rank), so each posts that it failed and the ones that never post are the lost ones. See
// docs/multinode.md ("Network faults").
#include <algorithm>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <glog/logging.h>

#include "phi/core/distributed/gloo_mesh_internal.h"
#include "phi/core/distributed/liveness.h"
#include "phi/core/errors.h"
#include "phi/core/distributed/rank_list.h"

namespace phi {
namespace distributed {
namespace {

// Beyond the budget: time for the store's replies and the check of each key.
constexpr std::chrono::milliseconds kRollCallSlack{150};
constexpr std::chrono::milliseconds kRollCallPoll{20};

// Posts "fail/<rank>", then polls for every other rank's post until `budget` passes and
// returns the ranks that never posted. A failed post propagates (the caller reports a store
// it cannot reach). Polling, not one long wait: the store may go away while we look (it
// lives in rank 0 or a launcher that is exiting on the same failure); what was seen by then
// still counts.
std::vector<int> FindSilentRanks(Store* store, int rank, int size,
                                 std::chrono::milliseconds budget) {
  auto fail_key = [](int r) { return "fail/" + std::to_string(r); };
  const auto deadline = std::chrono::steady_clock::now() + budget;
  store->set(fail_key(rank), std::vector<uint8_t>{'1'});
  std::vector<int> silent;
  for (int r = 0; r < size; ++r) {
    if (r != rank) silent.push_back(r);
  }
  try {
    while (!silent.empty()) {
      std::vector<int> still;  // swapped in whole: a store error leaves the last full list
      for (int r : silent) {
        if (!store->check({fail_key(r)})) still.push_back(r);
      }
      silent.swap(still);
      if (silent.empty() || std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(kRollCallPoll);
    }
  } catch (const std::exception&) {
    // The store went away after our post: the ranks not seen by then are reported.
  }
  return silent;
}

}  // namespace

std::string GlooMesh::RollCall(std::chrono::milliseconds budget) {
  std::lock_guard<std::mutex> lk(roll_mu_);
  if (rolled_) return roll_result_;
  rolled_ = true;
  if (!own_store_) return roll_result_;  // an in-process store (tests): nothing to ask
  // The calls run on a thread of their own, on a connection of their own whose timeout is
  // the budget, and we wait for them at most the budget (+ slack): a store behind the same
  // partition would hold a client for its timeout plus a reply grace, and lanes of this mesh
  // may still use the mesh's connection. The thread owns everything it touches.
  auto outcome = std::make_shared<std::promise<std::vector<int>>>();
  std::future<std::vector<int>> silent_ranks = outcome->get_future();
  std::thread([store = store_, rank = rank_, size = size_, budget, outcome] {
    try {
      std::shared_ptr<Store> own = store->Clone();
      own->set_timeout(budget);
      outcome->set_value(FindSilentRanks(own.get(), rank, size, budget));
    } catch (...) {
      outcome->set_exception(std::current_exception());
    }
  }).detach();
  std::string store_trouble;
  std::vector<int> silent;
  if (silent_ranks.wait_for(budget + kRollCallSlack) != std::future_status::ready) {
    store_trouble = "the store did not answer within " +
                    std::to_string((budget + kRollCallSlack).count()) + " ms";
  } else {
    try {
      silent = silent_ranks.get();
    } catch (const std::exception& e) {
      store_trouble = e.what();
    }
  }
  if (!store_trouble.empty()) {
    // The store is unreachable too: this rank is on the side cut off from the store's host.
    std::vector<int> remote;
    {
      std::lock_guard<std::mutex> names(names_mu_);
      remote = remote_peers_;
    }
    std::sort(remote.begin(), remote.end());
    roll_result_ = " [this rank cannot reach the store either (" + store_trouble +
                   "): it is cut off from the store's side of the network" +
                   (remote.empty() ? std::string()
                                   : "; unreachable: rank(s) " + JoinRanks(remote) +
                                         " (the ranks on other hosts; without the store it "
                                         "cannot tell which of them still run)") +
                   "]";
  } else if (silent.empty()) {
    roll_result_ = " [every other rank reported the same failure: no rank is silent]";
  } else {
    // Whether each silent rank's process is alive says which: alive and silent is stuck
    // outside this op (in compute, in a data loader, in another collective).
    roll_result_ = " [silent: rank(s) " + JoinRanks(silent) +
                   " did not report this failure within " + std::to_string(budget.count()) +
                   " ms (stopped, hung, stuck outside this op, or cut off by the network)]" +
                   Liveness::Process().About(liveness_gid_, silent, budget);
  }
  LOG(ERROR) << describe_ << ":" << roll_result_;
  return roll_result_;
}

}  // namespace distributed
}  // namespace phi
