// The misuse and fault matrix: valid programs that once deadlocked, and bad
// input that once killed a rank, wrote outside a tensor or left ranks hanging. Every case
// runs on real processes over real Gloo sockets, and every case asserts through Matrix()
// that no rank died by a signal and none was killed for hanging: a signal is a failure
// here, whatever the rank printed before it.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>
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
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// Runs fn on `world` ranks and fails on any rank that died by a signal, hung, or failed.
void Matrix(int world, const std::function<void(const RankContext&)>& fn,
            std::chrono::seconds limit = std::chrono::seconds(60)) {
  SpawnOptions opts;
  opts.timeout = limit;
  auto results = SpawnRanks(world, fn, opts);
  ASSERT_EQ(static_cast<int>(results.size()), world);
  for (const auto& r : results) {
    EXPECT_EQ(r.term_signal, 0) << "rank " << r.rank << " was killed by signal "
                                << r.term_signal << "\n" << r.output;
    EXPECT_FALSE(r.timed_out) << "rank " << r.rank << " hung\n" << r.output;
    EXPECT_TRUE(r.ok()) << r.Describe() << "\n" << r.output;
  }
}

// Expects `call` to raise E with every needle in its message.
template <typename E, typename F>
void ExpectError(const char* what, std::vector<std::string> needles, F&& call) {
  try {
    call();
    ADD_FAILURE() << what << ": no error raised";
  } catch (const E& e) {
    for (const auto& n : needles) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << what << ": message lacks '" << n << "': " << e.what();
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": wrong error type: " << e.what();
  }
}

DenseTensor Filled(DataType dt, int64_t n, double v) {
  DenseTensor t(phi::CPUPlace(), dt, phi::DDim({n}));
  phi::Fill(&t, v);
  return t;
}

// After a fault the group must still run a correct all-reduce.
void ExpectGroupWorks(ProcessGroupGloo* pg, int world, const char* after) {
  DenseTensor t = Filled(DataType::INT64, 5, 1.0);
  pg->AllReduce(&t, t, {}, true);
  std::vector<Val> ref(5, Val{static_cast<double>(world), 0});
  ExpectClose(t, ref, std::string("all-reduce after ") + after);
}

// ---------------------------------------------------------------- 1. lazy P2P, pair only
TEST(GlooFaultMatrix, FirstSendRecvOnAFreshGroupInvolvesOnlyThePair) {
  Matrix(3, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 1, std::chrono::seconds(5));
    ProcessGroupGloo other(ctx.store, ctx.rank, ctx.world_size, 2, std::chrono::seconds(5));
    if (ctx.rank == 2) {
      // Busy elsewhere until the pair is done: it must not be needed for their P2P.
      ctx.store->wait({"pair_done"}, std::chrono::seconds(20));
    } else {
      DenseTensor t = Filled(DataType::FLOAT32, 10, ctx.rank == 0 ? 7.0 : 0.0);
      auto start = Clock::now();
      if (ctx.rank == 0) pg.Send(t, 1, true); else pg.Recv(&t, 0, true);
      EXPECT_LT(Clock::now() - start, std::chrono::seconds(3)) << "P2P waited for rank 2";
      ExpectClose(t, std::vector<Val>(10, Val{7, 0}), "p2p on a fresh group");
      if (ctx.store->add("pair", 1) == 2) ctx.store->set("pair_done", "1");
    }
    ExpectGroupWorks(&other, 3, "the pair's P2P (other group)");
    ExpectGroupWorks(&pg, 3, "the pair's P2P");
  });
}

