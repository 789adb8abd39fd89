// The shared-memory transport of CPU groups on one host (phi/core/distributed/shm_group.h):
// that it is the path taken, that nothing stays in /dev/shm, that a dead or stalled rank is
// named, that it is correct with spinning off, that one rank with it off keeps the whole
// group on TCP, and that a large point-to-point message between ranks of one host is read from
// the sender's memory (one copy) unless either rank has the flag off. The collectives' results on every world size, dtype and op are in
// gloo_collectives_test.cc (both transports); the fault matrix and the fuzz test run on it by
// default. Real processes, real TCPStore.
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "distributed/process_group_gloo.h"
#include "phi/core/distributed/p2p_transport_internal.h"
#include "phi/core/flags.h"
#include "tests/distributed/collective_test_util.h"
#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

using distributed::ProcessGroupGloo;
using Clock = std::chrono::steady_clock;

DenseTensor Filled(DataType dt, int64_t n, double v) {
  DenseTensor t(phi::CPUPlace(), dt, phi::DDim({n}));
  phi::Fill(&t, v);
  return t;
}

// Names in /dev/shm that a segment of a creator with `pid` would have.
std::vector<std::string> SegmentsOf(int pid) {
  std::vector<std::string> out;
  const std::string prefix = "paddle_like_shm_" + std::to_string(pid) + "_";
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* e = readdir(dir)) {
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) out.push_back(e->d_name);
    }
    closedir(dir);
  }
  return out;
}

// A ring shift of `n` distinct int64 values as one group (each rank sends to the next and
// receives from the previous), checked element by element.
void RingShiftChecked(ProcessGroupGloo* pg, int me, int world, int64_t n) {
  const int next = (me + 1) % world, prev = (me + world - 1) % world;
  DenseTensor out(phi::CPUPlace(), DataType::INT64, phi::DDim({n}));
  for (int64_t i = 0; i < n; ++i) out.data<int64_t>()[i] = me * 1000000007LL + i;
  DenseTensor in = Filled(DataType::INT64, n, -1);
  pg->StartCoalescing();
  pg->Send(out, next, 0, -1, false, false);
  pg->Recv(&in, prev, 0, -1, false, false);
  pg->EndCoalescing()->Wait();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(in.data<int64_t>()[i], prev * 1000000007LL + i) << n << " elements, at " << i;
  }
}

void ExpectSum(ProcessGroupGloo* pg, int world, int64_t n, const std::string& what) {
  DenseTensor t = Filled(DataType::FLOAT32, n, 1.0);
  pg->AllReduce(&t, t, {}, true);
  ExpectClose(t, std::vector<Val>(static_cast<size_t>(n), Val{static_cast<double>(world), 0}),
              what);
}

// Shared memory is the path on one host, and its segment is gone from /dev/shm once every
// rank mapped it; a stale segment of a creator that died is removed by the next creation.
TEST(ShmTransport, SegmentIsUnlinkedOnceMappedAndStaleOnesAreSwept) {
  // A crash between creation and unlink, faked: a segment named after a pid that is gone,
  // two minutes old; and one as fresh, which may still be opened by the process it was
  // meant for (a channel whose dialer sent and exited), so it stays.
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  const std::string stale = "/paddle_like_shm_" + std::to_string(dead) + "_00000000deadbeef";
  const std::string fresh = "/paddle_like_shm_" + std::to_string(dead) + "_00000000f4e54000";
  for (const std::string& name : {stale, fresh}) {
    int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    if (name == stale) {
      const timespec two_minutes_ago[2] = {{time(nullptr) - 120, 0}, {time(nullptr) - 120, 0}};
      ASSERT_EQ(futimens(fd, two_minutes_ago), 0) << std::strerror(errno);
    }
    close(fd);
  }
  RunRanks(3, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(20));
    ExpectSum(&pg, 3, 300000, "allreduce over shared memory");
    pg.Barrier()->Wait();
    if (ctx.rank == 0) {
      EXPECT_TRUE(SegmentsOf(getpid()).empty()) << "the segment is still in /dev/shm";
    }
  });
  const std::vector<std::string> left = SegmentsOf(dead);
  EXPECT_EQ(left, std::vector<std::string>{fresh.substr(1)})
      << "the old segment must be removed, the fresh one kept";
  shm_unlink(fresh.c_str());
}

