// A program ported from the seed (tensorplay.distributed) gets the seed's meaning from
// paddle_like::dist: parent-group ranks for split/shrink, the non-member rule, async_op on
// the staged list forms, Work::result() for every op, wait(timeout), destroy, the
// rendezvous timeout, the backend-name rules, group-relative rank arguments, set_timeout on
// backends that exist, pg_options and group_desc. Real ranks (fork harness, real TCPStore,
// real Gloo). docs/api.md has the row of each.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "paddle_like/dist/distributed.h"
#include "paddle_like/dist/object_collectives.h"
#include "phi/core/errors.h"
#include "phi/core/flags.h"
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

// The seed's group_src / group_dst / group_peer: GroupRank{r} names rank r of the call's
// group wherever a global rank is accepted.
TEST(SeedConformance, GroupRanksAreAcceptedWhereverARankIs) {
  RunRanks(3, [](const RankContext& ctx) {
    InitGloo();
    const int r = ctx.rank;
    dist::NewGroupOptions unsorted;
    unsorted.sort_ranks = false;
    auto g = dist::new_group({2, 0}, unsorted);  // group rank 0 is global rank 2
    if (r != 1) {
      const int me = dist::get_rank(g);
      DenseTensor t = Ints({r});
      dist::broadcast(&t, dist::GroupRank{0}, {g, false});
      EXPECT_EQ(At(t, 0), 2);
      DenseTensor red = Ints({r + 1});
      dist::reduce(&red, dist::GroupRank{1}, dist::ReduceOp::SUM, {g, false});
      if (r == 0) {
        EXPECT_EQ(At(red, 0), 4);  // 1 + 3, on global rank 0
      }
      std::vector<DenseTensor> gl;
      dist::gather(Ints({r}), &gl, dist::GroupRank{1}, {g, false});
      if (r == 0) {
        ASSERT_EQ(gl.size(), 2u);
        EXPECT_EQ(At(gl[0], 0), 2);
        EXPECT_EQ(At(gl[1], 0), 0);
      }
      DenseTensor s = Ints({-1});
      std::vector<DenseTensor> parts;
      if (me == 0) parts = {Ints({10}), Ints({11})};
      dist::scatter(&s, parts, dist::GroupRank{0}, {g, false});
      EXPECT_EQ(At(s, 0), 10 + me);
      // Point to point: group peer 1 - me, with a plain send and in a batch.
      DenseTensor in = Ints({-1});
      if (me == 0) {
        dist::send(Ints({42}), dist::GroupRank{1}, {g});
      } else {
        EXPECT_EQ(dist::recv(&in, dist::GroupRank{0}, {g}), 2) << "recv returns a global rank";
        EXPECT_EQ(At(in, 0), 42);
      }
      DenseTensor out = Ints({100 + me}), back = Ints({-1});
      auto works = dist::batch_isend_irecv({dist::P2POp::isend(&out, dist::GroupRank{1 - me}, g),
                                            dist::P2POp::irecv(&back, dist::GroupRank{1 - me}, g)});
      for (auto& w : works) w->wait();
      EXPECT_EQ(At(back, 0), 100 + (1 - me));
      std::vector<std::string> objs;
      if (me == 0) objs = {"from group rank 0"};
      dist::broadcast_object_list(&objs, dist::GroupRank{0}, g);
      ASSERT_EQ(objs.size(), 1u);
      EXPECT_EQ(objs[0], "from group rank 0");
      // A group rank outside [0, 2), and a global rank outside the group, name themselves.
      try {
        dist::broadcast(&t, dist::GroupRank{2}, {g, false});
        ADD_FAILURE() << "group rank 2 of a 2-rank group was accepted";
      } catch (const phi::InvalidArgumentError& e) {
        EXPECT_NE(std::string(e.what()).find("group rank 2"), std::string::npos) << e.what();
      }
      EXPECT_THROW(dist::broadcast(&t, 1, {g, false}), phi::InvalidArgumentError);
    }
    dist::barrier();
    dist::destroy_process_group();
  });
}

