// Failures end as errors on every live rank, never as a hang: a rank killed with SIGKILL
// mid-collective, and a collective one rank never calls.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include <thread>

#include "distributed/process_group_gloo.h"
#include "phi/core/flags.h"
#include "tests/distributed/collective_test_util.h"
#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

using distributed::ProcessGroupGloo;
using Clock = std::chrono::steady_clock;
constexpr auto kTimeout = std::chrono::seconds(5);

// The last of `world` ranks is killed mid-all-reduce; every survivor raises in time. `shm`:
// over shared memory (the default on one host) or over TCP.
void KillOneRankDuringLongAllReduce(int world, bool shm) {
  SpawnOptions opts;
  opts.timeout = std::chrono::seconds(60);
  const int victim = world - 1;
  auto results = SpawnRanks(world, [&](const RankContext& ctx) {
    FLAGS_cpu_shm_transport = shm;
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, kTimeout);
    DenseTensor t = MakeInput(DataType::FLOAT32, 4 << 20, ctx.rank, ReduceOp::SUM);  // 16 MiB
    pg.Barrier()->Wait();
    auto last_ok = Clock::now();
    for (int iter = 0; iter < 1000; ++iter) {
      if (ctx.rank == victim && iter == 3) {
        // Die in the middle of the next collective: the peers are already inside it.
        // The same op as the survivors (so only the death differs: the agreement check
        // would rightly report SUM against MAX if the exchange finished before the kill).
        auto task = pg.AllReduce(&t, t, {ReduceOp::MAX, 1.0}, false);
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
        // When the failed connection is named, it is a peer's (the victim, or a survivor
        // that already gave up), never this rank's own.
        EXPECT_EQ(msg.find("is rank " + std::to_string(ctx.rank) + ":"), std::string::npos)
            << msg;
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

// Over TCP two ranks run the two-rank all-reduce (gloo_two_rank_allreduce.cc), three Gloo's ring.
TEST(GlooFaults, RankKilledDuringLongAllReduceRaisesOnAllOthers) {
  for (const int world : {2, 3}) KillOneRankDuringLongAllReduce(world, /*shm=*/false);
}

TEST(GlooFaults, RankKilledDuringLongSharedMemoryAllReduceRaisesOnAllOthers) {
  for (const int world : {2, 3}) KillOneRankDuringLongAllReduce(world, /*shm=*/true);
}

// A peer that stops mid-op (SIGSTOP: alive, silent) in a large two-rank all-reduce: the
// survivor times out at the group's timeout, says so, and names the silent rank. Over TCP
// (the two-rank all-reduce) the store's roll call names it; over shared memory the step it
// never announced does.
void PeerStoppedMidTwoRankLargeAllReduce(bool shm) {
  SpawnOptions opts;
  opts.timeout = std::chrono::seconds(60);
  auto results = SpawnRanks(2, [&](const RankContext& ctx) {
    FLAGS_cpu_shm_transport = shm;
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, kTimeout);
    DenseTensor t = MakeInput(DataType::FLOAT32, 4 << 20, ctx.rank, ReduceOp::SUM);  // 16 MiB
    ctx.store->set("pid/" + std::to_string(ctx.rank), std::to_string(::getpid()));
    pg.Barrier()->Wait();
    for (int iter = 0; iter < 3; ++iter) pg.AllReduce(&t, t, {ReduceOp::MAX, 1.0}, true);
    if (ctx.rank == 1) {
      auto task = pg.AllReduce(&t, t, {ReduceOp::MAX, 1.0}, false);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // into the stream
      ::raise(SIGSTOP);  // rank 0 kills it once it has raised
      ADD_FAILURE() << "rank 1 ran on after SIGSTOP";
      return;
    }
    const auto start = Clock::now();
    try {
      pg.AllReduce(&t, t, {ReduceOp::MAX, 1.0}, true);
      ADD_FAILURE() << "the all-reduce with a stopped peer succeeded";
    } catch (const phi::EnforceNotMet& e) {
      const std::string msg = e.what();
      const auto waited = Clock::now() - start;
      EXPECT_EQ(e.code(), phi::ErrorCode::kTimeout) << msg;
      EXPECT_GE(waited, kTimeout - std::chrono::milliseconds(100)) << msg;
      EXPECT_LT(waited, kTimeout + std::chrono::seconds(3)) << msg;
      EXPECT_NE(msg.find(shm ? "rank(s) 1 did not join it" : "silent: rank(s) 1"),
                std::string::npos)
          << msg;
      std::fprintf(stderr, "rank 0 raised after %lld ms: %s\n",
                   static_cast<long long>(
                       std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()),
                   msg.c_str());
    }
    const std::string pid = ctx.store->get_string("pid/1");
    ::kill(static_cast<pid_t>(std::stoll(pid)), SIGKILL);
  }, opts);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].ok()) << results[0].Describe() << "\n" << results[0].output;
  EXPECT_EQ(results[1].term_signal, SIGKILL) << results[1].Describe() << "\n" << results[1].output;
}

TEST(GlooFaults, PeerStoppedMidTwoRankLargeAllReduceTimesOutNamingIt) {
  PeerStoppedMidTwoRankLargeAllReduce(/*shm=*/false);
}

TEST(GlooFaults, PeerStoppedMidSharedMemoryAllReduceTimesOutNamingIt) {
  PeerStoppedMidTwoRankLargeAllReduce(/*shm=*/true);
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

TEST(GlooFaults, WaitHonoursItsDeadlineAndTheOpCanStillFinish) {
  RunRanks(2, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(30));
    pg.Barrier()->Wait();
    DenseTensor t = MakeInput(DataType::FLOAT64, 32, ctx.rank, ReduceOp::SUM);
    if (ctx.rank == 1) {
      ctx.store->wait({"waited"});
      pg.AllReduce(&t, t, {}, true);
      return;
    }
    auto task = pg.AllReduce(&t, t, {}, false);
    auto start = Clock::now();
    try {
      task->Wait(std::chrono::milliseconds(300));
      ADD_FAILURE() << "Wait returned although the peer has not joined";
    } catch (const phi::TimeoutError& e) {
      std::string msg = e.what();
      auto waited = Clock::now() - start;
      EXPECT_GE(waited, std::chrono::milliseconds(290));
      EXPECT_LT(waited, std::chrono::seconds(3));
      EXPECT_NE(msg.find("AllReduce seq 2"), std::string::npos) << msg;
      EXPECT_NE(msg.find("within 300 ms"), std::string::npos) << msg;
      EXPECT_NE(msg.find("flight recorder"), std::string::npos) << msg;
      EXPECT_NE(msg.find("Barrier"), std::string::npos) << "recorder lacks the barrier: " << msg;
    }
    EXPECT_FALSE(task->IsCompleted());
    ctx.store->set("waited", "1");
    EXPECT_TRUE(task->Wait(std::chrono::seconds(20)));
    std::vector<Val> ref(32);
    for (int64_t i = 0; i < 32; ++i) ref[i] = ReduceRef(DataType::FLOAT64, ReduceOp::SUM, 2, i, 1.0);
    ExpectClose(t, ref, "allreduce after a timed-out wait");
  });
}