// SIGKILL mid all-reduce: the survivors raise Unavailable naming the dead rank, fast, and
// every later op raises too.
TEST(ShmTransport, KilledRankIsNamedWithinMilliseconds) {
  SpawnOptions opts;
  opts.timeout = std::chrono::seconds(60);
  auto results = SpawnRanks(4, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(30));
    DenseTensor t = Filled(DataType::FLOAT32, 1 << 20, 1.0);  // 4 MiB: several pieces
    pg.AllReduce(&t, t, {}, true);
    for (int iter = 0; iter < 100000; ++iter) {
      if (ctx.rank == 2 && iter == 3) raise(SIGKILL);
      const auto start = Clock::now();
      try {
        pg.AllReduce(&t, t, {ReduceOp::MAX, 1.0}, true);
      } catch (const phi::UnavailableError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("rank 2"), std::string::npos) << msg;
        EXPECT_NE(msg.find("exited"), std::string::npos) << msg;
        EXPECT_LT(Clock::now() - start, std::chrono::seconds(2)) << "named late: " << msg;
        EXPECT_THROW(pg.AllReduce(&t, t, {}, true), phi::EnforceNotMet);
        return;
      }
    }
    ADD_FAILURE() << "rank " << ctx.rank << " never noticed the dead peer";
  }, opts);
  for (const auto& r : results) {
    if (r.rank == 2) {
      EXPECT_EQ(r.term_signal, SIGKILL) << r.output;
    } else {
      EXPECT_TRUE(r.ok()) << r.Describe() << "\n" << r.output;
    }
  }
}

// A rank alive but elsewhere: every other rank's timeout names it, and it is told too when it
// comes late.
TEST(ShmTransport, StalledRankIsNamedAtTheTimeout) {
  RunRanks(3, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(2));
    DenseTensor t = Filled(DataType::FLOAT32, 16, 1.0);
    pg.AllReduce(&t, t, {}, true);
    if (ctx.rank == 1) {
      ctx.store->wait({"others_failed"}, std::chrono::seconds(30));
      EXPECT_THROW(pg.AllReduce(&t, t, {}, true), phi::EnforceNotMet);
      return;
    }
    const auto start = Clock::now();
    try {
      pg.AllReduce(&t, t, {}, true);
      ADD_FAILURE() << "completed without rank 1";
    } catch (const phi::TimeoutError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("rank(s) 1 "), std::string::npos) << msg;
      EXPECT_EQ(msg.find("rank(s) 0"), std::string::npos) << msg;
      EXPECT_EQ(msg.find("rank(s) 2"), std::string::npos) << msg;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong error: " << e.what();
    }
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(6));
    if (ctx.store->add("failed", 1) == 2) ctx.store->set("others_failed", "1");
  });
}

// With spinning off every wait is a futex wait: same results.
TEST(ShmTransport, CorrectWithSpinningOff) {
  SpawnOptions opts;
  opts.env["FLAGS_gloo_spin_us"] = "0";
  RunRanks(4, [](const RankContext& ctx) {
    FLAGS_gloo_spin_us = 0;
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(20));
    for (int64_t n : {int64_t{3}, int64_t{5000}, int64_t{700001}}) {
      for (int k = 0; k < 5; ++k) ExpectSum(&pg, 4, n, "spin off, " + std::to_string(n));
    }
    DenseTensor in = Filled(DataType::INT32, 4 * 70001, ctx.rank + 1);
    DenseTensor out;
    pg.ReduceScatter(&out, in, {}, true);
    ExpectClose(out, std::vector<Val>(70001, Val{10, 0}), "reduce-scatter, spin off");
  }, opts);
}

