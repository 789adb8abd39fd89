// Hang diagnosis end to end: a 4-rank job under launch where rank 2 skips an all-reduce.
// The other ranks' watchdogs report rank 2 as behind and end their processes; the launcher
// then compares the flight-recorder dumps (tools/fr_trace's analysis) and names rank 2 and
// the op. fr_trace itself is also run on the dumps.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/tools/tools_test_util.h"

namespace paddle_like {
namespace testing {
namespace {

#if defined(LAUNCH_BIN) && defined(FR_TRACE_BIN) && defined(SKIP_ONE_ALLREDUCE_BIN)
TEST(HangDiagnosis, TheWatchdogAndTheLauncherNameTheRankThatSkippedAnAllReduce) {
  TempDir logs;
  auto r = RunProc({LAUNCH_BIN, "--nproc_per_node", "4", "--log_dir", logs.path(), "--",
                    SKIP_ONE_ALLREDUCE_BIN},
                   std::chrono::seconds(60), {{"FLAGS_comm_watchdog_interval_ms", "100"}});
  EXPECT_EQ(r.exit_code(), 70) << r.output;  // the watchdog's exit code, passed on
  EXPECT_LT(r.seconds, 10) << r.output;       // timeout 1.5 s: no long hang
  EXPECT_NE(r.output.find("Ranks behind (have not issued seq 4): rank 2."), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("rank 2 is at seq 3 (nothing pending: it has not issued seq 4)"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("first divergence at seq 4:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 2 never issued seq 4"), std::string::npos) << r.output;

  auto trace = RunProc({FR_TRACE_BIN, logs.path() + "/flight_recorder"});
  EXPECT_EQ(trace.exit_code(), 0) << trace.output;
  EXPECT_NE(trace.output.find("issued AllReduce float32 in=256 out=256"), std::string::npos)
      << trace.output;
  EXPECT_NE(trace.output.find("rank 2 never issued seq 4 (its last op is seq 3"),
            std::string::npos) << trace.output;
  auto none = RunProc({FR_TRACE_BIN, logs.path()});
  EXPECT_EQ(none.exit_code(), 1);
  EXPECT_NE(none.output.find("no flight-recorder dump"), std::string::npos) << none.output;
}
#endif

#if defined(LAUNCH_BIN) && defined(FR_TRACE_BIN) && defined(SKIP_ONE_ALLREDUCE_BIN)
// Ops whose arguments legitimately differ per rank (scatter and gather, whose lists exist on
// the root only; an all-to-all with unequal splits; messages between ranks 0 and 1) come
// before the skipped all-reduce: fr_trace compares their signatures, not their sizes, and
// reports the skipped all-reduce as the first divergence, not the scatter.
TEST(FrTrace, ScatterGatherAllToAllAndPointToPointAreNoDivergence) {
  TempDir logs;
  auto r = RunProc({LAUNCH_BIN, "--nproc_per_node", "3", "--log_dir", logs.path(), "--",
                    SKIP_ONE_ALLREDUCE_BIN, "--mixed", "1", "--rank", "2", "--at", "2"},
                   std::chrono::seconds(60), {{"FLAGS_comm_watchdog_interval_ms", "100"}});
  EXPECT_EQ(r.exit_code(), 70) << r.output;
  auto trace = RunProc({FR_TRACE_BIN, logs.path() + "/flight_recorder"});
  EXPECT_EQ(trace.exit_code(), 0) << trace.output;
  // Scatter, gather and all-to-all are seqs 1-3, the all-reduces 4 and 5; rank 2 skips 6.
  EXPECT_NE(trace.output.find("first divergence at seq 6:"), std::string::npos) << trace.output;
  EXPECT_NE(trace.output.find("ranks 0, 1 issued AllReduce float32 in=256"), std::string::npos)
      << trace.output;
  EXPECT_NE(trace.output.find("rank 2 never issued seq 6 (its last op is seq 5"),
            std::string::npos) << trace.output;
}
#endif

#if defined(FR_TRACE_BIN)
// Collectives are compared by their collective seq; the point-to-point ops that ranks 0 and 1
// exchanged (rank 2 took no part) carry the last collective seq and a p2p_seq of their own,
// and are no divergence.
TEST(FrTrace, PointToPointOpsDoNotShiftTheCollectiveComparison) {
  TempDir dumps;
  auto write = [&](int rank, const std::string& ops) {
    std::ofstream f(dumps.path() + "/fr_g5_r" + std::to_string(rank) + ".txt");
    f << "# process group 5 (rank " << rank << "/3) size=3\n" << ops;
  };
  const std::string all_reduce_1 =
      "seq=1 op=AllReduce dtype=float32 in=4 out=4 peer=-1 red=0 tag=0 p2p_seq=0 "
      "state=completed age_us=9 done_us=5 name=\n";
  const std::string all_reduce_2 =
      "seq=2 op=AllReduce dtype=float32 in=8 out=8 peer=-1 red=0 tag=0 p2p_seq=0 "
      "state=started age_us=9 done_us=0 name=\n";
  auto p2p = [](const char* op, int peer, int p2p_seq) {
    return std::string("seq=1 op=") + op + " dtype=float32 in=1 out=1 peer=" +
           std::to_string(peer) + " red=-1 tag=0 p2p_seq=" + std::to_string(p2p_seq) +
           " state=completed age_us=9 done_us=5 name=\n";
  };
  write(0, all_reduce_1 + p2p("Send", 1, 1) + p2p("Recv", 1, 2) + all_reduce_2);
  write(1, all_reduce_1 + p2p("Recv", 0, 1) + p2p("Send", 0, 2));
  write(2, all_reduce_1 + all_reduce_2);
  auto r = RunProc({FR_TRACE_BIN, dumps.path()});
  EXPECT_EQ(r.exit_code(), 0) << r.output;
  EXPECT_NE(r.output.find("first divergence at seq 2:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ranks 0, 2 issued AllReduce float32 in=8"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("rank 1 never issued seq 2 (its last op is seq 1: AllReduce"),
            std::string::npos) << r.output;
}
#endif

}  // namespace
}  // namespace testing
}  // namespace paddle_like