TEST(GlooFaults, MismatchedCollectivesAreNamedOnEveryRank) {
  RunRanks(3, [](const RankContext& ctx) {
    FLAGS_collective_check = "store";
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 3, std::chrono::seconds(10));
    DenseTensor t = MakeInput(DataType::FLOAT32, 8, ctx.rank, ReduceOp::SUM);
    pg.AllReduce(&t, t, {}, true);  // agreeing ops pass the check
    try {
      if (ctx.rank == 1) {
        pg.Broadcast(&t, t, {0, 0}, true);
      } else {
        pg.AllReduce(&t, t, {}, true);
      }
      ADD_FAILURE() << "rank " << ctx.rank << ": mismatch not detected";
    } catch (const phi::InvalidArgumentError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("Detected mismatch between collectives"), std::string::npos) << msg;
      EXPECT_NE(msg.find("Rank 1 is running collective: Broadcast(8 x float32, root 0) (collective #2)"),
                std::string::npos) << msg;
      EXPECT_NE(msg.find("Rank 0 is running collective: AllReduce(8 x float32, SUM) (collective #2)"),
                std::string::npos) << msg;
    }
  });
}

TEST(GlooFaults, CollectiveCheckNamesTheRankThatNeverArrives) {
  RunRanks(3, [](const RankContext& ctx) {
    FLAGS_collective_check = "store";
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 4, std::chrono::seconds(2));
    DenseTensor t = MakeInput(DataType::FLOAT32, 8, ctx.rank, ReduceOp::SUM);
    if (ctx.rank == 2) {
      ctx.store->add("done", 0);
      ctx.store->wait({"others_done"}, std::chrono::seconds(30));
      return;
    }
    try {
      pg.AllReduce(&t, t, {}, true);
      ADD_FAILURE() << "allreduce without rank 2 returned";
    } catch (const phi::TimeoutError& e) {
      EXPECT_NE(std::string(e.what()).find("rank(s) 2 did not reach AllReduce(8 x float32, SUM) (collective #1)"),
                std::string::npos)
          << e.what();
    }
    if (ctx.store->add("done", 1) == 2) ctx.store->set("others_done", "1");
  });
}

