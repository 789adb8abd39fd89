// The loopback backend, named comm scopes, Work futures and backend plugins.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "distributed/process_group_with_stream.h"
#include "paddle_like/dist/distributed.h"
#include "phi/core/distributed/store/hash_store.h"
#include "phi/core/errors.h"
#include "tests/harness/multiprocess.h"
#include "tests/paddle_like/dist_test_util.h"

namespace paddle_like {
namespace testing {
namespace {



void InitLocal(const std::string& backend) {
  dist::InitOptions o;
  o.backend = backend;
  o.store = std::make_shared<phi::distributed::HashStore>(std::chrono::seconds(10));
  o.rank = 0;
  o.world_size = 1;
  dist::init_process_group(o);
}

TEST(DistFake, OneRankInProcessWithRealResults) {
  InitLocal("fake");
  DenseTensor t = Ints({3, 4});
  dist::all_reduce(&t, dist::ReduceOp::AVG);
  EXPECT_EQ(At(t, 1), 4);
  std::vector<DenseTensor> list;
  dist::all_gather(&list, t);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(At(list[0], 0), 3);
  dist::destroy_process_group();
}

TEST(DistFake, RefusesMoreThanOneRank) {
  distributed::BackendOptions o;
  o.size = 2;
  EXPECT_THROW(distributed::BackendRegistry::Instance().Create("fake", o),
               phi::InvalidArgumentError);
}

TEST(DistFutures, ThenRunsAfterTheOpAndChains) {
  InitLocal("fake");
  DenseTensor t = Ints({5});
  auto work = dist::all_reduce(&t, dist::ReduceOp::SUM, {nullptr, true});
  std::atomic<int> order{0};
  int first = -1, second = -1;
  auto f = work->get_future()
               ->then([&](dist::Work& w) {
                 EXPECT_TRUE(w.is_completed());
                 EXPECT_TRUE(w.is_success());
                 first = order++;
               })
               ->then([&](dist::Work&) { second = order++; });
  f->wait();
  EXPECT_EQ(first, 0);
  EXPECT_EQ(second, 1);
  EXPECT_EQ(At(t, 0), 5);
  dist::destroy_process_group();
}

// Futures cost no thread each: 200 futures with then() callbacks, nobody waiting on most of
// them, add at most the one future-completion thread, and every callback still runs.
TEST(DistFutures, CallbacksRunWithoutAWaiterAndFuturesAddNoThreads) {
  RunRanks(2, [](const RankContext&) {
    InitGloo();
    DenseTensor warm = Ints({0});
    dist::all_reduce(&warm);
    auto f0 = dist::all_reduce(&warm, dist::ReduceOp::SUM, {nullptr, true})
                  ->get_future()
                  ->then([](dist::Work&) {});
    f0->wait();  // the completion thread exists from here on
    const int before = ThreadsOfThisProcess();
    std::atomic<int> ran{0};
    std::vector<DenseTensor> tensors;
    for (int i = 0; i < 200; ++i) tensors.push_back(Ints({1}));  // 200 buffers of their own
    std::vector<std::shared_ptr<dist::Future>> futures;
    for (auto& t : tensors) {
      auto work = dist::all_reduce(&t, dist::ReduceOp::SUM, {nullptr, true});
      futures.push_back(work->get_future()->then([&ran](dist::Work& w) {
        if (w.is_success()) ++ran;
      }));
    }
    EXPECT_LE(ThreadsOfThisProcess(), before) << "futures started threads";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (ran.load() < 200 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(ran.load(), 200) << "callbacks nobody waited for did not run";
    for (auto& f : futures) EXPECT_TRUE(f->done());
    EXPECT_EQ(At(tensors[199], 0), 2);
    dist::destroy_process_group();
  });
}

// Point-to-point ops in flight cost no thread each. Per process the threads are
//   T0 (main, store client, liveness heartbeat, watchdog) + 1 point-to-point reactor
//   + per group: its comm stream + Gloo's device loop + 1 future-completion thread,
// whatever number of sends, receives, tags and futures are in flight: here 4 groups with 50
// distinct tags each, 200 receives pending at once (and their futures), then 200 sends.
// The old design ran each (peer, tag, direction) on a thread of its own: 200 more.
TEST(DistFutures, PointToPointInFlightAddsNoThreads) {
  RunRanks(2, [](const RankContext& ctx) {
    InitGloo();
    std::vector<dist::GroupPtr> groups{nullptr};
    for (int g = 1; g < 4; ++g) groups.push_back(dist::new_group({0, 1}));
    for (auto& g : groups) {  // every group's communicator, streams and endpoint exist
      DenseTensor warm = Ints({0});
      dist::all_reduce(&warm, dist::ReduceOp::SUM, {g});
      dist::all_reduce(&warm, dist::ReduceOp::SUM, {g, true})->get_future()->then(
          [](dist::Work&) {})->wait();
    }
    const int before = ThreadsOfThisProcess();
    const int peer = 1 - ctx.rank;
    constexpr int kTags = 50;
    std::vector<DenseTensor> in, out;
    for (int i = 0; i < 4 * kTags; ++i) {
      in.push_back(Ints({-1}));
      out.push_back(Ints({1000 * ctx.rank + i}));
    }
    std::atomic<int> received{0};
    std::vector<std::shared_ptr<dist::Future>> futures;
    for (int g = 0; g < 4; ++g) {
      for (int tag = 0; tag < kTags; ++tag) {
        auto w = dist::irecv(&in[g * kTags + tag], peer, {groups[g], tag});
        futures.push_back(w->get_future()->then([&received](dist::Work& done) {
          if (done.is_success()) ++received;
        }));
      }
    }
    const int pending = ThreadsOfThisProcess();
    EXPECT_LE(pending, before) << "200 pending receives started threads";
    std::vector<dist::WorkPtr> sends;
    for (int g = 3; g >= 0; --g) {  // groups and tags in the opposite order of the receives
      for (int tag = kTags - 1; tag >= 0; --tag) {
        sends.push_back(dist::isend(out[g * kTags + tag], peer, {groups[g], tag}));
      }
    }
    EXPECT_LE(ThreadsOfThisProcess(), before) << "200 sends in flight started threads";
    for (auto& w : sends) w->wait();
    for (auto& f : futures) f->wait();
    EXPECT_EQ(received.load(), 4 * kTags);
    for (int i = 0; i < 4 * kTags; ++i) EXPECT_EQ(At(in[i], 0), 1000 * peer + i) << i;
    dist::destroy_process_group();
  });
}

TEST(DistFutures, WaitRethrowsTheOpsErrorAndThenCallbacksSeeIt) {
  RunRanks(2, [](const RankContext& ctx) {
    dist::InitOptions o;
    o.backend = "gloo";
    o.timeout = std::chrono::seconds(1);
    dist::init_process_group(o);
    if (ctx.rank == 0) {  // rank 1 never joins: the op times out
      DenseTensor t = Ints({1});
      auto work = dist::all_reduce(&t, dist::ReduceOp::SUM, {nullptr, true});
      auto future = work->get_future();
      bool saw_error = false;
      auto chained = future->then([&](dist::Work& w) { saw_error = w.exception() != nullptr; });
      EXPECT_THROW(future->wait(), phi::EnforceNotMet);
      chained->wait();  // the callback handled it: no error here
      EXPECT_TRUE(saw_error);
    }
    ctx.store->set("done/" + std::to_string(ctx.rank), "1");
    ctx.store->wait({"done/0", "done/1"});
  });
}

TEST(DistRecordComm, TheNameIsInTheFlightRecorderAndInErrors) {
  RunRanks(2, [](const RankContext& ctx) {
    dist::InitOptions o;
    o.backend = "gloo";
    o.timeout = std::chrono::seconds(2);
    dist::init_process_group(o);
    DenseTensor t = Ints({1});
    {
      dist::record_comm scope("grad bucket 7");
      dist::all_reduce(&t);
    }
    auto* pg = dynamic_cast<distributed::ProcessGroupWithStream*>(
        dist::world()->backend_for("cpu"));
    ASSERT_NE(pg, nullptr);
    EXPECT_NE(pg->DumpRecentOps().find("'grad bucket 7'"), std::string::npos)
        << pg->DumpRecentOps();
    if (ctx.rank == 0) {  // rank 1 never joins: the timeout names the scope
      dist::record_comm scope("tp all-gather");
      try {
        dist::all_reduce(&t);
        ADD_FAILURE() << "all_reduce without rank 1 returned";
      } catch (const phi::EnforceNotMet& e) {
        EXPECT_NE(std::string(e.what()).find("'tp all-gather'"), std::string::npos) << e.what();
      }
      ctx.store->set("done", "1");
    } else {
      ctx.store->wait({"done"}, std::chrono::seconds(30));
    }
  });
}

TEST(DistWork, AbortEndsAHungOpNowAndTheGroupRaisesAfter) {
  RunRanks(2, [](const RankContext& ctx) {
    InitGloo(std::chrono::seconds(20));
    DenseTensor t = Ints({1});
    dist::all_reduce(&t);  // connected
    if (ctx.rank == 1) {  // never joins the next one
      ctx.store->wait({"aborted"}, std::chrono::seconds(60));
      return;
    }
    auto work = dist::all_reduce(&t, dist::ReduceOp::SUM, {nullptr, true});
    EXPECT_FALSE(work->is_completed());
    auto start = std::chrono::steady_clock::now();
    work->abort();
    EXPECT_TRUE(work->is_completed());
    EXPECT_FALSE(work->is_success());
    try {
      work->wait();
      ADD_FAILURE() << "an aborted op's wait returned";
    } catch (const phi::UnavailableError& e) {
      EXPECT_NE(std::string(e.what()).find("aborted"), std::string::npos) << e.what();
    }
    DenseTensor u = Ints({1});
    EXPECT_THROW(dist::broadcast(&u, 0), phi::EnforceNotMet) << "the group must be unusable";
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5))
        << "abort did not end the wait at once";
    ctx.store->set("aborted", "1");
    // The stuck call ends at the group's timeout on the comm thread; destroying the group
    // waits for that (bounded), then frees everything.
    dist::destroy_process_group();
  });
}

// Abort closes the aborted group's connections: a peer blocked in an op on them fails at once
// (not at the group's 20 s timeout), and another group of the same ranks keeps working.
TEST(DistWork, AbortClosesTheConnectionsSoAPeerInAnOpFailsAtOnce) {
  RunRanks(2, [](const RankContext& ctx) {
    InitGloo(std::chrono::seconds(20));
    auto other = dist::new_group({0, 1});
    DenseTensor t = Ints({1});
    dist::all_reduce(&t);  // connected
    dist::all_reduce(&t, dist::ReduceOp::SUM, {other});
    if (ctx.rank == 1) {  // rank 0 aborts instead of joining
      auto start = std::chrono::steady_clock::now();
      EXPECT_THROW(dist::all_reduce(&t), phi::EnforceNotMet);
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5))
          << "the peer's abort should end this op at once, not at the group's timeout";
    } else {
      DenseTensor u = Ints({0});
      auto work = dist::irecv(&u, 1, {nullptr, 77});  // nobody sends: in flight until aborted
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 1 is in its op
      work->abort();
    }
    DenseTensor v = Ints({ctx.rank + 1});
    dist::all_reduce(&v, dist::ReduceOp::SUM, {other});
    EXPECT_EQ(At(v, 0), 3) << "another group of the same ranks must keep working";
  });
}

TEST(DistPlugins, ABackendFromASharedLibrary) {
  ASSERT_FALSE(dist::is_backend_available("plugin_gloo"));
  EXPECT_THROW(dist::load_backend_plugin("/nonexistent/plugin.so"), phi::InvalidArgumentError);
  dist::load_backend_plugin(TEST_BACKEND_PLUGIN);
  ASSERT_TRUE(dist::is_backend_available("PLUGIN_GLOO"));
  InitLocal("plugin_gloo");
  DenseTensor t = Ints({9});
  dist::broadcast(&t, 0);
  EXPECT_EQ(At(t, 0), 9);
  dist::destroy_process_group();
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
