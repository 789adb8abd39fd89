// SpinPolicy: the one rule by which the CPU transports (the two-rank socket paths, the
// shared-memory group, a point-to-point wait of a group or a task, the MPI progress thread)
// wait for a peer before they block (internal to the CPU engine).
//
// Why spin at all: a blocked wait costs a wake-up when the data comes (an idle CPU leaving its
// sleep state, or a busy one switching), tens to hundreds of microseconds, where the data
// itself takes a few. So a wait first polls for up to FLAGS_gloo_spin_us, then blocks
// (a socket read or poll, a futex wait).
//
// The rule:
// - The bound must exceed the slowest wake-up, or the ranks feed each other's delays: a rank
//   that blocked wakes late, its peer's spin runs out and it blocks in turn, each exchange then
//   costing spin + wake-up. Hence a default of 1000 us (docs/architecture.md, "Waiting").
// - A wait that outlasted the bound disarms the next one, which blocks at once: the peer is
//   busy (computing, or descheduled because ranks outnumber cores) and spinning would take the
//   CPU it needs. So does an op of another kind on this rank's other threads (Disarm). A wait
//   that ended within the bound, spinning or blocked, re-arms.
// - While spinning, the CPU is given up (sched_yield) after the first 64 polls, and at every
//   poll when the host runs more ranks than this process has CPUs: the rank being waited for
//   then needs this core (4 ranks on 2 cores: 8 B all-reduce 9-16 -> 6-8 us, 64 KiB 44-58 ->
//   36-47 us; docs/benchmarks.md, "Spinning with more ranks than cores").
// - FLAGS_gloo_spin_us=0 never spins; every path is correct without it (tests run both).
//
// CPU cost: at most the bound per wait while armed, and nothing after a late wait until one
// comes within the bound; docs/benchmarks.md gives the measured cost per op.
//
// One SpinPolicy per waiting thread and connection; Disarm from any thread.
#pragma once

#include <atomic>
#include <chrono>

namespace phi {
namespace distributed {

class SpinPolicy {
 public:
  using Clock = std::chrono::steady_clock;

  // FLAGS_gloo_spin_us (negative reads as 0).
  static std::chrono::microseconds Bound();

  // Starts a wait: spins while armed, calling `ready()` until it returns true or the bound
  // runs out. True when ready() was; false means block now (and call Ended() once the wait
  // is over). A wait that needs no spin at all (ready at once) costs one call of ready().
  template <typename Ready>
  bool Spin(Ready&& ready);

  // The wait started by the last Spin() is over: re-arms when it ended within the bound.
  void Ended();

  // For waits that spin on their own terms (a stream of partial reads): whether the next
  // wait may spin, and the verdict on the last one.
  bool armed() const { return armed_.load(std::memory_order_relaxed); }
  void Set(bool armed) { armed_.store(armed, std::memory_order_relaxed); }
  // Another kind of op ran on this rank's other connections: the next wait blocks at once.
  void Disarm() { Set(false); }

  // This host runs `ranks` ranks (the shared-memory group counts them; LOCAL_WORLD_SIZE or
  // OpenMPI's local size is the first guess): more than this process's CPUs makes every
  // spinning wait yield at each poll. Process-wide; only ever raises the count.
  static void NoteRanksOnHost(int ranks);
  // Whether spinning waits yield at every poll (the host has more ranks than CPUs).
  static bool YieldsAtEveryPoll() { return PausesBeforeYield() == 0; }

 private:
  static unsigned PausesBeforeYield();  // 64, or 0 with more ranks than CPUs
  static void Pause();  // the CPU's spin-wait hint
  static void Yield();  // gives the core to another runnable thread
  std::atomic<bool> armed_{true};
  Clock::time_point started_{};
};

template <typename Ready>
bool SpinPolicy::Spin(Ready&& ready) {
  if (ready()) {  // no clock read when no wait was needed
    Set(true);
    return true;
  }
  started_ = Clock::now();
  const auto bound = Bound();
  if (bound.count() <= 0 || !armed()) return false;
  const auto until = started_ + bound;
  const unsigned pauses = PausesBeforeYield();
  // Poll first, then pause: pausing before the first poll of the loop cost 1.36-1.5x at
  // 256 KiB-1 MiB on 4 ranks sharing 2 cores (A/B against the poll-first loop).
  for (unsigned i = 0;; ++i) {
    if (ready()) return true;
    // The clock is read every 16 polls: it costs about as much as a poll of shared memory.
    if ((i & 15) == 15 && Clock::now() >= until) break;
    if (i < pauses) {
      Pause();
    } else {
      Yield();
    }
  }
  Set(false);  // blocks now; Ended() decides about the next wait
  return false;
}

}  // namespace distributed
}  // namespace phi