// Small ops travel in the cells with their announcement (up to 48 bytes: an in-band record
// with a payload of 16), larger ones in the slots: every size across that limit is right, with
// the in-band check and without it. Ranks whose all-reduces differ in size on either side of
// the limit (one in its cell, the others in their slots) all raise the same mismatch, and the
// group goes on.
TEST(ShmTransport, SmallOpsAcrossTheInlineLimitAndTheirMismatches) {
  RunRanks(3, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(20));
    for (const char* check : {"in_band", "off"}) {
      FLAGS_collective_check = check;
      for (int64_t n = 1; n <= 18; ++n) {
        ExpectSum(&pg, 3, n, std::string(check) + ", all-reduce of " + std::to_string(n));
        // Bytes 1..18 from each rank: broadcast from the last rank, and all-gathered.
        DenseTensor b = Filled(DataType::INT8, n, ctx.rank == 2 ? 7 : -1);
        pg.Broadcast(&b, b, {2, 0}, true);
        ExpectClose(b, std::vector<Val>(static_cast<size_t>(n), Val{7, 0}), "broadcast");
        DenseTensor mine = Filled(DataType::INT8, n, ctx.rank + 1), all;
        pg.AllGather(&all, mine, true);
        std::vector<Val> want;
        for (int r = 0; r < 3; ++r) want.insert(want.end(), n, Val{r + 1.0, 0});
        ExpectClose(all, want, "all-gather of " + std::to_string(n) + " bytes per rank");
      }
    }
    FLAGS_collective_check = "in_band";
    DenseTensor t = Filled(DataType::FLOAT32, ctx.rank == 0 ? 2 : 12, 1.0);
    try {
      pg.AllReduce(&t, t, {}, true);
      ADD_FAILURE() << "rank " << ctx.rank << ": the sizes' mismatch was not detected";
    } catch (const phi::InvalidArgumentError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("rank(s) 0 run AllReduce(2 x float32, SUM)"), std::string::npos) << msg;
      EXPECT_NE(msg.find("rank(s) 1, 2 run AllReduce(12 x float32, SUM)"), std::string::npos)
          << msg;
    }
    ExpectSum(&pg, 3, 5, "after the mismatch");
  });
}

// Broadcast, all-gather and gather move their data in 256 KiB pieces of the slots: sizes just
// under, at and past a piece's end, and several pieces with a tail, byte by byte against each
// rank's own pattern, from a root other than 0, on 2, 3 and 4 ranks.
TEST(ShmTransport, CopyCollectivesAcrossPieceBoundaries) {
  for (int world : {2, 3, 4}) {
    RunRanks(world, [](const RankContext& ctx) {
      ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(30));
      const int n = ctx.world_size, root = n - 1;
      auto pattern = [](int rank, int64_t i) {
        return static_cast<uint8_t>((i * 131 + rank * 29 + (i >> 12)) & 0xff);
      };
      auto bytes_of = [](int rank, int64_t len, const std::function<uint8_t(int, int64_t)>& f) {
        DenseTensor t(phi::CPUPlace(), DataType::UINT8, phi::DDim({len}));
        for (int64_t i = 0; i < len; ++i) t.data<uint8_t>()[i] = f(rank, i);
        return t;
      };
      constexpr int64_t kPiece = int64_t{256} << 10;
      for (int64_t len : {kPiece - 4, kPiece, kPiece + 1, 3 * kPiece + 100, (int64_t{1} << 20) + 12}) {
        const std::string at = std::to_string(n) + " ranks, " + std::to_string(len) + " bytes";
        DenseTensor b = bytes_of(ctx.rank, len, [&](int r, int64_t i) {
          return r == root ? pattern(r, i) : uint8_t{0};
        });
        pg.Broadcast(&b, b, {root, 0}, true);
        for (int64_t i = 0; i < len; ++i) {
          ASSERT_EQ(b.data<uint8_t>()[i], pattern(root, i)) << "broadcast, " << at << ", at " << i;
        }
        DenseTensor mine = bytes_of(ctx.rank, len, pattern), all, gathered;
        pg.AllGather(&all, mine, true);
        ASSERT_EQ(all.numel(), len * n) << at;
        for (int r = 0; r < n; ++r) {
          for (int64_t i = 0; i < len; ++i) {
            ASSERT_EQ(all.data<uint8_t>()[r * len + i], pattern(r, i))
                << "all-gather, " << at << ", rank " << r << "'s byte " << i;
          }
        }
        pg.Gather(&gathered, mine, distributed::GatherOptions{root}, true, false);
        if (ctx.rank != root) continue;
        ASSERT_EQ(gathered.numel(), len * n) << at;
        for (int r = 0; r < n; ++r) {
          for (int64_t i = 0; i < len; ++i) {
            ASSERT_EQ(gathered.data<uint8_t>()[r * len + i], pattern(r, i))
                << "gather, " << at << ", rank " << r << "'s byte " << i;
          }
        }
      }
    });
  }
}

