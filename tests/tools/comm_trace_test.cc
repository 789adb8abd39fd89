// The comm timeline as a user gets it: FLAGS_comm_trace_dir on a real 2-rank job under
// launch; each rank's trace is valid JSON with one issue event and one comm-stream event per
// op it ran, and merge_traces joins them (and draws them when gnuplot is there).
#include <gtest/gtest.h>

#include <dirent.h>

#include <fstream>
#include <sstream>

#include "tests/tools/tools_test_util.h"

namespace paddle_like {
namespace testing {
namespace {

#if defined(LAUNCH_BIN) && defined(FIRST_LOOK_BIN) && defined(MERGE_TRACES_BIN)
int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(CommTrace, EveryOpOfARealJobIsInTheTimelineAndTheFilesAreValidJson) {
  TempDir dir;
  auto r = RunProc({LAUNCH_BIN, "--nproc_per_node", "2", "--", FIRST_LOOK_BIN},
                   std::chrono::seconds(60), {{"FLAGS_comm_trace_dir", dir.path()}});
  ASSERT_EQ(r.exit_code(), 0) << r.output;
  std::vector<std::string> files;
  DIR* d = ::opendir(dir.path().c_str());
  while (dirent* e = ::readdir(d)) {
    if (std::string(e->d_name).rfind("trace_", 0) == 0) files.push_back(e->d_name);
  }
  ::closedir(d);
  ASSERT_EQ(files.size(), 2u);
  bool have_python = RunProc({"python3", "-c", "pass"}).exit_code() == 0;
  for (const auto& f : files) {
    std::string path = dir.path() + "/" + f;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    int issued = Count(text.str(), "\"cat\": \"issue\"");
    int ran = Count(text.str(), "\"cat\": \"comm\"");
    EXPECT_GT(issued, 0) << path;
    EXPECT_EQ(ran, issued) << path;  // every op issued ran on a stream and ended
    if (have_python) {
      auto check = RunProc({"python3", "-c",
                            "import json,sys; d=json.load(open(sys.argv[1])); "
                            "print(len(d['traceEvents']))",
                            path});
      EXPECT_EQ(check.exit_code(), 0) << check.output;
    }
  }
  auto merged = RunProc({MERGE_TRACES_BIN, dir.path()});
  EXPECT_EQ(merged.exit_code(), 0) << merged.output;
  EXPECT_NE(merged.output.find("from 2 file(s)"), std::string::npos) << merged.output;
}
#endif

}  // namespace
}  // namespace testing
}  // namespace paddle_like
