// comm_bench under the launcher: every collective verified on 2 ranks, JSON that parses.
#include <gtest/gtest.h>

#include <set>

#include "tests/tools/tools_test_util.h"

namespace paddle_like {
namespace testing {
namespace {

#if defined(LAUNCH_BIN) && defined(COMM_BENCH_BIN)
const std::string kLaunch = LAUNCH_BIN;
const std::string kBench = COMM_BENCH_BIN;
#else
const std::string kLaunch, kBench;
#endif

#define REQUIRE_TOOLS() \
  if (kBench.empty()) GTEST_SKIP() << "launch/comm_bench were not built (WITH_TOOLS=OFF)"

const std::vector<std::string> kOps = {"allreduce", "allgather", "reducescatter",
                                       "broadcast", "reduce",    "alltoall",
                                       "sendrecv",  "gather",    "scatter"};

TEST(CommBench, EveryCollectiveOnTwoRanksIsCorrectAndJsonParses) {
  REQUIRE_TOOLS();
  TempDir dir;
  const std::string json = dir.path() + "/out.json", csv = dir.path() + "/out.csv";
  auto r = RunProc({kLaunch, "--quiet", "--nproc_per_node", "2", "--", kBench, "-c", "all",
                    "-b", "8", "-e", "4K", "-f", "16", "-n", "3", "-w", "1", "-r", "1",
                    "--coalesce_ops", "10", "--baseline", "--json", json, "--csv", csv},
                   std::chrono::seconds(60));
  ASSERT_EQ(r.exit_code(), 0) << r.output;
  EXPECT_NE(r.output.find("[rank 0] # Out of bounds values : 0 OK"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("# Avg bus bandwidth"), std::string::npos);
  EXPECT_NE(r.output.find("# Coalescing: 10 x 4096 B allreduce"), std::string::npos);

  Json doc = ParseJson(ReadFile(json));
  EXPECT_EQ(doc["backend"].str, "Gloo");
  EXPECT_EQ(doc["world_size"].num, 2);
  EXPECT_EQ(doc["wrong_total"].num, 0);
  std::set<std::string> seen;
  for (const Json& row : doc["results"].arr) {
    seen.insert(row["op"].str);
    const Json& oop = row["out_of_place"];
    ASSERT_EQ(oop.kind, Json::kObject) << row["op"].str;
    EXPECT_EQ(oop["wrong"].num, 0) << row["op"].str << " " << row["size_bytes"].num;
    EXPECT_GT(oop["time_us"].num, 0);
    EXPECT_GT(oop["median_us"].num, 0);
    EXPECT_GE(oop["p90_us"].num, oop["median_us"].num) << row["op"].str;
    const Json& ip = row["in_place"];
    if (ip.kind == Json::kObject) {
      EXPECT_EQ(ip["wrong"].num, 0) << row["op"].str;
    }
    if (row["op"].str == "allreduce") {
      // --baseline times every raw Gloo algorithm and names the best.
      ASSERT_EQ(oop["raw"].arr.size(), 5u) << row["size_bytes"].num;
      for (const Json& raw : oop["raw"].arr) {
        EXPECT_GT(raw["median_us"].num, 0) << raw["name"].str;
      }
      EXPECT_FALSE(oop["best_raw"].str.empty());
      EXPECT_GT(oop["ratio_median_to_best_raw"].num, 0);
    }
    if (row["op"].str == "broadcast" || row["op"].str == "gather") {
      EXPECT_EQ(row["root"].num, 1);
    }
  }
  for (const auto& op : kOps) EXPECT_TRUE(seen.count(op)) << op << " missing from the JSON";
  EXPECT_EQ(doc["coalesce"]["ops"].num, 10);
  EXPECT_EQ(doc["coalesce"]["wrong"].num, 0);
  std::string csv_text = ReadFile(csv);
  EXPECT_EQ(csv_text.rfind("op,size_bytes,count,type,redop,root", 0), 0u) << csv_text;
}

// The separate-process baseline: no process group in these processes, only the raw
// algorithms, with their medians and p90s.
TEST(CommBench, RawOnlyTimesEveryGlooAlgorithmWithoutAGroup) {
  REQUIRE_TOOLS();
  TempDir dir;
  const std::string json = dir.path() + "/raw.json";
  auto r = RunProc({kLaunch, "--quiet", "--nproc_per_node", "3", "--", kBench, "--raw_only",
                    "-b", "8", "-e", "64K", "-f", "64", "-n", "5", "-w", "1", "--rounds", "2",
                    "--json", json},
                   std::chrono::seconds(60));
  ASSERT_EQ(r.exit_code(), 0) << r.output;
  EXPECT_NE(r.output.find("raw out-of-place, median/p90"), std::string::npos) << r.output;
  Json doc = ParseJson(ReadFile(json));
  ASSERT_EQ(doc["results"].arr.size(), 3u);  // 8 B, 512 B, 32 KiB
  for (const Json& row : doc["results"].arr) {
    const Json& oop = row["out_of_place"];
    EXPECT_EQ(oop["time_us"].kind, Json::kNull) << "no group: nothing of ours is timed";
    std::set<std::string> names;
    for (const Json& raw : oop["raw"].arr) {
      names.insert(raw["name"].str);
      EXPECT_GT(raw["median_us"].num, 0) << raw["name"].str;
      EXPECT_GE(raw["p90_us"].num, raw["median_us"].num) << raw["name"].str;
    }
    EXPECT_EQ(names, (std::set<std::string>{"ring", "ring_chunked", "halving_doubling", "bcube",
                                            "gloo::allreduce"}));
  }
}

TEST(CommBench, DtypesAndReduceOpsAreVerified) {
  REQUIRE_TOOLS();
  for (auto [dtype, redop] : std::vector<std::pair<std::string, std::string>>{
           {"float16", "sum"}, {"bfloat16", "max"}, {"int8", "prod"}, {"float64", "avg"},
           {"uint8", "min"}, {"int64", "avg"}}) {
    auto r = RunProc({kLaunch, "--quiet", "--nproc_per_node", "2", "--", kBench, "-c",
                      "allreduce,reducescatter,reduce", "-b", "64", "-e", "64", "-n", "2",
                      "-w", "0", "-d", dtype, "-o", redop, "--sync"},
                     std::chrono::seconds(60));
    EXPECT_EQ(r.exit_code(), 0) << dtype << "/" << redop << "\n" << r.output;
    EXPECT_NE(r.output.find("Out of bounds values : 0 OK"), std::string::npos) << r.output;
  }
}

TEST(CommBench, StandaloneWorldSizeOne) {
  REQUIRE_TOOLS();
  auto r = RunProc({kBench, "-c", "all", "-b", "8", "-e", "1K", "-f", "32", "-n", "2", "-w", "0"},
                   std::chrono::seconds(30),
                   {{"WORLD_SIZE", ""}, {"PADDLE_TRAINERS_NUM", ""}});
  ASSERT_EQ(r.exit_code(), 0) << r.output;
  EXPECT_NE(r.output.find("1 rank(s)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("sendrecv: skipped (needs 2 ranks)"), std::string::npos) << r.output;
}

TEST(CommBench, BadCommandLineIsRejected) {
  REQUIRE_TOOLS();
  auto r = RunProc({kBench, "-c", "allfoo"}, std::chrono::seconds(10));
  EXPECT_EQ(r.exit_code(), 2);
  EXPECT_NE(r.output.find("unknown op 'allfoo'"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