// One rank with the transport off: the whole group stays on TCP, and stays correct.
TEST(ShmTransport, OneRankOffKeepsTheGroupOnTcp) {
  RunRanks(3, [](const RankContext& ctx) {
    FLAGS_cpu_shm_transport = ctx.rank != 1;
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(20));
    for (int64_t n : {int64_t{7}, int64_t{300001}}) ExpectSum(&pg, 3, n, "mixed flags");
    DenseTensor in = Filled(DataType::INT64, 9, ctx.rank);
    std::vector<DenseTensor> outs(3);
    for (auto& o : outs) o = Filled(DataType::INT64, 3, -1);
    // Scatter/gather take the engine's sends on TCP: the same answer on every rank.
    DenseTensor got = Filled(DataType::INT64, 3, -1);
    pg.Scatter(&got, in, {0}, true);
    ExpectClose(got, std::vector<Val>(3, Val{0, 0}), "scatter on tcp");
    FLAGS_cpu_shm_transport = true;
  });
}

// A rendezvous-sized message (above the eager 64 KiB) between ranks of one host is read from
// the sender's memory: in one piece and in several (the read goes a chunk per reactor turn),
// in a ring and crossed in one batch. Rank 1 has the flag off: the pairs it is in keep the
// socket, and the results are the same. What each rank read from memory is counted exactly.
TEST(ShmTransport, LargePointToPointIsReadFromTheSendersMemory) {
  RunRanks(3, [](const RankContext& ctx) {
    FLAGS_cpu_shm_transport = ctx.rank != 1;
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(20));
    const int me = ctx.rank;
    const uint64_t before = phi::distributed::P2PLentBytesReceived();
    uint64_t expect_lent = 0;
    for (int64_t n : {int64_t{20000}, int64_t{1300007}}) {  // 160 KB; 10.4 MB: 3 chunks
      RingShiftChecked(&pg, me, 3, n);
      // Rank 0 hears rank 2 (both lend); rank 1 hears rank 0 and rank 2 hears rank 1 (flag off).
      if (me == 0) expect_lent += static_cast<uint64_t>(n) * 8;
    }
    // Crossed: every rank sends to both others, then receives from both in reverse order.
    const int64_t n = 300000;
    std::vector<DenseTensor> outs, ins;
    pg.GroupStart();
    for (int r = 0; r < 3; ++r) {
      if (r == me) continue;
      outs.push_back(Filled(DataType::FLOAT32, n, me * 10 + r));
      pg.Send(outs.back(), r, 0, -1, false, false);
    }
    std::vector<int> from;
    for (int r = 2; r >= 0; --r) {
      if (r == me) continue;
      ins.push_back(Filled(DataType::FLOAT32, n, -1));
      from.push_back(r);
    }
    for (size_t k = 0; k < ins.size(); ++k) pg.Recv(&ins[k], from[k], 0, -1, false, false);
    pg.GroupEnd()->Wait();
    for (size_t k = 0; k < ins.size(); ++k) {
      ExpectClose(ins[k], std::vector<Val>(n, Val{from[k] * 10.0 + me, 0}),
                  "crossed, from rank " + std::to_string(from[k]));
      if (me != 1 && from[k] != 1) expect_lent += static_cast<uint64_t>(n) * 4;
    }
    EXPECT_EQ(phi::distributed::P2PLentBytesReceived() - before, expect_lent);
    pg.Barrier()->Wait();
    FLAGS_cpu_shm_transport = true;
  });
}

