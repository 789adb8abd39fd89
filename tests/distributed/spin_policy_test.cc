// SpinPolicy (phi/core/distributed/spin_policy.h): a spinning wait ends when its condition
// holds, also while it yields at every poll, and the host's rank count decides the yielding.
// Each TEST runs in a process of its own, so the process-wide count starts fresh.
#include <gtest/gtest.h>

#include <sched.h>

#include <cstdlib>

#include "phi/core/distributed/spin_policy.h"
#include "phi/core/flags.h"

namespace paddle_like {
namespace testing {
namespace {

using phi::distributed::SpinPolicy;

int Cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
}

TEST(SpinPolicy, MoreRanksThanCpusMakeEveryPollYieldAndWaitsStillEnd) {
  if (std::getenv("LOCAL_WORLD_SIZE") || std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) {
    GTEST_SKIP() << "a launcher's rank count is in the environment: the start is not fresh";
  }
  // A bound no yield can use up, even on a loaded machine (a yield may wait a time slice).
  FLAGS_gloo_spin_us = 60 * 1000 * 1000;
  EXPECT_FALSE(SpinPolicy::YieldsAtEveryPoll()) << "one process on this host: pauses first";
  SpinPolicy::NoteRanksOnHost(Cpus());  // as many ranks as CPUs: still pauses first
  EXPECT_FALSE(SpinPolicy::YieldsAtEveryPoll());
  SpinPolicy spin;
  int polls = 0;
  EXPECT_TRUE(spin.Spin([&] { return ++polls == 100; })) << "ready after 100 polls";
  SpinPolicy::NoteRanksOnHost(Cpus() + 1);
  EXPECT_TRUE(SpinPolicy::YieldsAtEveryPoll()) << "more ranks than CPUs: yield at once";
  SpinPolicy::NoteRanksOnHost(1);  // only ever raises the count
  EXPECT_TRUE(SpinPolicy::YieldsAtEveryPoll());
  polls = 0;
  EXPECT_TRUE(spin.Spin([&] { return ++polls == 100; })) << "yielding, ready after 100 polls";
  EXPECT_EQ(polls, 100);
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
