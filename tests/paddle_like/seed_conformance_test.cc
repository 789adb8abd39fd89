// A program ported from the seed (tensorplay.distributed) gets the seed's meaning from
// paddle_like::dist: parent-group ranks for split/shrink, the non-member rule, async_op on
// the staged list forms, Work::result() for every op, wait(timeout), destroy, the
// rendezvous timeout and the backend-name rules. Real ranks (fork harness, real TCPStore,
// real Gloo). docs/api.md has the row of each.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "paddle_like/dist/distributed.h"
#include "phi/core/errors.h"
#include "tests/harness/multiprocess.h"
#include "tests/paddle_like/dist_test_util.h"

namespace paddle_like {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST(SeedConformance, SplitGroupTakesParentRanksInTheirOrder) {
  RunRanks(3, [](const RankContext& ctx) {
    InitGloo();
    const int r = ctx.rank;
    auto parent = dist::new_group({1, 2});
    // Parent rank 1 is global rank 2: only it is in the split.
    auto solo = dist::split_group(parent, {{1}});
    EXPECT_EQ(solo->ranks(), std::vector<int>{2});
    EXPECT_EQ(solo->is_member(), r == 2);
    // The order given is kept: group rank 0 of {{2, 0}} is global rank 2.
    auto pair = dist::split_group(nullptr, {{2, 0}});
    EXPECT_EQ(pair->ranks(), (std::vector<int>{2, 0}));
    if (r != 1) {
      DenseTensor t = Ints({r});
      dist::broadcast(&t, 2, {pair, false});
      EXPECT_EQ(At(t, 0), 2);
      EXPECT_EQ(dist::get_rank(pair), r == 2 ? 0 : 1);
    }
    EXPECT_THROW(dist::split_group(parent, {{2}}), phi::InvalidArgumentError);  // size 2
    EXPECT_THROW(dist::split_group(parent, {}), phi::InvalidArgumentError);
    dist::barrier();
    dist::destroy_process_group();
  });
}

TEST(SeedConformance, ShrinkGroupTakesParentRanks) {
  RunRanks(3, [](const RankContext& ctx) {
    InitGloo();
    auto parent = dist::new_group({1, 2});
    EXPECT_THROW(dist::shrink_group({}, parent), phi::InvalidArgumentError);
    if (ctx.rank == 2) {
      // Parent rank 0 is global rank 1.
      auto g = dist::shrink_group({0}, parent);
      EXPECT_EQ(g->ranks(), std::vector<int>{2});
      DenseTensor t = Ints({5});
      dist::all_reduce(&t, dist::ReduceOp::SUM, {g, false});
      EXPECT_EQ(At(t, 0), 5);
    }
    EXPECT_THROW(dist::shrink_group({2}, parent), phi::InvalidArgumentError);  // size 2
    dist::barrier();
    dist::destroy_process_group();
  });
}

TEST(SeedConformance, RankOfAGroupThisRankIsNotInRaises) {
  RunRanks(2, [](const RankContext& ctx) {
    InitGloo();
    auto g = dist::new_group({0});
    if (ctx.rank == 1) {
      EXPECT_THROW(dist::get_rank(g), phi::InvalidArgumentError);
      EXPECT_THROW(dist::get_world_size(g), phi::InvalidArgumentError);
    } else {
      EXPECT_EQ(dist::get_rank(g), 0);
      EXPECT_EQ(dist::get_world_size(g), 1);
    }
    dist::destroy_process_group();
  });
}

TEST(SeedConformance, StagedListFormsHonourAsyncAndWriteTheCallersTensors) {
  RunRanks(3, [](const RankContext& ctx) {
    InitGloo();
    const int r = ctx.rank, n = ctx.world_size;
    // A slow rank 0: the others' async calls return before the op can have ended.
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::vector<DenseTensor> outs;
    for (int q = 0; q < n; ++q) outs.push_back(Ints({-1, -1}));
    const void* first = outs[0].data();
    auto t0 = Clock::now();
    auto w = dist::all_gather(&outs, Ints({r, 10 * r}), {nullptr, /*async_op=*/true});
    if (r != 0) {
      EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(200)) << "all_gather blocked";
    }
    ASSERT_TRUE(w->wait());
    EXPECT_EQ(outs[0].data(), first) << "the caller's tensor was replaced";
    for (int q = 0; q < n; ++q) EXPECT_EQ(Values(outs[q]), (std::vector<int64_t>{q, 10 * q}));
    EXPECT_EQ(w->result().size(), static_cast<size_t>(n));

    std::vector<std::vector<DenseTensor>> lists(2);
    for (int q = 0; q < n; ++q) {
      lists[0].push_back(Ints({-1}));
      lists[1].push_back(Ints({-1, -1, -1}));
    }
    const void* mine = lists[1][2].data();
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    t0 = Clock::now();
    auto wc = dist::all_gather_coalesced(&lists, {Ints({r}), Ints({r, r, r})},
                                         {nullptr, /*async_op=*/true});
    if (r != 0) {
      EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(200)) << "coalesced blocked";
    }
    ASSERT_TRUE(wc->wait());
    EXPECT_EQ(lists[1][2].data(), mine) << "all_gather_coalesced replaced the outputs";
    for (int q = 0; q < n; ++q) {
      EXPECT_EQ(Values(lists[0][q]), std::vector<int64_t>{q});
      EXPECT_EQ(Values(lists[1][q]), (std::vector<int64_t>{q, q, q}));
    }
    EXPECT_EQ(wc->result().size(), static_cast<size_t>(2 * n));
    dist::destroy_process_group();
  });
}