// A coalesced ring as the first op of a fresh group: each rank needs its next and previous
// pairs. Connecting them in call order could form a waiting cycle (found under ASan, about
// one run in three); a group connects its peers in ascending rank order. Fresh groups give
// fresh listening addresses, so each round draws the pairs' roles anew.
TEST(GlooFaultMatrix, CoalescedRingOnFreshGroupsNeverDeadlocksWhileConnecting) {
  for (int world : {3, 4}) {
    Matrix(world, [](const RankContext& ctx) {
      const int n = ctx.world_size, next = (ctx.rank + 1) % n, prev = (ctx.rank + n - 1) % n;
      for (int round = 0; round < 12; ++round) {
        ProcessGroupGloo pg(ctx.store, ctx.rank, n, 100 + round, std::chrono::seconds(10));
        DenseTensor out = Filled(DataType::INT32, 4, ctx.rank), in = Filled(DataType::INT32, 4, -1);
        pg.StartCoalescing();
        pg.Send(out, next, false);
        pg.Recv(&in, prev, false);
        pg.EndCoalescing()->Wait();
        ASSERT_EQ(in.data<int32_t>()[3], prev) << "round " << round;
      }
    });
  }
}

// ---------------------------------------------------------------- 2. tags out of order
TEST(GlooFaultMatrix, ReceivesMatchByTagInAnyOrder) {
  Matrix(2, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(5));
    for (bool sync_recv : {false, true}) {
      DenseTensor a = Filled(DataType::INT32, 6, 1.0), b = Filled(DataType::INT32, 300000, 2.0);
      if (ctx.rank == 0) {
        auto t1 = pg.Send(a, 1, 0, -1, false, false, {1});
        auto t2 = pg.Send(b, 1, 0, -1, false, false, {2});
        t1->Wait();
        t2->Wait();
      } else {
        DenseTensor ra = Filled(DataType::INT32, 6, 0), rb = Filled(DataType::INT32, 300000, 0);
        auto t2 = pg.Recv(&rb, 0, 0, -1, sync_recv, false, {2});
        auto t1 = pg.Recv(&ra, 0, 0, -1, sync_recv, false, {1});
        t2->Wait();
        t1->Wait();
        ExpectClose(ra, std::vector<Val>(6, Val{1, 0}), "tag 1");
        EXPECT_EQ(rb.data<int32_t>()[299999], 2);
      }
    }
    ExpectGroupWorks(&pg, 2, "out-of-order tags");
  });
}

int ThreadCount() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)e;
    ++n;
  }
  return n;
}

// A lane is a thread: a program that uses a new tag per step must not grow threads without
// bound.
TEST(GlooFaultMatrix, ANewTagPerStepKeepsTheThreadCountBounded) {
  Matrix(2, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(10));
    int peak = 0;
    for (int step = 0; step < 200; ++step) {
      DenseTensor t = Filled(DataType::INT32, 3, ctx.rank == 0 ? step : -1);
      if (ctx.rank == 0) {
        pg.Send(t, 1, 0, -1, false, false, {step})->Wait();
      } else {
        pg.Recv(&t, 0, 0, -1, false, false, {step})->Wait();
        ASSERT_EQ(t.data<int32_t>()[2], step);
      }
      peak = std::max(peak, ThreadCount());
    }
    EXPECT_LT(peak, 60) << "lanes were never retired";
  });
}

// ---------------------------------------------------------------- 3. calc stream ordering
TEST(GlooFaultMatrix, CalcStreamOpWhileCommStreamOpsArePending) {
  Matrix(3, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(10));
    std::vector<DenseTensor> ts;
    std::vector<ProcessGroupGloo::TaskPtr> tasks;
    for (int i = 0; i < 4; ++i) ts.push_back(Filled(DataType::FLOAT64, 1 << 18, i + 1.0));
    for (auto& t : ts) tasks.push_back(pg.AllReduce(&t, t, {}, /*sync_op=*/false));
    DenseTensor c = Filled(DataType::FLOAT64, 3, 1.0);
    pg.AllReduce(&c, c, {}, /*sync_op=*/true, /*use_calc_stream=*/true);
    ExpectClose(c, std::vector<Val>(3, Val{3, 0}), "calc-stream all-reduce");
    // Ordered after the pending ones: they are done once the calc-stream op returned.
    for (auto& task : tasks) EXPECT_TRUE(task->IsCompleted());
    for (int i = 0; i < 4; ++i) EXPECT_EQ(ts[i].data<double>()[12345], 3.0 * (i + 1));
  });
}

