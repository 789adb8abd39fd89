// The multi-process harness itself: results, captured output, failures, crashes, timeouts.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

TEST(HarnessTest, EveryRankRunsWithAStoreAndOutputIsCaptured) {
  auto results = SpawnRanks(4, [](const RankContext& ctx) {
    std::printf("hello from rank %d of %d\n", ctx.rank, ctx.world_size);
    std::cerr << "stderr of rank " << ctx.rank << std::endl;
    ctx.store->add("ranks", 1);
    EXPECT_EQ(ctx.host, "127.0.0.1");
    EXPECT_GT(ctx.port, 0);
    EXPECT_EQ(std::getenv("RANK"), std::to_string(ctx.rank));
  });
  ASSERT_EQ(results.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(results[r].ok()) << results[r].Describe() << results[r].output;
    EXPECT_EQ(results[r].rank, r);
    EXPECT_NE(results[r].output.find("hello from rank " + std::to_string(r) + " of 4"),
              std::string::npos)
        << results[r].output;
    EXPECT_NE(results[r].output.find("stderr of rank " + std::to_string(r)), std::string::npos);
    // Only its own output.
    EXPECT_EQ(results[r].output.find("hello from rank " + std::to_string((r + 1) % 4)),
              std::string::npos);
  }
}

TEST(HarnessTest, FailuresExceptionsAndCrashesAreReported) {
  auto results = SpawnRanks(4, [](const RankContext& ctx) {
    if (ctx.rank == 1) {
      EXPECT_EQ(1, 2) << "assertion-in-rank-1";
    }
    if (ctx.rank == 2) throw std::runtime_error("exception-in-rank-2");
    if (ctx.rank == 3) std::abort();
  });
  ASSERT_EQ(results.size(), 4u);
  EXPECT_TRUE(results[0].ok());
  EXPECT_EQ(results[1].exit_code, kChildFailed);
  EXPECT_NE(results[1].output.find("assertion-in-rank-1"), std::string::npos) << results[1].output;
  EXPECT_EQ(results[2].exit_code, kChildFailed);
  EXPECT_NE(results[2].output.find("exception-in-rank-2"), std::string::npos) << results[2].output;
  EXPECT_EQ(results[3].term_signal, SIGABRT);
  EXPECT_NE(results[3].Describe().find("signal 6"), std::string::npos);
}

TEST(HarnessTest, TimeoutKillsEveryRemainingChild) {
  SpawnOptions opts;
  opts.timeout = std::chrono::milliseconds(800);
  auto t0 = std::chrono::steady_clock::now();
  auto results = SpawnRanks(2, [](const RankContext& ctx) {
    if (ctx.rank == 1) std::this_thread::sleep_for(std::chrono::seconds(60));
  }, opts);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_TRUE(results[0].ok());
  EXPECT_EQ(results[1].term_signal, SIGKILL);
  EXPECT_TRUE(results[1].timed_out);
  EXPECT_NE(results[1].Describe().find("timeout"), std::string::npos);
}

TEST(HarnessTest, KillAllOnFailureStopsTheOthersEarly) {
  SpawnOptions opts;
  opts.kill_all_on_failure = true;
  auto t0 = std::chrono::steady_clock::now();
  auto results = SpawnRanks(3, [](const RankContext& ctx) {
    if (ctx.rank == 0) throw std::runtime_error("rank 0 gives up");
    ctx.store->get("never");  // would wait for the 60 s store timeout
  }, opts);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  EXPECT_EQ(results[0].exit_code, kChildFailed);
  EXPECT_TRUE(results[1].killed_by_harness);
  EXPECT_TRUE(results[2].killed_by_harness);
}

TEST(HarnessTest, RunRanksAddsAFailureWithTheRanksOutput) {
  // RunRanks's ADD_FAILURE is checked from inside an outer rank: that rank must fail and
  // its output must carry the inner rank's number, status and output.
  auto outer = SpawnRanks(1, [](const RankContext&) {
    RunRanks(2, [](const RankContext& ctx) {
      if (ctx.rank == 1) {
        std::printf("inner-rank-output\n");
        std::exit(7);
      }
    });
  });
  ASSERT_EQ(outer.size(), 1u);
  EXPECT_EQ(outer[0].exit_code, kChildFailed);
  const std::string& out = outer[0].output;
  EXPECT_NE(out.find("rank 1 (pid"), std::string::npos) << out;
  EXPECT_NE(out.find("exit code 7"), std::string::npos) << out;
  EXPECT_NE(out.find("inner-rank-output"), std::string::npos) << out;
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