TEST(GlooFaults, DestroyingAGroupWithAHungOpReturnsWithinTheTimeout) {
  RunRanks(2, [](const RankContext& ctx) {
    auto pg = std::make_unique<ProcessGroupGloo>(ctx.store, ctx.rank, ctx.world_size, 9,
                                                 std::chrono::seconds(2));
    pg->Barrier()->Wait();
    if (ctx.rank == 1) {
      ctx.store->wait({"rank0_destroyed"}, std::chrono::seconds(30));
      return;  // never joins the all-reduce
    }
    DenseTensor t = MakeInput(DataType::FLOAT32, 64, ctx.rank, ReduceOp::SUM);
    auto task = pg->AllReduce(&t, t, {}, /*sync_op=*/false);
    auto start = Clock::now();
    pg.reset();  // the op is stuck waiting for rank 1
    auto took = Clock::now() - start;
    EXPECT_LT(took, std::chrono::seconds(7)) << "destroying the group hung";
    EXPECT_TRUE(task->IsCompleted());
    EXPECT_THROW(task->Wait(), phi::EnforceNotMet) << "the hung op must end as an error";
    ctx.store->set("rank0_destroyed", "1");
  });
}

// Aborting the group wakes this rank's own op blocked on the connections (the sockets are
// shut down, not only closed): the group goes away at once, not at the group's timeout.
// A small all-reduce (its payload rides in the agreement exchange) and a large one (blocked
// in the agreement check before it), both on the two-rank peer connection.
TEST(GlooFaults, AbortWakesThisRanksOwnOpBlockedOnTheConnections) {
  for (int64_t numel : {int64_t{64}, int64_t{1} << 20}) {
    RunRanks(2, [numel](const RankContext& ctx) {
      const std::string done = "rank0_done_" + std::to_string(numel);
      auto pg = std::make_unique<ProcessGroupGloo>(ctx.store, ctx.rank, ctx.world_size, 9,
                                                   std::chrono::seconds(30));
      pg->Barrier()->Wait();
      if (ctx.rank == 1) {
        ctx.store->wait({done}, std::chrono::seconds(60));
        return;  // never joins the all-reduce
      }
      DenseTensor t = MakeInput(DataType::FLOAT32, numel, ctx.rank, ReduceOp::SUM);
      auto task = pg->AllReduce(&t, t, {}, /*sync_op=*/false);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // blocked in Gloo now
      auto start = Clock::now();
      pg->AbortComm("the test aborts");
      pg.reset();  // waits for the op to end
      EXPECT_LT(Clock::now() - start, std::chrono::seconds(5))
          << numel << " elements: the aborted op ran on to the group's timeout";
      EXPECT_TRUE(task->IsCompleted());
      EXPECT_THROW(task->Wait(), phi::EnforceNotMet);
      ctx.store->set(done, "1");
    });
  }
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