// ---------------------------------------------------------------- 4. sizes across ranks
TEST(GlooFaultMatrix, AllReduceSizesDifferAcrossRanks) {
  Matrix(2, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(10));
    DenseTensor t = Filled(DataType::FLOAT32, ctx.rank == 0 ? 100 : 200, 1.0);
    DenseTensor before = Filled(DataType::FLOAT32, 1, 0);
    ExpectError<phi::InvalidArgumentError>(
        "allreduce 100 vs 200", {"mismatch", "rank(s) 0 run AllReduce(100 x float32, SUM)",
                                 "rank(s) 1 run AllReduce(200 x float32, SUM)"},
        [&] { pg.AllReduce(&t, t, {}, true); });
    EXPECT_EQ(t.data<float>()[0], 1.0f) << "the op must not have run";
    ExpectGroupWorks(&pg, 2, "a size mismatch");
  });
}

// With the agreement check off, two ranks' large all-reduces of different sizes meet in the
// two-rank all-reduce, whose header carries the size: the rank that reads the other's header
// first raises InvalidArgument naming both sizes; the other raises the same, or, when the
// first has already closed its connection, Unavailable. Both at once, neither hangs.
TEST(GlooFaultMatrix, LargeAllReduceSizesDifferWithTheCheckOff) {
  Matrix(2, [](const RankContext& ctx) {
    FLAGS_collective_check = "off";
    FLAGS_cpu_shm_transport = false;
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(10));
    DenseTensor t = Filled(DataType::FLOAT32, ctx.rank == 0 ? 100000 : 50000, 1.0);
    const auto start = Clock::now();
    std::string named = "0";
    try {
      pg.AllReduce(&t, t, {}, true);
      ADD_FAILURE() << "all-reduces of 400000 and 200000 bytes succeeded";
    } catch (const phi::InvalidArgumentError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("rank " + std::to_string(1 - ctx.rank) + " sends " +
                         (ctx.rank == 0 ? "200000" : "400000") + " bytes, rank " +
                         std::to_string(ctx.rank) + " " + (ctx.rank == 0 ? "400000" : "200000")),
                std::string::npos)
          << msg;
      named = "1";
    } catch (const phi::UnavailableError& e) {
      EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(1 - ctx.rank)),
                std::string::npos)
          << e.what();
    }
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(5)) << "raised only at the timeout";
    ctx.store->set("named/" + std::to_string(ctx.rank), named);
    if (ctx.rank == 0) {
      const bool any = ctx.store->get_string("named/0") == "1" ||
                       ctx.store->get_string("named/1") == "1";
      EXPECT_TRUE(any) << "no rank named the two sizes";
    }
  });
}

// Over shared memory the op's first step carries its signature: with the agreement check
// off, calls that differ (size, op or root) raise InvalidArgument on every rank at once,
// naming both, and the group stays usable.
TEST(GlooFaultMatrix, SharedMemoryCallsDifferWithTheCheckOff) {
  for (int world : {2, 3}) {
    Matrix(world, [](const RankContext& ctx) {
      FLAGS_collective_check = "off";
      FLAGS_cpu_shm_transport = true;
      ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(10));
      // Rank 1 all-reduces half as much as the others; each rank names the first that differs.
      const int64_t mine = ctx.rank == 1 ? 50000 : 100000;
      DenseTensor t = Filled(DataType::FLOAT32, mine, 1.0);
      ExpectError<phi::InvalidArgumentError>(
          "allreduce sizes", {"rank " + std::to_string(ctx.rank == 1 ? 0 : 1) + " sends " +
                              std::to_string((ctx.rank == 1 ? 100000 : 50000) * 4) +
                              " bytes, rank " + std::to_string(ctx.rank) + " " +
                              std::to_string(mine * 4)},
          [&] { pg.AllReduce(&t, t, {}, true); });
      // A broadcast against an all-gather: the op is named.
      DenseTensor b = Filled(DataType::FLOAT32, 8, 2.0);
      ExpectError<phi::InvalidArgumentError>(
          "broadcast vs allgather", {"broadcast (root 0) of 32 bytes", "allgather of 32 bytes"},
          [&] {
            if (ctx.rank == 1) {
              DenseTensor flat = Filled(DataType::FLOAT32, 8 * ctx.world_size, 0);
              pg.AllGather(&flat, b, 0, -1, true);
            } else {
              pg.Broadcast(&b, b, {0, 0}, true);
            }
          });
      ExpectGroupWorks(&pg, ctx.world_size, "calls that differed over shared memory");
    });
  }
}

