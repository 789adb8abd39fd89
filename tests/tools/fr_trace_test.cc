// Hang diagnosis end to end: a 4-rank job under launch where rank 2 skips an all-reduce.
// The other ranks' watchdogs report rank 2 as behind and end their processes; the launcher
// then compares the flight-recorder dumps (tools/fr_trace's analysis) and names rank 2 and
// the op. fr_trace itself is also run on the dumps.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace testing
}  // namespace paddle_like
