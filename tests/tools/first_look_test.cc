// The README's first look (tools/first_look) as a user runs it: under launch, on 1-4 ranks.
#include <gtest/gtest.h>

#include "tests/tools/tools_test_util.h"

namespace paddle_like {
namespace testing {
namespace {

#if defined(LAUNCH_BIN) && defined(FIRST_LOOK_BIN)
TEST(FirstLook, RunsAndVerifiesOnOneToFourRanks) {
  for (int n = 1; n <= 4; ++n) {
    auto r = RunProc({LAUNCH_BIN, "--nproc_per_node", std::to_string(n), "--", FIRST_LOOK_BIN},
                     std::chrono::seconds(60));
    EXPECT_EQ(r.exit_code(), 0) << n << " ranks\n" << r.output;
    for (int k = 0; k < n; ++k) {
      EXPECT_NE(r.output.find("rank " + std::to_string(k) + "/" + std::to_string(n) + ": "),
                std::string::npos)
          << r.output;
    }
    EXPECT_EQ(r.output.find("WRONG"), std::string::npos) << r.output;
  }
}
#endif

}  // namespace
}  // namespace testing
}  // namespace paddle_like
