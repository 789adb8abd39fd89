// A timeout names the culprit: rank 1 of 3 is alive but stuck elsewhere (it sleeps instead of
// calling a world all-reduce), and the TimeoutError that ranks 0 and 2 raise when they wait on
// the all-reduce names rank 1, and rank 1 alone, as not having issued it, from the progress
// the ranks publish on the watchdog's tick. Point-to-point traffic between ranks 0 and 1
// beforehand does not shift the collective numbering the comparison uses.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "distributed/process_group_gloo.h"
#include "phi/core/errors.h"
#include "phi/core/flags.h"
#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

using distributed::ProcessGroupGloo;
using phi::DenseTensor;

// Ranks 0 and 2 all-reduce on a group with a 1.5 s timeout while rank 1 sleeps; with
// `p2p_first`, ranks 0 and 1 first exchange three messages each way that rank 2 takes no part
// in. With `sync`, the all-reduce is a sync op: it runs on the calling thread, and the
// watchdog ends it (FLAGS_comm_watchdog_action=fail) with its report as the TimeoutError;
// otherwise it is async and waited on. Ranks 0 and 2 check the error they raise.
void RankOneSleepsThroughAnAllReduce(int gid, bool p2p_first, bool sync = false) {
  RunRanks(3, [&](const RankContext& ctx) {
    FLAGS_comm_watchdog_interval_ms = 200;
    if (sync) FLAGS_comm_watchdog_action = "fail";
    ProcessGroupGloo pg(ctx.store, ctx.rank, 3, gid, std::chrono::milliseconds(1500));
    if (p2p_first && ctx.rank < 2) {
      for (int i = 0; i < 3; ++i) {
        auto out = DenseTensor::FromVector<float>({static_cast<float>(i)});
        auto in = DenseTensor::FromVector<float>({0.f});
        if (ctx.rank == 0) {
          pg.Send(out, 1, /*sync_op=*/true)->Wait();
          pg.Recv(&in, 1, /*sync_op=*/true)->Wait();
        } else {
          pg.Recv(&in, 0, /*sync_op=*/true)->Wait();
          pg.Send(out, 0, /*sync_op=*/true)->Wait();
        }
      }
    }
    if (ctx.rank == 1) {
      // Alive (its watchdog keeps publishing), but not calling the all-reduce.
      std::this_thread::sleep_for(std::chrono::milliseconds(4000));
    } else {
      auto t = DenseTensor::FromVector<float>({1.f});
      try {
        pg.AllReduce(&t, t, {}, /*sync_op=*/sync, false)->Wait();
        ADD_FAILURE() << "rank " << ctx.rank << ": the all-reduce without rank 1 completed";
      } catch (const phi::TimeoutError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("AllReduce seq 1 "), std::string::npos) << m;
        EXPECT_NE(m.find("Ranks behind (have not issued seq 1): rank 1."), std::string::npos)
            << m;
        EXPECT_EQ(m.find("Ranks behind (have not issued seq 1): rank 0"), std::string::npos)
            << m;
        EXPECT_EQ(m.find("Ranks behind (have not issued seq 1): ranks"), std::string::npos)
            << m;
        // What rank 1 is doing: it issued no collective, nothing is pending.
        EXPECT_NE(m.find("rank 1 is at seq 0 (nothing pending: it has not issued seq 1)"),
                  std::string::npos) << m;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << ctx.rank << " raised another type: " << e.what();
      }
    }
    ctx.store->set("done/" + std::to_string(ctx.rank), "1");
    ctx.store->wait({"done/0", "done/1", "done/2"});
  });
}

TEST(TimeoutDiagnosis, AWaitedAllReduceNamesTheRankThatHasNotIssuedIt) {
  RankOneSleepsThroughAnAllReduce(/*gid=*/41, /*p2p_first=*/false);
}

TEST(TimeoutDiagnosis, PointToPointTrafficBeforeDoesNotShiftWhoIsBehind) {
  RankOneSleepsThroughAnAllReduce(/*gid=*/42, /*p2p_first=*/true);
}

TEST(TimeoutDiagnosis, ASyncAllReduceEndedByTheWatchdogNamesTheRankThatHasNotIssuedIt) {
  RankOneSleepsThroughAnAllReduce(/*gid=*/43, /*p2p_first=*/true, /*sync=*/true);
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
