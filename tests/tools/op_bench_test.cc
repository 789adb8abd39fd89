// op_bench under the launcher: runs on 2 ranks and reports both paths (a smoke test; the
// figures themselves are not checked: the benchmark is not a timed test).
#include <gtest/gtest.h>

#include "tests/tools/tools_test_util.h"

namespace paddle_like {
namespace testing {
namespace {

#if defined(LAUNCH_BIN) && defined(OP_BENCH_BIN)
const std::string kLaunch = LAUNCH_BIN;
const std::string kOpBench = OP_BENCH_BIN;
#else
const std::string kLaunch, kOpBench;
#endif

TEST(OpBench, ReportsBothPathsOnTwoRanks) {
  if (kOpBench.empty()) GTEST_SKIP() << "launch/op_bench were not built (WITH_TOOLS=OFF)";
  auto r = RunProc({kLaunch, "--quiet", "--nproc_per_node", "2", "--", kOpBench, "--iters", "20",
                    "--rounds", "2"},
                   std::chrono::seconds(60));
  ASSERT_EQ(r.exit_code(), 0) << r.output;
  EXPECT_NE(r.output.find("8 B float32, 2 rank(s)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ProcessGroup::AllReduce"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Executor c_allreduce_sum"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ratio (executor / direct): median"), std::string::npos) << r.output;
}

TEST(OpBench, RefusesABadCommandLine) {
  if (kOpBench.empty()) GTEST_SKIP() << "op_bench was not built (WITH_TOOLS=OFF)";
  auto r = RunProc({kOpBench, "--bytes", "6"}, std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code(), 2) << r.output;
  EXPECT_NE(r.output.find("multiple of 4"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