TEST(GlooFaultMatrix, SendAndRecvSizesDiffer) {
  Matrix(2, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(10));
    // {sent, expected}: longer, shorter, large (separate payload message), other dtype.
    const std::vector<std::pair<int64_t, int64_t>> cases{{12, 8}, {8, 12}, {100000, 99999}};
    for (auto [sent, expected] : cases) {
      if (ctx.rank == 0) {
        DenseTensor t = Filled(DataType::FLOAT32, sent, 3.0);
        pg.Send(t, 1, true);  // delivered whole: the error is the receiver's
      } else {
        DenseTensor r = Filled(DataType::FLOAT32, expected, -1.0);
        ExpectError<phi::InvalidArgumentError>(
            "send/recv sizes",
            {"expects " + std::to_string(expected) + " elements of float32",
             "carries " + std::to_string(sent) + " elements of float32", "rank 0"},
            [&] { pg.Recv(&r, 0, true); });
        EXPECT_EQ(r.data<float>()[expected - 1], -1.0f) << "a mismatched receive wrote";
      }
    }
    if (ctx.rank == 0) {
      pg.Send(Filled(DataType::INT32, 4, 1.0), 1, true);
    } else {
      DenseTensor r = Filled(DataType::FLOAT32, 4, 0);
      ExpectError<phi::InvalidArgumentError>("dtype", {"4 elements of int32"},
                                             [&] { pg.Recv(&r, 0, true); });
    }
    ExpectGroupWorks(&pg, 2, "send/recv size mismatches");
  });
}

TEST(GlooFaultMatrix, ListAllToAllWithUnallocatedUnequalOutputs) {
  Matrix(3, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(10));
    std::vector<DenseTensor> ins, outs(3);
    for (int q = 0; q < 3; ++q) ins.push_back(Filled(DataType::INT64, (ctx.rank + 1) * (q + 2), q));
    // Unallocated outputs take the inputs' shapes, which differ from what the peers send.
    ExpectError<phi::InvalidArgumentError>("list alltoall", {"matching Send carries"},
                                           [&] { pg.AllToAll(&outs, ins, true, false); });
    ExpectGroupWorks(&pg, 3, "an unequal list all-to-all");
  });
}

// ---------------------------------------------------------------- 5-8. local checks
TEST(GlooFaultMatrix, BadPeersRangesCountsAndInPlaceAllToAll) {
  Matrix(2, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(10));
    DenseTensor t = Filled(DataType::FLOAT32, 8, 1.0);
    const int me = ctx.rank, peer = 1 - ctx.rank;
    ExpectError<phi::InvalidArgumentError>("send to self", {"its own rank"},
                                           [&] { pg.Send(t, me, true); });
    ExpectError<phi::InvalidArgumentError>("recv from self", {"its own rank"},
                                           [&] { pg.Recv(&t, me, true); });
    pg.StartCoalescing();
    ExpectError<phi::InvalidArgumentError>("coalesced send to self", {"its own rank"},
                                           [&] { pg.Send(t, me, false); });
    pg.EndCoalescing()->Wait();
    ExpectError<phi::InvalidArgumentError>("negative tag", {"tag must be >= 0"}, [&] {
      pg.Send(t, peer, 0, -1, true, false, {-3});
    });
    // Offsets and counts at the extremes: nothing wraps, nothing is written.
    const std::vector<std::pair<int64_t, int64_t>> ranges{
        {kMax, 1}, {1, kMax}, {kMax, kMax}, {kMin, 1}, {-1, 2}, {4, 5}, {9, -1}, {0, kMin}};
    for (auto [off, n] : ranges) {
      std::string what = "range " + std::to_string(off) + "," + std::to_string(n);
      ExpectError<phi::EnforceNotMet>(what.c_str(), {}, [&] { pg.Recv(&t, peer, off, n, true, false); });
      ExpectError<phi::EnforceNotMet>(what.c_str(), {}, [&] { pg.Send(t, peer, off, n, true, false); });
      DenseTensor out;
      ExpectError<phi::EnforceNotMet>(what.c_str(), {}, [&] { pg.AllGather(&out, t, off, n, true); });
    }
    ExpectError<phi::InvalidArgumentError>("numel -2", {"-1 for \"to the end\"", "-2"},
                                           [&] { pg.Send(t, peer, 0, -2, true, false); });
    ExpectError<phi::InvalidArgumentError>("split overflow", {"overflow"}, [&] {
      DenseTensor o = Filled(DataType::FLOAT32, 8, 0);
      pg.AllToAll(&o, t, {4, 4}, {kMax, 2}, true);
    });
    ExpectError<phi::InvalidArgumentError>("in-place alltoall", {"in place"},
                                           [&] { pg.AllToAll(&t, t, {}, {}, true); });
    std::vector<DenseTensor> list{t.FlatView(0, 4), t.FlatView(4, 4)};
    ExpectError<phi::InvalidArgumentError>("in-place list alltoall", {"in place"},
                                           [&] { pg.AllToAll(&list, list, true, false); });
    ExpectClose(t, std::vector<Val>(8, Val{1, 0}), "tensor after rejected calls");
    ExpectGroupWorks(&pg, 2, "rejected calls");
  });
}

