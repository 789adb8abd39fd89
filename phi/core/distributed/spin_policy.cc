#include "phi/core/distributed/spin_policy.h"

#include <sched.h>

#include <algorithm>

#include "phi/core/flags.h"

namespace phi {
namespace distributed {

std::chrono::microseconds SpinPolicy::Bound() {
  return std::chrono::microseconds(std::max(0, FLAGS_gloo_spin_us));
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
