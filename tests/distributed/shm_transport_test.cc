// The shared-memory transport of CPU groups on one host (phi/core/distributed/shm_group.h):
// that it is the path taken, that nothing stays in /dev/shm, that a dead or stalled rank is
// named, that it is correct with spinning off, and that one rank with it off keeps the whole
// group on TCP. The collectives' results on every world size, dtype and op are in
// gloo_collectives_test.cc (both transports); the fault matrix and the fuzz test run on it by
// default. Real processes, real TCPStore.
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
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

void ExpectSum(ProcessGroupGloo* pg, int world, int64_t n, const std::string& what) {
  DenseTensor t = Filled(DataType::FLOAT32, n, 1.0);
  pg->AllReduce(&t, t, {}, true);
  ExpectClose(t, std::vector<Val>(static_cast<size_t>(n), Val{static_cast<double>(world), 0}),
              what);
}

// Shared memory is the path on one host, and its segment is gone from /dev/shm once every
// rank mapped it; a stale segment of a creator that died is removed by the next creation.
TEST(ShmTransport, SegmentIsUnlinkedOnceMappedAndStaleOnesAreSwept) {
  // A crash between creation and unlink, faked: a segment named after a pid that is gone.
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  const std::string stale = "/paddle_like_shm_" + std::to_string(dead) + "_00000000deadbeef";
  int fd = shm_open(stale.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  close(fd);
  RunRanks(3, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(20));
    ExpectSum(&pg, 3, 300000, "allreduce over shared memory");
    pg.Barrier()->Wait();
    if (ctx.rank == 0) {
      EXPECT_TRUE(SegmentsOf(getpid()).empty()) << "the segment is still in /dev/shm";
    }
  });
  EXPECT_TRUE(SegmentsOf(dead).empty()) << "the stale segment was not removed";
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

}  // namespace
}  // namespace testing
}  // namespace paddle_like
