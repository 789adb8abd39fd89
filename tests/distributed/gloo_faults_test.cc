// Failures end as errors on every live rank, never as a hang: a rank killed with SIGKILL
// mid-collective, and a collective one rank never calls.
#include <gtest/gtest.h>

#include <signal.h>

#include "distributed/process_group_gloo.h"
#include "tests/distributed/collective_test_util.h"
#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

using distributed::ProcessGroupGloo;
using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = std::chrono::seconds(5);

TEST(GlooFaults, RankKilledDuringLongAllReduceRaisesOnAllOthers) {
  SpawnOptions opts;
  opts.timeout = std::chrono::seconds(60);
  const int world = 3, victim = 2;
  auto results = SpawnRanks(world, [&](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, kTimeout);
    DenseTensor t = MakeInput(DataType::FLOAT32, 4 << 20, ctx.rank, ReduceOp::SUM);  // 16 MiB
    pg.Barrier()->Wait();
    auto last_ok = Clock::now();
    for (int iter = 0; iter < 1000; ++iter) {
      if (ctx.rank == victim && iter == 3) {
        // Die in the middle of the next collective: the peers are already inside it.
        auto task = pg.AllReduce(&t, t, {}, false);
        raise(SIGKILL);
      }
      try {
        pg.AllReduce(&t, t, {ReduceOp::MAX, 1.0}, true);
        last_ok = Clock::now();
      } catch (const phi::EnforceNotMet& e) {
        auto waited = Clock::now() - last_ok;
        std::string msg = e.what();
        fprintf(stderr, "rank %d caught after %lld ms: %s\n", ctx.rank,
                static_cast<long long>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()),
                msg.c_str());
        EXPECT_LT(waited, kTimeout + std::chrono::seconds(5)) << "raised too late";
        EXPECT_NE(msg.find("AllReduce seq"), std::string::npos) << msg;
        EXPECT_NE(msg.find("ProcessGroupGloo(gid 0"), std::string::npos) << msg;
        EXPECT_TRUE(e.code() == phi::ErrorCode::kUnavailable ||
                    e.code() == phi::ErrorCode::kTimeout)
            << msg;
        return;
      }
    }
    ADD_FAILURE() << "rank " << ctx.rank << " never noticed the dead peer";
  }, opts);
  ASSERT_EQ(static_cast<int>(results.size()), world);
  for (const auto& r : results) {
    if (r.rank == victim) {
      EXPECT_EQ(r.term_signal, SIGKILL) << r.Describe() << "\n" << r.output;
    } else {
      EXPECT_TRUE(r.ok()) << r.Describe() << "\n" << r.output;
      std::cout << "survivor " << r.rank << " reported:\n" << r.output;
      EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung";
    }
  }
}

TEST(GlooFaults, CollectiveOneRankNeverCallsTimesOutNamingTheOp) {
  RunRanks(2, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 7, std::chrono::seconds(2));
    pg.Barrier()->Wait();
    if (ctx.rank == 1) {
      ctx.store->wait({"rank0_done"}, std::chrono::seconds(30));
      return;  // never calls the broadcast
    }
    DenseTensor t = MakeInput(DataType::INT64, 16, ctx.rank, ReduceOp::SUM);
    auto start = Clock::now();
    try {
      pg.Broadcast(&t, t, {1, 0}, true);
      ADD_FAILURE() << "broadcast without the root returned";
    } catch (const phi::TimeoutError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("Broadcast seq 2"), std::string::npos) << msg;
      EXPECT_NE(msg.find("gid 7"), std::string::npos) << msg;
      EXPECT_LT(Clock::now() - start, std::chrono::seconds(7));
    }
    ctx.store->set("rank0_done", "1");
  });
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