// Point-to-point bytes between ranks of one host travel in shared-memory channels, not the
// socket: a ring shift of every eager size, then a burst that overfills a channel's ring (a
// writer that finds it full waits for the reader's doorbell), all checked element by element;
// with the flag off the same traffic takes the socket and no channel byte is read.
TEST(ShmTransport, PointToPointTravelsInSharedMemoryChannels) {
  for (bool on : {true, false}) {
    RunRanks(3, [on](const RankContext& ctx) {
      FLAGS_cpu_shm_transport = on;
      ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(20));
      const int me = ctx.rank;
      const uint64_t before = phi::distributed::P2PChannelBytesReceived();
      for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{1000}, int64_t{8192}}) {  // to 64 KiB
        RingShiftChecked(&pg, me, 3, n);
      }
      // 64 eager messages of 32 KiB (2 MiB, 8 rings' worth) sent before the receiver looks.
      constexpr int kBurst = 64;
      constexpr int64_t kCount = 8192;
      std::vector<DenseTensor> outs, ins;
      outs.reserve(kBurst);  // the ops hold their tensors' addresses
      ins.reserve(kBurst);
      std::vector<std::shared_ptr<distributed::ProcessGroup::Task>> tasks;
      if (me == 0) {
        for (int k = 0; k < kBurst; ++k) {
          outs.push_back(Filled(DataType::FLOAT32, kCount, k + 0.5));
          tasks.push_back(pg.Send(outs.back(), 1, 0, -1, false, false));
        }
      } else if (me == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        for (int k = 0; k < kBurst; ++k) {
          ins.push_back(Filled(DataType::FLOAT32, kCount, -1));
          tasks.push_back(pg.Recv(&ins.back(), 0, 0, -1, false, false));
        }
      }
      for (auto& t : tasks) t->Wait();
      for (int k = 0; k < static_cast<int>(ins.size()); ++k) {
        ExpectClose(ins[k], std::vector<Val>(kCount, Val{k + 0.5, 0}),
                    "burst message " + std::to_string(k));
      }
      const uint64_t read = phi::distributed::P2PChannelBytesReceived() - before;
      if (on) {
        EXPECT_GT(read, 0u) << "no byte came through a shared-memory channel";
        if (me == 1) {
          EXPECT_GT(read, uint64_t{kBurst} * kCount * 4) << "the burst";
        }
      } else {
        EXPECT_EQ(read, 0u) << "the flag is off: every byte takes the socket";
      }
      pg.Barrier()->Wait();
      FLAGS_cpu_shm_transport = true;
    });
  }
}

// A send completes once written, as into a socket's buffer: a sender that then destroys its
// group and exits before the receiver posts its receive still delivers the message, and no
// segment is left behind by either.
TEST(ShmTransport, AMessageOutlivesItsSendersGroupAndProcess) {
  RunRanks(2, [](const RankContext& ctx) {
    {
      ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(20));
      pg.Barrier()->Wait();  // both communicators exist (the receiver's listens)
      if (ctx.rank == 0) {
        ctx.store->set("sender/pid", std::to_string(getpid()));
        DenseTensor out = Filled(DataType::FLOAT64, 1000, 2.5);
        pg.Send(out, 1, 0, -1, true, false)->Wait();
        ctx.store->set("sent", "1");
        return;  // the group goes, then the process (before rank 1 receives)
      }
      ctx.store->wait({"sent"}, std::chrono::seconds(20));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      DenseTensor in = Filled(DataType::FLOAT64, 1000, -1);
      pg.Recv(&in, 0, 0, -1, true, false)->Wait();
      ExpectClose(in, std::vector<Val>(1000, Val{2.5, 0}), "the message of a gone sender");
      const int pid = std::stoi(ctx.store->get_string("sender/pid"));
      EXPECT_TRUE(SegmentsOf(pid).empty()) << "the sender's channel segment was left behind";
    }
  });
}