// set_timeout reaches the communicator that already exists: the call stuck on a missing
// rank ends at the new timeout, not at the one the backend was created with.
void SetTimeoutReachesTheCommunicator(bool shm) {
  RunRanks(2, [shm](const RankContext& ctx) {
    FLAGS_cpu_shm_transport = shm;
    InitGloo(std::chrono::seconds(30));
    DenseTensor t = Ints({1});
    dist::all_reduce(&t);  // the world's backend and communicator exist now
    dist::set_timeout(std::chrono::milliseconds(700));
    if (ctx.rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(4));  // misses the next all-reduce
      return;
    }
    const auto t0 = Clock::now();
    auto w = dist::all_reduce(&t, dist::ReduceOp::SUM, {nullptr, /*async_op=*/true});
    EXPECT_THROW(w->wait(), phi::EnforceNotMet);
    // The communicator's own call has ended too (the comm stream is free), long before the
    // 30 s it was created with.
    while (!w->is_completed() && Clock::now() - t0 < std::chrono::seconds(10)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_TRUE(w->is_completed());
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
    // The world is broken (rank 1 never joins again): the harness exits without tearing down.
  });
}
TEST(SeedConformance, SetTimeoutReachesExistingBackendsOverSharedMemory) {
  SetTimeoutReachesTheCommunicator(true);
}
TEST(SeedConformance, SetTimeoutReachesExistingBackendsOverTcp) {
  SetTimeoutReachesTheCommunicator(false);
}

// pg_options reach the backend (Gloo's interface and timeout); options no backend of the
// group reads are refused; group_desc is in every message about the group.
TEST(SeedConformance, PgOptionsAndGroupDescReachTheBackend) {
  RunRanks(2, [](const RankContext& ctx) {
    InitGloo();
    auto lo = std::make_shared<distributed::ProcessGroupGlooOptions>();
    lo->interface = "lo";
    dist::NewGroupOptions o;
    o.pg_options = lo;
    o.group_desc = "attention tp";
    auto g = dist::new_group({0, 1}, o);
    EXPECT_EQ(g->group_desc(), "attention tp");
    DenseTensor t = Ints({1});
    dist::all_reduce(&t, dist::ReduceOp::SUM, {g, false});
    EXPECT_EQ(At(t, 0), 2);

    // An interface that does not exist reaches Gloo's device creation.
    auto bad = std::make_shared<distributed::ProcessGroupGlooOptions>();
    bad->interface = "no_such_if0";
    dist::NewGroupOptions ob;
    ob.pg_options = bad;
    auto gb = dist::new_group({0, 1}, ob);
    try {
      dist::all_reduce(&t, dist::ReduceOp::SUM, {gb, false});
      ADD_FAILURE() << "a Gloo group on interface no_such_if0 ran";
    } catch (const phi::EnforceNotMet& e) {
      EXPECT_NE(std::string(e.what()).find("no_such_if0"), std::string::npos) << e.what();
    }

    // Options for a backend the group does not have, and contradictory ones.
    dist::NewGroupOptions on;
    on.pg_options = std::make_shared<distributed::ProcessGroupNCCLOptions>();
    try {
      dist::new_group({0, 1}, on);
      ADD_FAILURE() << "NCCL options were accepted by a gloo group";
    } catch (const phi::InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("'nccl'"), std::string::npos) << e.what();
    }
    auto both = std::make_shared<distributed::ProcessGroupGlooOptions>();
    both->interface = "lo";
    both->hostname = "127.0.0.1";
    dist::NewGroupOptions o2;
    o2.pg_options = both;
    auto g2 = dist::new_group({0, 1}, o2);
    EXPECT_THROW(dist::all_reduce(&t, dist::ReduceOp::SUM, {g2, false}),
                 phi::InvalidArgumentError);

    // The options' timeout and the group's description: rank 1 misses an all-reduce.
    auto quick = std::make_shared<distributed::ProcessGroupGlooOptions>();
    quick->timeout = std::chrono::milliseconds(600);
    dist::NewGroupOptions oq;
    oq.pg_options = quick;
    oq.group_desc = "quick pair";
    auto gq = dist::new_group({0, 1}, oq);
    dist::all_reduce(&t, dist::ReduceOp::SUM, {gq, false});
    if (ctx.rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(4));
      return;
    }
    const auto t0 = Clock::now();
    auto w = dist::all_reduce(&t, dist::ReduceOp::SUM, {gq, /*async_op=*/true});
    while (!w->is_completed() && Clock::now() - t0 < std::chrono::seconds(10)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3)) << "the options' timeout was not used";
    try {
      std::rethrow_exception(w->exception());
    } catch (const phi::EnforceNotMet& e) {
      EXPECT_NE(std::string(e.what()).find("'quick pair'"), std::string::npos) << e.what();
    } catch (...) {
      ADD_FAILURE() << "no error";
    }

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
