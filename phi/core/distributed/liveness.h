// Liveness: the one answer, per process, to "is rank r alive, and if it is not taking part,
// why?". Every error that blames a rank asks it (the Gloo mesh, the peer connection, the
// roll call, the watchdog's report, the collective check, monitored_barrier), and so do the
// elastic agreement and the launcher; none keeps a heartbeat or a "dead" key of its own.
//
// Facts, in the world store (unprefixed), per process (by its rank at init, which stays
// when the world is shrunk and renumbered):
//   liveness/<rank>       "<wall ms> <pid> <host>|<state>", rewritten by the process's one
//                         heartbeat thread every FLAGS_liveness_interval_ms, and at once when
//                         its state changes (Announce). The state is "running", "exited"
//                         (the process ended the heartbeat at exit), or what the process
//                         says it is doing ("aborted its communicators: <why>").
//   liveness/<rank>/dead  "<why>", written by whoever saw the process end: the store itself
//                         the moment the heartbeat's connection closes without Stop (the
//                         process was killed or crashed; Store::SetOnClose), and the launcher
//                         ("the launcher says it was killed by signal 9 (SIGKILL)").
// A rank is dead when marked so; silent when its last beat is older than `silent_after`
// (stopped, hung in a signal, or cut off from the store); never seen when it has no beat
// (not started yet, or died before); exited when it said so; else alive, with its state.
// Wall clocks are compared across hosts: the hosts' clocks must agree to well within
// `silent_after` (NTP does).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "phi/core/distributed/store/store.h"

namespace phi {
namespace distributed {

// The wall clock in ms since the epoch: heartbeats and progress stamps, compared across
// hosts.
int64_t WallMs();

// The states a process publishes itself: running (the start, and after an abort is over)
// and exited (Stop). Any other is what it announced, e.g. "aborted <group>: <why>".
constexpr const char* kLivenessRunning = "running";
constexpr const char* kLivenessExited = "exited";

// Query's `gid` for ranks numbered as at init, and for ranks nobody can map (a communicator
// whose ranks are not its group's: the hierarchical all-reduce's leaders).
constexpr int kInitRanks = -1;
constexpr int kUnmappedRanks = -2;

struct RankLiveness {
  enum class State { kUnknown, kNeverSeen, kAlive, kSilent, kExited, kDead };
  int rank = -1;         // as the asker numbers it (a group rank, or the world's)
  State state = State::kUnknown;
  int64_t age_ms = -1;   // since its last beat (-1: none read)
  std::string what;      // alive: its state; dead: why; unknown: why nobody could tell
  bool alive() const { return state == State::kAlive; }
  // Alive and running: nothing to say about it in an error.
  bool well() const;
  // "rank 2: dead (the launcher saw it exit: killed by signal 9)"
  std::string ToString() const;
};

// "rank 2: dead (...); rank 1: alive (heartbeat 80 ms ago)": every rank in `facts` that is
// known, or with `trouble_only` those not alive and running (dead, silent, never seen,
// exited, or alive but in another state, such as aborted). "" when none is left.
std::string ListLiveness(const std::vector<RankLiveness>& facts, bool trouble_only);
// The same as a bracketed clause for an error message, " [liveness: ...]"; when the store
// did not answer, " [liveness unknown: ...]"; "" when nothing is to say.
std::string DescribeLiveness(const std::vector<RankLiveness>& facts, bool trouble_only);

// Marks `init_rank` dead in the world store: for a process that saw it end (a launcher).
void MarkRankDead(Store& world, int init_rank, const std::string& why);

class Liveness {
 public:
  // The process's service (not running until Start).
  static Liveness& Process();

  // Starts the heartbeat on a connection of its own to `world` as `init_rank` (the first
  // beat is in the store when this returns). Idempotent for the same rank; a shorter
  // `interval` (elastic training asks for one) takes effect at once. Stopped at exit.
  void Start(const std::shared_ptr<Store>& world, int init_rank,
             std::chrono::milliseconds interval);
  // Publishes "exited" and stops the heartbeat (at exit, and when the world is destroyed).
  void Stop();
  std::chrono::milliseconds interval() const;
  // The age after which a rank counts as silent by default: three beats and a second.
  std::chrono::milliseconds silent_after() const;

  // Publishes what this process is doing now (waits for the write at most one interval).
  void Announce(const std::string& state);

  // Which init rank each rank of group `gid` is (the world and every group made by the dist
  // layer register theirs; a group nobody registered has no liveness facts).
  void MapGroup(int gid, std::vector<int> init_ranks);
  void ForgetGroup(int gid);

  // The facts about `ranks` (numbered as in group `gid`, or kInitRanks), read on the
  // service's own connection within `budget`. kUnknown (with the reason) when the service is
  // not running, the group is not mapped, or the store did not answer.
  std::vector<RankLiveness> Query(int gid, const std::vector<int>& ranks,
                                  std::chrono::milliseconds budget = std::chrono::seconds(2),
                                  std::chrono::milliseconds silent_after = {});
  // DescribeLiveness(Query(gid, ranks), false): what is known of each of `ranks`.
  std::string About(int gid, const std::vector<int>& ranks,
                    std::chrono::milliseconds budget = std::chrono::seconds(2));
  // DescribeLiveness(trouble only) over every rank of group `gid` of `size` but `self`, for
  // an error that has a cause among them (a connection ended): while every one still reads
  // alive and running, the facts may be in flight (the store learns of a death when the
  // dead process's connection closes, the launcher when it reaps it), so it looks again
  // every 50 ms for up to `settle`.
  std::string TroubleIn(int gid, int size, int self,
                        std::chrono::milliseconds settle = std::chrono::milliseconds(500));

  struct Impl;

 private:
  Liveness();
  Impl* impl_;
};

}  // namespace distributed
}  // namespace phi