TEST(SeedConformance, WorkResultHoldsTheOutputsOfEveryOp) {
  RunRanks(2, [](const RankContext& ctx) {
    InitGloo();
    const int r = ctx.rank, n = ctx.world_size;
    auto same = [](const dist::WorkPtr& w, const DenseTensor& t) {
      return w->result().size() == 1 && w->result()[0].data() == t.data();
    };
    DenseTensor a = Ints({r});
    EXPECT_TRUE(same(dist::reduce(&a, 0), a)) << "reduce";
    DenseTensor s = Ints({-1});
    std::vector<DenseTensor> parts{Ints({7}), Ints({8})};
    EXPECT_TRUE(same(dist::scatter(&s, r == 0 ? parts : std::vector<DenseTensor>{}, 0), s));
    EXPECT_EQ(At(s, 0), 7 + r);
    DenseTensor rs = Ints({0});
    EXPECT_TRUE(same(dist::reduce_scatter_tensor(&rs, Ints({1, 2})), rs)) << "reduce_scatter";
    DenseTensor rl = Ints({0});
    EXPECT_TRUE(same(dist::reduce_scatter(&rl, {Ints({1}), Ints({2})}), rl));
    DenseTensor a2a = Ints({0, 0});
    EXPECT_TRUE(same(dist::all_to_all_single(&a2a, Ints({r, r})), a2a)) << "all_to_all_single";
    std::vector<DenseTensor> a2a_out{Ints({0}), Ints({0})};
    EXPECT_EQ(dist::all_to_all(&a2a_out, {Ints({r}), Ints({r})})->result().size(), 2u);
    std::vector<DenseTensor> gl;
    if (r == 0) gl = {Ints({0}), Ints({0})};
    auto gw = dist::gather(Ints({r}), &gl, 0);
    EXPECT_EQ(gw->result().size(), r == 0 ? 2u : 0u) << "gather";
    DenseTensor x = Ints({1}), y = Ints({2});
    EXPECT_EQ(dist::all_reduce_coalesced({&x, &y})->result().size(), 2u);
    EXPECT_EQ(At(y, 0), 2 * n);
    dist::destroy_process_group();
  });
}

TEST(SeedConformance, WaitWithATimeoutReturnsFalseAndLeavesTheOpRunning) {
  RunRanks(2, [](const RankContext& ctx) {
    InitGloo();
    DenseTensor t = Ints({1});
    if (ctx.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(800));
    auto w = dist::all_reduce(&t, dist::ReduceOp::SUM, {nullptr, /*async_op=*/true});
    if (ctx.rank == 0) {
      EXPECT_FALSE(w->wait(std::chrono::milliseconds(100)));
      EXPECT_FALSE(w->is_completed());
    }
    EXPECT_TRUE(w->wait());
    EXPECT_EQ(At(t, 0), 2);
    dist::destroy_process_group();
  });
}

TEST(SeedConformance, DestroyReleasesTheGroupWhileHandlesLive) {
  RunRanks(2, [](const RankContext& ctx) {
    InitGloo();
    auto g = dist::new_group({0, 1});
    DenseTensor t = Ints({1});
    dist::all_reduce(&t, dist::ReduceOp::SUM, {g, false});
    dist::destroy_process_group(g);
    EXPECT_TRUE(g->destroyed());
    try {
      dist::all_reduce(&t, dist::ReduceOp::SUM, {g, false});
      ADD_FAILURE() << "a destroyed group ran an op";
    } catch (const phi::PreconditionNotMetError& e) {
      EXPECT_NE(std::string(e.what()).find("destroyed"), std::string::npos) << e.what();
    }
    dist::all_reduce(&t);  // the world is untouched
    EXPECT_EQ(At(t, 0), 4);
    dist::destroy_process_group();
  });
}

TEST(SeedConformance, InitTimeoutBoundsTheRendezvous) {
  RunRanks(2, [](const RankContext& ctx) {
    if (ctx.rank == 1) return;  // never joins
    // Rank 0 hosts the store (plain env://, no launcher) and waits for the world to register.
    ::unsetenv("PADDLE_STORE_HOSTED");
    ::setenv("MASTER_PORT", std::to_string(FreePort()).c_str(), 1);
    dist::InitOptions o;
    o.backend = "gloo";
    o.timeout = std::chrono::milliseconds(1500);
    const auto t0 = Clock::now();
    EXPECT_THROW(dist::init_process_group(o), phi::TimeoutError);
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(15));
  });
}

TEST(SeedConformance, BackendNamesFollowTheSeedsRules) {
  auto creator = [](const distributed::BackendOptions&) {
    return std::shared_ptr<distributed::ProcessGroup>();
  };
  EXPECT_THROW(dist::register_backend("a:b", creator), phi::InvalidArgumentError);
  EXPECT_THROW(dist::register_backend("a,b", creator), phi::InvalidArgumentError);
  EXPECT_THROW(dist::register_backend("", creator), phi::InvalidArgumentError);
  dist::register_backend("seed_conformance_cpu", creator);  // devices default to cpu
  EXPECT_TRUE(dist::is_backend_available("seed_conformance_cpu"));
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
