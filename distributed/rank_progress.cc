// What each rank publishes about its progress on the watchdog's tick, and the report
// built from what every rank published (rank_progress.h).
#include "distributed/rank_progress.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "phi/core/distributed/liveness.h"
#include "phi/core/distributed/rank_list.h"

namespace paddle_like {
namespace distributed {

std::string ProgressKey(int rank) { return "wd/" + std::to_string(rank); }

bool Pending(const TaskState& op) {
  TaskStatus s = op.status.load();
  return (s == TaskStatus::kIssued || s == TaskStatus::kStarted) && !op.aborted.load();
}

bool Stuck(const TaskState& op) { return Pending(op) || op.status.load() == TaskStatus::kFailed; }

Progress LocalProgress(const std::vector<FlightRecorder::Entry>& entries,
                       TaskState** oldest) {
  Progress p;
  p.present = true;
  p.wall_ms = WallMs();
  TaskState* first_stuck = nullptr;
  for (const auto& e : entries) {
    p.issued = std::max<int64_t>(p.issued, e->desc.seq);
    if (Stuck(*e)) {
      if (!first_stuck) first_stuck = e.get();
    } else if (e->status.load() == TaskStatus::kCompleted && !e->desc.is_p2p()) {
      p.completed = std::max<int64_t>(p.completed, e->desc.seq);
    }
  }
  if (first_stuck) {
    p.pending_seq = static_cast<int64_t>(first_stuck->desc.seq);
    p.pending =
        first_stuck->desc.ToString() + ", " + TaskStatusName(first_stuck->status.load());
  }
  if (oldest) *oldest = first_stuck;
  return p;
}

std::string Encode(int64_t beat, const Progress& p) {
  std::ostringstream s;
  s << beat << " " << p.issued << " " << p.completed << " " << p.wall_ms << " " << p.pending_seq
    << "|" << p.pending;
  return s.str();
}

Progress Decode(const std::string& v) {
  Progress p;
  size_t bar = v.find('|');
  std::istringstream s(v.substr(0, bar));
  int64_t beat = 0;
  if (!(s >> beat >> p.issued >> p.completed >> p.wall_ms >> p.pending_seq)) return p;
  p.present = true;
  if (bar != std::string::npos) p.pending = v.substr(bar + 1);
  return p;
}

namespace {

std::string RankList(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + phi::distributed::JoinRanks(ranks);
}

}  // namespace

std::string ProgressReport(phi::distributed::Store& store, int gid, int size, const OpDesc& op,
                           int self_rank, const FlightRecorder& self,
                           std::chrono::milliseconds budget) {
  std::ostringstream msg;
  std::map<std::string, std::vector<int>> at;  // position -> ranks
  std::vector<int> behind, missing;
  for (int r = 0; r < size; ++r) {
    Progress p;
    try {
      if (r == self_rank) {
        p = LocalProgress(self.Snapshot());  // this rank's own: as of now
      } else if (store.check({ProgressKey(r)})) {
        p = Decode(store.get_string(ProgressKey(r)));
      }
    } catch (const std::exception& e) {
      msg << " (cannot read rank " << r << "'s progress: " << e.what() << ")";
    }
    if (!p.present) {
      missing.push_back(r);
      continue;
    }
    std::string position =
        p.pending_seq >= 0
            ? "at seq " + std::to_string(p.pending_seq) + " (" + p.pending + ")"
            : "at seq " + std::to_string(p.completed) +
                  " (nothing pending: it has not issued seq " + std::to_string(p.completed + 1) +
                  ")";
    at[position].push_back(r);
    if (!op.is_p2p() && p.issued < static_cast<int64_t>(op.seq)) behind.push_back(r);
  }
  if (op.is_p2p()) {
    // Only the two ends take part: the peer is the one to look at.
    msg << "\n  Peer of this point-to-point op: "
        << (op.peer >= 0 && op.peer < size ? "rank " + std::to_string(op.peer) : "unknown")
        << ".";
  } else {
    // A rank that never published is behind too, as far as anyone can tell.
    std::vector<int> all_behind = behind;
    all_behind.insert(all_behind.end(), missing.begin(), missing.end());
    std::sort(all_behind.begin(), all_behind.end());
    msg << "\n  Ranks behind (have not issued seq " << op.seq
        << "): " << (all_behind.empty() ? "none" : RankList(all_behind)) << ".";
  }
  for (auto& [position, ranks] : at) {
    msg << "\n  " << RankList(ranks) << (ranks.size() == 1 ? " is " : " are ") << position << ";";
  }
  msg << "\n  Never published progress (never joined, or died before): "
      << (missing.empty() ? "none" : RankList(missing)) << ".";
  // Whether the ranks in question are alive, from the liveness service: every one that is
  // behind (or the peer), and any other that is not alive and running.
  std::set<int> asked(behind.begin(), behind.end());
  asked.insert(missing.begin(), missing.end());
  if (op.is_p2p() && op.peer >= 0 && op.peer < size) asked.insert(op.peer);
  std::vector<int> others;
  for (int r = 0; r < size; ++r) {
    if (r != self_rank) others.push_back(r);
  }
  std::vector<phi::distributed::RankLiveness> shown;
  for (auto& f : phi::distributed::Liveness::Process().Query(gid, others, budget)) {
    if (asked.count(f.rank) || !f.well()) shown.push_back(f);
  }
  const std::string facts = phi::distributed::ListLiveness(shown, /*trouble_only=*/false);
  if (!facts.empty()) msg << "\n  Liveness: " << facts << ".";
  return msg.str();
}

}  // namespace distributed
}  // namespace paddle_like
