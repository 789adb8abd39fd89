// Rank progress: what each rank of a group publishes on the watchdog's tick (its last
// issued and completed collective sequence numbers, its oldest op that has not finished well,
// and the wall clock), under "wd/<rank>" in the group's store, and the report built from what
// every rank published. The watchdog (watchdog.h) decides when to publish and when to act;
// this says what is published and what it means.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "distributed/flight_recorder.h"
#include "phi/core/distributed/liveness.h"
#include "phi/core/distributed/store/store.h"

namespace paddle_like {
namespace distributed {

using phi::distributed::WallMs;  // the wall clock in ms (liveness.h): progress stamps
std::string ProgressKey(int rank);

// Still running (issued or started, not aborted).
bool Pending(const TaskState& op);
// Not finished well: still running, or failed (a Gloo op ends itself at the timeout; if
// nobody waits on it, nobody hears of it but the watchdog).
bool Stuck(const TaskState& op);

// One rank's published progress.
struct Progress {
  bool present = false;
  int64_t issued = 0, completed = 0, wall_ms = 0, pending_seq = -1;
  std::string pending;  // the oldest pending op, "" when none
};

// A rank's progress from its flight recorder's `entries`: the last issued and completed
// collective seqs (a P2P op carries the last collective's), and its oldest stuck op, which is
// returned in `oldest` when asked for.
Progress LocalProgress(const std::vector<FlightRecorder::Entry>& entries,
                       TaskState** oldest = nullptr);
// The value published under ProgressKey, and back (present=false when malformed).
std::string Encode(int64_t beat, const Progress& p);
Progress Decode(const std::string& v);

// Who is behind on `op` of group `gid` of `size` ranks, from the progress each rank published
// on the watchdog's tick: for a collective the ranks that have not issued its collective seq
// ("Ranks behind (have not issued seq 4): rank 2."), for a point-to-point op its peer; then
// each distinct position with its ranks, and the ranks that never published. Last, from the
// liveness service (phi/core/distributed/liveness.h, read within `budget`), whether each of
// those ranks is alive (a rank that is alive and behind is stuck elsewhere) and any other rank
// that is not alive and running. Reads only published keys (check, then get): never waits for
// one. Rank `self_rank`'s own progress is taken from its flight recorder `self`, as of now.
// Starts with a newline.
std::string ProgressReport(phi::distributed::Store& store, int gid, int size, const OpDesc& op,
                           int self_rank, const FlightRecorder& self,
                           std::chrono::milliseconds budget);

}  // namespace distributed
}  // namespace paddle_like
