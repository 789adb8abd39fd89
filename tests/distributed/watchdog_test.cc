// The comm watchdog on real processes over Gloo: rank 2 skips one all-reduce and nobody
// waits on it; the watchdog of every other rank names rank 2 as behind, fails the op (the
// "fail" action) or ends the process (the default "abort"), and the flight-recorder dumps let
// tools/fr_trace find the divergence.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "distributed/process_group_gloo.h"
#include "distributed/watchdog.h"
#include "phi/core/errors.h"
#include "phi/core/flags.h"
#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

using distributed::ProcessGroupGloo;
using phi::DenseTensor;

std::string TempDirPath() {
  char tmpl[] = "/tmp/watchdog_test_XXXXXX";
  return ::mkdtemp(tmpl);
}

// Three all-reduces together, then every rank but 2 issues a fourth that rank 2 skips.
// Returns the fourth's task (null on rank 2).
distributed::ProcessGroup::TaskPtr SkipOne(ProcessGroupGloo& pg, int rank) {
  for (int i = 0; i < 3; ++i) {
    auto t = DenseTensor::FromVector<float>({1.f});
    pg.AllReduce(&t, t, {}, /*sync_op=*/true, false)->Wait();
  }
  if (rank == 2) return nullptr;
  auto t = std::make_shared<DenseTensor>(DenseTensor::FromVector<float>(std::vector<float>(1024, 1.f)));
  return pg.AllReduce(t.get(), *t, {}, /*sync_op=*/false, false);
}

TEST(Watchdog, NamesTheRankThatSkippedAnAllReduceAndFailsTheOpNobodyWaitedFor) {
  std::string dumps = TempDirPath();
  RunRanks(4, [&](const RankContext& ctx) {
    FLAGS_comm_watchdog_action = "fail";
    FLAGS_comm_watchdog_interval_ms = 100;
    FLAGS_comm_dump_dir = dumps;
    ProcessGroupGloo pg(ctx.store, ctx.rank, 4, 31, std::chrono::milliseconds(1500));
    auto task = SkipOne(pg, ctx.rank);
    // Nobody waits: the watchdog must notice by itself (timeout 1.5 s + one interval).
    std::this_thread::sleep_for(std::chrono::milliseconds(3000));
    if (task) {
      EXPECT_TRUE(task->IsCompleted());
      EXPECT_THROW(task->Wait(), phi::EnforceNotMet);
      // "fail": the group's communicator is aborted with the report; later ops raise it.
      auto t = DenseTensor::FromVector<float>({1.f});
      try {
        pg.AllReduce(&t, t, {}, true, false)->Wait();
        ADD_FAILURE() << "ops after the watchdog failed the group must raise";
      } catch (const phi::EnforceNotMet& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("Watchdog: process group 31 (rank " + std::to_string(ctx.rank) + "/4)"),
                  std::string::npos) << m;
        EXPECT_NE(m.find("Ranks behind (have not issued seq 4): rank 2."), std::string::npos) << m;
        EXPECT_NE(m.find("rank 2 is at seq 3 (nothing pending: it has not issued seq 4)"),
                  std::string::npos) << m;
        EXPECT_NE(m.find("ranks 0, 1, 3 are at seq 4 (AllReduce seq 4 [NumelIn 1024"),
                  std::string::npos) << m;
      }
    }
    ctx.store->set("done/" + std::to_string(ctx.rank), "1");
    ctx.store->wait({"done/0", "done/1", "done/2", "done/3"});
  });
  // Every rank's flight recorder was dumped by the ranks that timed out.
  for (int r : {0, 1, 3}) {
    std::ifstream f(dumps + "/fr_g31_r" + std::to_string(r) + ".txt");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("seq=4 op=AllReduce dtype=float32 in=1024"), std::string::npos)
        << "rank " << r << ": " << text;
  }
  std::system(("rm -rf " + dumps).c_str());
}

TEST(Watchdog, TheDefaultActionEndsTheProcessWithTheReport) {
  SpawnOptions opts;
  opts.timeout = std::chrono::seconds(60);
  auto results = SpawnRanks(4, [](const RankContext& ctx) {
    FLAGS_comm_watchdog_interval_ms = 100;
    ProcessGroupGloo pg(ctx.store, ctx.rank, 4, 32, std::chrono::milliseconds(1500));
    auto task = SkipOne(pg, ctx.rank);
    std::this_thread::sleep_for(std::chrono::milliseconds(4000));
    // Only rank 2 gets here: the others' watchdogs ended them.
  }, opts);
  for (const auto& r : results) {
    if (r.rank == 2) {
      EXPECT_TRUE(r.ok()) << r.Describe() << r.output;
      continue;
    }
    EXPECT_EQ(r.term_signal, 0) << r.Describe();
    EXPECT_EQ(r.exit_code, distributed::kWatchdogExitCode) << r.Describe() << r.output;
    EXPECT_NE(r.output.find("Ranks behind (have not issued seq 4): rank 2."), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("watchdog: aborting the process"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
