#include "phi/core/distributed/spin_policy.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "phi/core/flags.h"

namespace phi {
namespace distributed {

std::chrono::microseconds SpinPolicy::Bound() {
  return std::chrono::microseconds(std::max(0, FLAGS_gloo_spin_us));
}

namespace {
constexpr unsigned kPausesBeforeYield = 64;

int CpusAvailable() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

int RanksOnHostFromEnv() {
  for (const char* name : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return 0;
}

std::atomic<unsigned>& Pauses() {
  static std::atomic<unsigned> pauses{RanksOnHostFromEnv() > CpusAvailable() ? 0u
                                                                             : kPausesBeforeYield};
  return pauses;
}
}  // namespace

unsigned SpinPolicy::PausesBeforeYield() { return Pauses().load(std::memory_order_relaxed); }

void SpinPolicy::NoteRanksOnHost(int ranks) {
  if (ranks > CpusAvailable()) Pauses().store(0, std::memory_order_relaxed);
}

void SpinPolicy::Ended() {
  if (!armed()) Set(Clock::now() - started_ < Bound());
}

void SpinPolicy::Pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

void SpinPolicy::Yield() { sched_yield(); }

}  // namespace distributed
}  // namespace phi