// ---------------------------------------------------------------- 9. dead peer, SIGPIPE
TEST(GlooFaultMatrix, PeerKilledMidAllReduceNoSignalAndLaterOpsRaise) {
  SpawnOptions opts;
  opts.timeout = std::chrono::seconds(60);
  const int world = 3, victim = 1;
  auto results = SpawnRanks(world, [&](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(5));
    DenseTensor t = Filled(DataType::FLOAT32, 1 << 20, 1.0);  // 4 MiB
    pg.Barrier()->Wait();
    for (int iter = 0; iter < 200; ++iter) {
      if (ctx.rank == victim && iter == 2) {
        // The same op as the survivors (so only the death differs: the agreement check
        // would rightly report SUM against MAX if the exchange finished before the kill).
        auto task = pg.AllReduce(&t, t, {ReduceOp::MAX, 1.0}, false);
        raise(SIGKILL);
      }
      try {
        pg.AllReduce(&t, t, {ReduceOp::MAX, 1.0}, true);
      } catch (const phi::EnforceNotMet& e) {
        EXPECT_TRUE(e.code() == phi::ErrorCode::kUnavailable ||
                    e.code() == phi::ErrorCode::kTimeout) << e.what();
        // Every later op raises a typed error too; none aborts.
        for (int k = 0; k < 3; ++k) {
          EXPECT_THROW(pg.AllReduce(&t, t, {}, true), phi::EnforceNotMet);
          DenseTensor s = Filled(DataType::FLOAT32, 4, 0);
          EXPECT_THROW(pg.Barrier()->Wait(), phi::EnforceNotMet);
        }
        return;
      }
    }
    ADD_FAILURE() << "rank " << ctx.rank << " never noticed the dead peer";
  }, opts);
  for (const auto& r : results) {
    if (r.rank == victim) {
      EXPECT_EQ(r.term_signal, SIGKILL) << "the victim did not die as planned\n" << r.output;
      continue;
    }
    EXPECT_EQ(r.term_signal, 0) << "survivor " << r.rank << " died by signal " << r.term_signal
                                << "\n" << r.output;
    EXPECT_TRUE(r.ok()) << r.Describe() << "\n" << r.output;
  }
}

// A dead peer's socket raises SIGPIPE on the next write, which kills the writer before Gloo
// can report the error, and only in a narrow race (the test above rarely hits it). So the
// contract is checked directly: creating a communicator ignores SIGPIPE when the program
// left it at the default, and leaves a program's own handler alone.
void OwnSigpipeHandler(int) {}

