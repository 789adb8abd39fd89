// The comm watchdog: one background thread per process that watches every in-flight op of
// every registered group (through the groups' flight recorders), so a hang is caught even
// when nobody waits on the op, and says who is behind.
//
// Each group publishes its progress through its own store, on the watchdog's tick (not
// per op): "wd/<rank>" = "<beat> <last issued seq> <last completed seq> <oldest pending op>",
// in collective seqs (OpDesc::seq; point-to-point ops are numbered apart and not compared).
// When an op is past its group's timeout and nobody has been told (no Wait raised it), the
// watchdog reads every rank's entry and reports, e.g.
//   rank 2 is at seq 4 (nothing pending: it has not issued seq 5);
//   ranks 0, 1, 3 are at seq 5 (AllReduce seq 5 [NumelIn 1048576, ..., float32] pending)
// plus the ranks that never published, and whether each rank behind is alive (the liveness
// service, phi/core/distributed/liveness.h: dead, silent, or alive and stuck elsewhere). It writes
// the flight recorder to FLAGS_comm_dump_dir (tools/fr_trace reads those files), then acts
// on FLAGS_comm_watchdog_action: "abort" (exit code 70), "fail" (the group's pending ops end
// with the report as a Timeout error and its communicator is aborted, the process lives),
// or "log". SIGUSR1 dumps every group's flight recorder. The same report, built from the
// same published progress, ends every timeout a Wait raises (WatchTarget::ReportFor).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "distributed/flight_recorder.h"
#include "distributed/rank_progress.h"
#include "phi/core/distributed/store/store.h"

namespace paddle_like {
namespace distributed {

constexpr int kWatchdogExitCode = 70;  // EX_SOFTWARE: "abort" after a timeout report

// What the watchdog needs of a group. The group owns it and calls Retire() first thing in
// its destructor: from then on the watchdog neither reports nor acts on the group (its
// destruction is the program dealing with whatever is still in flight) and never calls
// `fail` again.
class WatchTarget {
 public:
  WatchTarget(std::string describe, int gid, int rank, int size,
              std::chrono::milliseconds timeout, std::shared_ptr<FlightRecorder> recorder,
              std::shared_ptr<phi::distributed::Store> store,
              std::function<void(const std::string&)> fail);
  void Retire();
  // The timeout the watchdog holds this group's ops to from now on (set_timeout).
  void SetTimeout(std::chrono::milliseconds timeout) { timeout_.store(timeout); }

  // The progress report for `op` (see ProgressReport below) read on a thread and a store
  // connection of their own and waited for at most `budget`: for a caller whose wait on
  // `op` timed out. "" when the watchdog does not watch this group (no progress published).
  // When this rank's progress has not reached the store yet, or not for more than two
  // intervals (+ 500 ms), the store is not asked (it is likely unreachable) and the report
  // says so at once.
  std::string ReportFor(const OpDesc& op, std::chrono::milliseconds budget);

 private:
  friend class Watchdog;
  friend void WatchGroup(const std::shared_ptr<WatchTarget>& target);
  std::string describe_;
  int gid_, rank_, size_;
  std::atomic<std::chrono::milliseconds> timeout_;
  std::shared_ptr<FlightRecorder> recorder_;
  std::shared_ptr<phi::distributed::Store> store_;  // its own connection when it can
  std::mutex mu_;  // guards fail_ and retired_; held while the watchdog acts on the group
  std::function<void(const std::string&)> fail_;
  bool retired_ = false;
  std::atomic<bool> watched_{false};  // registered: the tick publishes its progress
  std::atomic<int64_t> published_ms_{0};  // wall clock of the last progress the store took
};

// Registers `target` with the process's watchdog (started on first use; a no-op when
// FLAGS_comm_watchdog is off).
void WatchGroup(const std::shared_ptr<WatchTarget>& target);

// Writes every watched group's flight recorder into `dir` (fr_g<gid>_r<rank>.txt); returns
// the number of files written.
int DumpFlightRecorders(const std::string& dir);

}  // namespace distributed
}  // namespace paddle_like
