// shrink_group with a rank killed by SIGKILL: the survivors build the new world through the
// store and never contact the dead rank; and the misuse that must raise.
#include <gtest/gtest.h>

#include <signal.h>

#include <iostream>

#include "paddle_like/dist/distributed.h"
#include "paddle_like/dist/elastic.h"
#include "phi/core/errors.h"
#include "phi/core/flags.h"
#include "tests/harness/multiprocess.h"
#include "tests/paddle_like/dist_test_util.h"

namespace paddle_like {
namespace testing {
namespace {



void Init() { InitGloo(std::chrono::seconds(5)); }

TEST(DistShrink, SurvivorsOfAKilledRankFormANewWorld) {
  SpawnOptions opts;
  opts.timeout = std::chrono::seconds(60);
  const int victim = 2;
  auto results = SpawnRanks(4, [&](const RankContext& ctx) {
    Init();
    DenseTensor t = Ints({1});
    dist::all_reduce(&t);  // every pair of the world is connected now
    ASSERT_EQ(At(t, 0), 4);
    if (ctx.rank == victim) raise(SIGKILL);
    DenseTensor u = Ints({1});
    EXPECT_THROW(dist::all_reduce(&u), phi::EnforceNotMet) << "the dead rank went unnoticed";
    dist::ShrinkOptions so;
    so.abort = true;
    auto world = dist::shrink_group({victim}, nullptr, so);
    EXPECT_EQ(world, dist::world()) << "shrinking the world replaces it";
    EXPECT_EQ(dist::get_world_size(), 3);
    const int me = ctx.rank < victim ? ctx.rank : ctx.rank - 1;  // renumbered in old order
    EXPECT_EQ(dist::get_rank(), me);
    DenseTensor v = Ints({ctx.rank});
    dist::all_reduce(&v);
    EXPECT_EQ(At(v, 0), 0 + 1 + 3);
    DenseTensor b = Ints({me});
    dist::broadcast(&b, 2);  // the new rank 2 (old rank 3)
    EXPECT_EQ(At(b, 0), 2);
    dist::destroy_process_group();
  }, opts);
  for (const auto& r : results) {
    if (r.rank == victim) {
      EXPECT_EQ(r.term_signal, SIGKILL) << r.output;
    } else {
      EXPECT_TRUE(r.ok()) << r.Describe() << "\n" << r.output;
    }
  }
}

// The misattributed blame: rank 2 is killed; rank 3, whose ring neighbour it was, fails
// first and aborts its connections to shrink the group; rank 0, which was waiting on rank 3,
// then fails on rank 3's closed connection. Its error must not call rank 3 dead: the
// liveness facts say rank 3 is alive and aborted, and rank 2 is the one that died.
TEST(DistShrink, ErrorsBlameTheKilledRankNotTheOneThatAbortedAfterIt) {
  SpawnOptions opts;
  opts.timeout = std::chrono::seconds(60);
  const int victim = 2;
  auto results = SpawnRanks(4, [&](const RankContext& ctx) {
    FLAGS_cpu_shm_transport = false;  // over TCP, as across hosts
    Init();
    dist::GroupPtr g = dist::new_group({0, 1, 2, 3});
    DenseTensor t = Ints({1});
    dist::all_reduce(&t, dist::ReduceOp::SUM, {.group = g});  // every pair is connected
    ASSERT_EQ(At(t, 0), 4);
    if (ctx.rank == victim) raise(SIGKILL);
    DenseTensor u = Ints({1});
    std::string error;
    try {
      dist::all_reduce(&u, dist::ReduceOp::SUM, {.group = g});
    } catch (const phi::EnforceNotMet& e) {
      error = e.what();
    }
    ASSERT_FALSE(error.empty()) << "the dead rank went unnoticed";
    std::cout << "rank " << ctx.rank << " error: " << error << std::endl;
    EXPECT_NE(error.find("rank 2: dead"), std::string::npos) << error;
    EXPECT_EQ(error.find("rank 3: dead"), std::string::npos) << error;
    if (ctx.rank == 0 && error.find("is rank 3") != std::string::npos) {
      EXPECT_NE(error.find("rank 3: alive, aborted"), std::string::npos) << error;
    }
    auto shrunk = dist::agree_and_shrink(g);
    ASSERT_TRUE(shrunk.group);
    EXPECT_EQ(shrunk.lost, std::vector<int>{victim});
    DenseTensor v = Ints({ctx.rank});
    dist::all_reduce(&v, dist::ReduceOp::SUM, {.group = shrunk.group});
    EXPECT_EQ(At(v, 0), 0 + 1 + 3);
    dist::destroy_process_group();
  }, opts);
  for (const auto& r : results) {
    if (r.rank == victim) {
      EXPECT_EQ(r.term_signal, SIGKILL) << r.output;
    } else {
      EXPECT_TRUE(r.ok()) << r.Describe() << "\n" << r.output;
    }
  }
}

TEST(DistShrink, MisuseRaises) {
  RunRanks(3, [](const RankContext& ctx) {
    Init();
    if (ctx.rank == 1) {
      EXPECT_THROW(dist::shrink_group({1}), phi::InvalidArgumentError);  // excluded caller
    }
    EXPECT_THROW(dist::shrink_group({0, 1, 2}), phi::InvalidArgumentError);  // everyone
    EXPECT_THROW(dist::shrink_group({7}), phi::InvalidArgumentError);        // not a member
    // A subgroup shrinks into a new group; the world stays.
    auto all = dist::new_group({0, 1, 2});
    if (ctx.rank != 1) {
      auto g = dist::shrink_group({1}, all);
      EXPECT_EQ(g->ranks(), (std::vector<int>{0, 2}));
      DenseTensor t = Ints({ctx.rank});
      dist::all_reduce(&t, dist::ReduceOp::SUM, {g, false});
      EXPECT_EQ(At(t, 0), 2);
      EXPECT_EQ(dist::get_world_size(), 3);
    }
    dist::barrier();
    dist::destroy_process_group();
  });
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