TEST(GlooFaultMatrix, CommunicatorIgnoresSigpipeUnlessTheProgramHandlesIt) {
  Matrix(2, [](const RankContext& ctx) {
    struct sigaction sa;
    ASSERT_EQ(sigaction(SIGPIPE, nullptr, &sa), 0);
    ASSERT_EQ(sa.sa_handler, SIG_DFL) << "the harness changed SIGPIPE";
    if (ctx.rank == 1) signal(SIGPIPE, OwnSigpipeHandler);
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(10));
    pg.Barrier()->Wait();  // the communicator exists from here on
    ASSERT_EQ(sigaction(SIGPIPE, nullptr, &sa), 0);
    if (ctx.rank == 0) {
      EXPECT_EQ(sa.sa_handler, SIG_IGN);
    } else {
      EXPECT_EQ(sa.sa_handler, &OwnSigpipeHandler);
    }
  });
}

// ---------------------------------------------------------------- 10. checks on some ranks
TEST(GlooFaultMatrix, UnequalAllToAllIntoUnallocatedOutputGetsTheImpliedShape) {
  Matrix(3, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(10));
    const int r = ctx.rank, n = 3;
    // Rank r sends q + 1 rows of 2 to rank q; so it receives r + 1 rows from every rank.
    std::vector<int64_t> in_rows{1, 2, 3}, out_rows(n, r + 1);
    DenseTensor in(phi::CPUPlace(), DataType::INT32, phi::DDim({6, 2}));
    for (int64_t i = 0; i < 12; ++i) in.data<int32_t>()[i] = 100 * r + static_cast<int32_t>(i);
    DenseTensor out;
    pg.AllToAll(&out, in, out_rows, in_rows, true);
    ASSERT_EQ(out.dims(), phi::DDim({3 * (r + 1), 2}));
    int64_t at = 0;
    for (int q = 0; q < n; ++q) {
      int64_t first = 2 * (r * (r + 1) / 2);  // rank q's block for r starts at row sum(1..r)
      for (int64_t k = 0; k < 2 * (r + 1); ++k, ++at) {
        EXPECT_EQ(out.data<int32_t>()[at], 100 * q + first + k) << "from rank " << q;
      }
    }
  });
}

TEST(GlooFaultMatrix, RootOnlyCheckFailureReachesEveryRankFast) {
  Matrix(3, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(30));
    DenseTensor out = Filled(DataType::FLOAT32, 4, 0);
    DenseTensor in = Filled(DataType::FLOAT32, ctx.rank == 0 ? 11 : 12, 1.0);  // root: wrong
    auto start = Clock::now();
    ExpectError<phi::InvalidArgumentError>(
        "scatter with a bad root input",
        ctx.rank == 0 ? std::vector<std::string>{"scatter input"}
                      : std::vector<std::string>{"rank 0", "scatter input", "12 elements"},
        [&] { pg.Scatter(&out, in, {0}, true); });
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(5)) << "the others waited too long";
    ExpectGroupWorks(&pg, 3, "a root-only failure");
  });
}

// ---------------------------------------------------------------- 11. creation timeout
TEST(GlooFaultMatrix, GroupCreationBoundedByTheGroupTimeoutNamingMissingRanks) {
  Matrix(3, [](const RankContext& ctx) {
    if (ctx.rank == 0) {  // the lowest rank never creates the group
      ctx.store->wait({"others_done"}, std::chrono::seconds(30));
      return;
    }
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 5, std::chrono::seconds(2));
    auto start = Clock::now();
    DenseTensor t = Filled(DataType::FLOAT32, 4, 1.0);
    ExpectError<phi::TimeoutError>("creation", {"rank(s) 0 did not create this group"},
                                   [&] { pg.AllReduce(&t, t, {}, true); });
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(6));
    if (ctx.store->add("done", 1) == 2) ctx.store->set("others_done", "1");
  });
}

TEST(GlooFaultMatrix, EagerCreationWaitsAtMostTheGroupTimeoutNamingMissingRanks) {
  Matrix(3, [](const RankContext& ctx) {
    if (ctx.rank == 0) {
      ctx.store->wait({"others_done"}, std::chrono::seconds(30));
      return;
    }
    FLAGS_eager_communication_connection = true;
    auto start = Clock::now();
    ExpectError<phi::TimeoutError>("eager creation", {"rank(s) 0 did not create this group"}, [&] {
      ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 6, std::chrono::seconds(2));
    });
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(6));
    if (ctx.store->add("done", 1) == 2) ctx.store->set("others_done", "1");
  });
}