// The same when the sender exits normally (exit, not _exit: its exit handlers run) while the
// receiver is stopped and cannot open the channel yet: the exit waits for the receiver to open
// it (up to 2 s) instead of unlinking the bytes away.
TEST(ShmTransport, AnExitingSenderWaitsForItsReceiverToOpenTheChannel) {
  RunRanks(2, [](const RankContext& ctx) {
    std::unique_ptr<ProcessGroupGloo> pg(new ProcessGroupGloo(
        ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(20)));
    pg->Barrier()->Wait();  // both communicators exist (the receiver's listens)
    if (ctx.rank == 0) {
      const pid_t receiver = std::stoi(ctx.store->get_string("receiver/pid"));
      ctx.store->set("sender/pid", std::to_string(getpid()));
      ASSERT_EQ(kill(receiver, SIGSTOP), 0);
      // A process of its own resumes it 300 ms later, while this one is in its exit handlers
      // or gone (nanosleep and kill are safe after fork).
      if (fork() == 0) {
        const timespec wait{0, 300 * 1000 * 1000};
        nanosleep(&wait, nullptr);
        kill(receiver, SIGCONT);
        _exit(0);
      }
      DenseTensor out = Filled(DataType::FLOAT64, 1000, 4.5);
      pg->Send(out, 1, 0, -1, true, false)->Wait();
      ctx.store->set("sent", "1");
      pg.reset();
      std::exit(0);
    }
    ctx.store->set("receiver/pid", std::to_string(getpid()));
    ctx.store->wait({"sent"}, std::chrono::seconds(20));
    DenseTensor in = Filled(DataType::FLOAT64, 1000, -1);
    pg->Recv(&in, 0, 0, -1, true, false)->Wait();
    ExpectClose(in, std::vector<Val>(1000, Val{4.5, 0}), "the message of an exited sender");
    const int pid = std::stoi(ctx.store->get_string("sender/pid"));
    EXPECT_TRUE(SegmentsOf(pid).empty()) << "the sender's channel segment was left behind";
  });
}

// A lent send that timed out before its receive came: the late receive reads nothing valid
// and fails naming the sender (the sender's answer says the send ended), and the pair goes on.
TEST(ShmTransport, LentSendThatTimedOutFailsTheLateReceive) {
  RunRanks(2, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::milliseconds(800));
    DenseTensor one = Filled(DataType::INT32, 1, 1);
    pg.AllReduce(&one, one, {}, true);  // both communicators exist
    const int64_t n = 1 << 20;  // 4 MiB
    if (ctx.rank == 0) {
      {
        DenseTensor out = Filled(DataType::FLOAT32, n, 5.0);
        EXPECT_THROW(pg.Send(out, 1, true), phi::TimeoutError);
      }  // its memory goes back once the transport let go of it
      // The wait timed out; the transport's own deadline ends the send a moment later.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ctx.store->set("send_failed", "1");
      DenseTensor again = Filled(DataType::FLOAT32, n, 7.0);
      pg.Send(again, 1, true);
      return;
    }
    ctx.store->wait({"send_failed"}, std::chrono::seconds(30));
    DenseTensor in = Filled(DataType::FLOAT32, n, -1);
    try {
      pg.Recv(&in, 0, true);
      ADD_FAILURE() << "a receive matched a send that had timed out";
    } catch (const phi::TimeoutError& e) {
      EXPECT_NE(std::string(e.what()).find("rank 0 gave up its send"), std::string::npos)
          << e.what();
    }
    pg.Recv(&in, 0, true);
    ExpectClose(in, std::vector<Val>(n, Val{7, 0}), "the next message");
  });
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