// Pairs connect on the comm stream, so the program may be blocked on the very store client
// a connect needs (found by the fuzz test: a sync op's wait on one group held the shared
// client while another group's async op tried to connect). The mesh has its own connection.
TEST(GlooFaultMatrix, BackgroundConnectsDoNotQueueBehindTheProgramsStoreWaits) {
  Matrix(3, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 12, std::chrono::seconds(10));
    DenseTensor t = Filled(DataType::FLOAT32, 4, 1.0);
    if (ctx.rank != 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto task = pg.AllReduce(&t, t, {}, /*sync_op=*/false);  // connects on the comm stream
    if (ctx.rank == 1) {
      ctx.store->wait({"done"}, std::chrono::seconds(20));  // blocks the shared client
    } else if (task->Wait(), ctx.store->add("finished", 1) == 2) {
      ctx.store->set("done", "1");
    }
    task->Wait();
    ExpectClose(t, std::vector<Val>(4, Val{3, 0}), "all-reduce that connected in the background");
  });
}

// ---------------------------------------------------------------- 12. mismatch checks
TEST(GlooFaultMatrix, MismatchChecksAfterP2PAndOnReduceOpAndRoot) {
  for (bool store_check : {false, true}) {
    Matrix(3, [store_check](const RankContext& ctx) {
      FLAGS_collective_check = store_check ? "store" : "in_band";
      ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(10));
      DenseTensor t = Filled(DataType::FLOAT32, 4, 1.0);
      if (ctx.rank == 0) pg.Send(t, 1, true);
      if (ctx.rank == 1) pg.Recv(&t, 0, true);
      ExpectGroupWorks(&pg, 3, "a P2P between two ranks");  // sequences differ, checks do not
      ExpectError<phi::InvalidArgumentError>("SUM vs MAX", {"mismatch", "MAX", "SUM"}, [&] {
        pg.AllReduce(&t, t, {ctx.rank == 2 ? ReduceOp::MAX : ReduceOp::SUM, 1.0}, true);
      });
      ExpectError<phi::InvalidArgumentError>("root 0 vs 1", {"mismatch", "root 1", "root 0"},
                                             [&] { pg.Broadcast(&t, t, {ctx.rank == 1 ? 1 : 0, 0}, true); });
      ExpectGroupWorks(&pg, 3, "detected mismatches");
    });
  }
}

// ---------------------------------------------------------------- smaller points
TEST(GlooFaultMatrix, ReduceLeavesNonRootBuffersUntouched) {
  Matrix(3, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(10));
    for (int64_t n : {6, 70000}) {
      DenseTensor in = Filled(DataType::FLOAT32, n, ctx.rank + 1.0);
      pg.Reduce(&in, in, {ReduceOp::SUM, 1.0, 0}, true);  // in place
      EXPECT_EQ(in.data<float>()[n - 1], ctx.rank == 0 ? 6.0f : ctx.rank + 1.0f);
      DenseTensor src = Filled(DataType::FLOAT32, n, ctx.rank + 1.0);
      DenseTensor out = Filled(DataType::FLOAT32, n, -7.0);
      pg.Reduce(&out, src, {ReduceOp::SUM, 1.0, 0}, true);
      EXPECT_EQ(out.data<float>()[0], ctx.rank == 0 ? 6.0f : -7.0f);
      EXPECT_EQ(src.data<float>()[n - 1], ctx.rank + 1.0f);
    }
  });
}

TEST(GlooFaultMatrix, AnySourceRecvOfZeroElementsNamesTheSender) {
  Matrix(3, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(10));
    DenseTensor empty(phi::CPUPlace(), DataType::FLOAT32, phi::DDim({0}));
    if (ctx.rank == 0) {
      auto task = pg.Recv(&empty, distributed::kAnySource, true);
      EXPECT_EQ(task->source_rank(), 2);
    } else if (ctx.rank == 2) {
      pg.Send(empty, 0, true);
    }
    // Any source needs every pair connected: rank 1 connects its pairs here.
    pg.Barrier()->Wait();
  });
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
