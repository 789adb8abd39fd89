// The launcher as users run it: real processes, real signals, real store.
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "tests/tools/tools_test_util.h"

namespace paddle_like {
namespace testing {
namespace {

#ifdef LAUNCH_BIN
const std::string kLaunch = LAUNCH_BIN;
#else
const std::string kLaunch;
#endif

#define REQUIRE_LAUNCH() \
  if (kLaunch.empty()) GTEST_SKIP() << "launch was not built (WITH_TOOLS=OFF)"

// "RANK PID" lines the rank programs append to `file`.
std::vector<pid_t> PidsIn(const std::string& file) {
  std::vector<pid_t> pids;
  std::istringstream in(ReadFile(file));
  int rank;
  pid_t pid;
  while (in >> rank >> pid) pids.push_back(pid);
  return pids;
}

void ExpectAllGone(const std::vector<pid_t>& pids) {
  // The launcher reaped its children before it exited; allow the kernel a moment for
  // grandchildren killed with their process group.
  for (int i = 0; i < 50; ++i) {
    bool any = false;
    for (pid_t p : pids) any |= PidAlive(p);
    if (!any) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (pid_t p : pids) EXPECT_FALSE(PidAlive(p)) << "pid " << p << " is still running";
}

TEST(Launch, FailingRankStopsTheJobAndNamesIt) {
  REQUIRE_LAUNCH();
  TempDir dir;
  const std::string pids = dir.path() + "/pids";
  // Rank 2 fails with code 3; rank 1 ignores SIGTERM (needs the SIGKILL after the grace
  // period); rank 0 and rank 3 would sleep for a minute.
  const std::string script =
      "echo \"$RANK $$\" >> " + pids + "; "
      "if [ \"$RANK\" = 2 ]; then sleep 0.5; echo failing; exit 3; fi; "
      "if [ \"$RANK\" = 1 ]; then trap '' TERM; fi; "
      "sleep 60 & echo \"$RANK $!\" >> " + pids + "; wait; sleep 60";
  auto r = RunProc({kLaunch, "--nproc_per_node", "4", "--grace_s", "1", "--", "/bin/sh", "-c",
                    script},
                   std::chrono::seconds(30));
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code(), 3) << r.output;
  EXPECT_LT(r.seconds, 6.0) << r.output;
  EXPECT_NE(r.output.find("launch: rank 2 exited with code 3; stopping the other ranks"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("[rank 2] failing"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1 still running"), std::string::npos) << r.output;
  auto all = PidsIn(pids);
  EXPECT_EQ(all.size(), 7u) << ReadFile(pids);  // 4 shells + 3 sleeps
  ExpectAllGone(all);
}

TEST(Launch, SigintStopsEveryRank) {
  REQUIRE_LAUNCH();
  TempDir dir;
  const std::string pids = dir.path() + "/pids";
  Proc p({kLaunch, "--nproc_per_node", "3", "--", "/bin/sh", "-c",
          "echo \"$RANK $$\" >> " + pids + "; exec sleep 60"});
  for (int i = 0; i < 500 && PidsIn(pids).size() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(PidsIn(pids).size(), 3u);
  ::kill(p.pid(), SIGINT);
  auto r = p.Finish(std::chrono::seconds(20));
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code(), 128 + SIGINT) << r.output;
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_NE(r.output.find("received SIGINT"), std::string::npos) << r.output;
  ExpectAllGone(PidsIn(pids));
}

std::map<std::string, std::string> EnvOfRank(const std::string& output, int rank) {
  std::map<std::string, std::string> env;
  std::istringstream in(output);
  std::string line, prefix = "[rank " + std::to_string(rank) + "] ";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    line = line.substr(prefix.size());
    auto eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

TEST(Launch, SetsBothEnvironmentConventions) {
  REQUIRE_LAUNCH();
  auto r = RunProc({kLaunch, "--nproc_per_node", "2", "--", "/usr/bin/env"},
                   std::chrono::seconds(20), {{"RANK", "99"}, {"PADDLE_STORE_TOKEN", ""}});
  ASSERT_EQ(r.exit_code(), 0) << r.output;
  std::string port;
  for (int rank = 0; rank < 2; ++rank) {
    auto env = EnvOfRank(r.output, rank);
    const std::string R = std::to_string(rank);
    EXPECT_EQ(env["RANK"], R);
    EXPECT_EQ(env["LOCAL_RANK"], R);
    EXPECT_EQ(env["WORLD_SIZE"], "2");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["PADDLE_TRAINER_ID"], R);
    EXPECT_EQ(env["PADDLE_TRAINERS_NUM"], "2");
    EXPECT_EQ(env["PADDLE_RANK_IN_NODE"], R);
    EXPECT_EQ(env["PADDLE_STORE_HOSTED"], "1");
    EXPECT_EQ(env["PADDLE_STORE_TOKEN"].size(), 32u) << "a fresh store secret per job";
    ASSERT_FALSE(env["MASTER_PORT"].empty());
    EXPECT_GT(std::stoi(env["MASTER_PORT"]), 0);
    EXPECT_EQ(env["PADDLE_MASTER"], "127.0.0.1:" + env["MASTER_PORT"]);
    if (rank == 0) port = env["MASTER_PORT"];
    EXPECT_EQ(env["MASTER_PORT"], port) << "every rank reaches the same store";
  }
}

TEST(Launch, MultiNodeRanksAndWorldSize) {
  REQUIRE_LAUNCH();
  // Node 1 of 2: hosts no store, numbers its ranks after node 0's.
  auto r = RunProc({kLaunch, "--nnodes", "2", "--node_rank", "1", "--nproc_per_node", "2",
                    "--master_addr", "127.0.0.1", "--master_port", "29999", "--",
                    "/usr/bin/env"},
                   std::chrono::seconds(20));
  ASSERT_EQ(r.exit_code(), 0) << r.output;
  for (int local = 0; local < 2; ++local) {
    int rank = 2 + local;
    auto env = EnvOfRank(r.output, rank);
    EXPECT_EQ(env["RANK"], std::to_string(rank)) << r.output;
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(local));
    EXPECT_EQ(env["WORLD_SIZE"], "4");
    EXPECT_EQ(env["PADDLE_TRAINERS_NUM"], "4");
    EXPECT_EQ(env["PADDLE_MASTER"], "127.0.0.1:29999");
    EXPECT_EQ(env["GROUP_RANK"], "1");
  }
  // Multi-node without an address is refused up front.
  auto bad = RunProc({kLaunch, "--nnodes", "2", "--", "/bin/true"}, std::chrono::seconds(10));
  EXPECT_EQ(bad.exit_code(), 2);
  EXPECT_NE(bad.output.find("--master_addr"), std::string::npos) << bad.output;
}

TEST(Launch, ConcurrentLaunchesGetDifferentPorts) {
  REQUIRE_LAUNCH();
  const std::vector<std::string> cmd = {kLaunch, "--nproc_per_node", "1", "--", "/bin/sh", "-c",
                                        "echo PORT=$MASTER_PORT; sleep 1"};
  Proc a(cmd), b(cmd);
  auto ra = a.Finish(std::chrono::seconds(20));
  auto rb = b.Finish(std::chrono::seconds(20));
  ASSERT_EQ(ra.exit_code(), 0) << ra.output;
  ASSERT_EQ(rb.exit_code(), 0) << rb.output;
  std::smatch ma, mb;
  ASSERT_TRUE(std::regex_search(ra.output, ma, std::regex("PORT=(\\d+)"))) << ra.output;
  ASSERT_TRUE(std::regex_search(rb.output, mb, std::regex("PORT=(\\d+)"))) << rb.output;
  EXPECT_NE(ma[1].str(), mb[1].str());
}

TEST(Launch, PrefixesLinesFlushesPartialLinesAndWritesLogs) {
  REQUIRE_LAUNCH();
  TempDir dir;
  auto r = RunProc({kLaunch, "--quiet", "--nproc_per_node", "2", "--log_dir", dir.path() + "/logs",
                    "--", "/bin/sh", "-c", "echo out $RANK; echo err $RANK >&2; printf tail"},
                   std::chrono::seconds(20));
  ASSERT_EQ(r.exit_code(), 0) << r.output;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string p = "[rank " + std::to_string(rank) + "] ";
    EXPECT_NE(r.output.find(p + "out " + std::to_string(rank) + "\n"), std::string::npos);
    EXPECT_NE(r.output.find(p + "err " + std::to_string(rank) + "\n"), std::string::npos);
    EXPECT_NE(r.output.find(p + "tail\n"), std::string::npos) << r.output;
    std::string log = ReadFile(dir.path() + "/logs/rank_" + std::to_string(rank) + ".log");
    EXPECT_NE(log.find("out " + std::to_string(rank) + "\n"), std::string::npos) << log;
    EXPECT_NE(log.find("tail\n"), std::string::npos) << log;
    EXPECT_EQ(log.find("[rank"), std::string::npos) << "logs are unprefixed";
  }
  EXPECT_EQ(r.output.find("launch:"), std::string::npos) << "--quiet";
}

TEST(Launch, RankKilledBySignalIsNamed) {
  REQUIRE_LAUNCH();
  auto r = RunProc({kLaunch, "--nproc_per_node", "2", "--grace_s", "1", "--", "/bin/sh", "-c",
                    "if [ \"$RANK\" = 1 ]; then kill -SEGV $$; fi; exec sleep 60"},
                   std::chrono::seconds(20));
  EXPECT_EQ(r.exit_code(), 128 + SIGSEGV) << r.output;
  EXPECT_NE(r.output.find("rank 1 was killed by signal 11 (SIGSEGV); stopping the other ranks"),
            std::string::npos)
      << r.output;
  EXPECT_LT(r.seconds, 6.0);
}

TEST(Launch, MissingProgramFailsCleanly) {
  REQUIRE_LAUNCH();
  auto r = RunProc({kLaunch, "--nproc_per_node", "2", "--", "/nonexistent/prog"},
                   std::chrono::seconds(20));
  EXPECT_EQ(r.exit_code(), 127) << r.output;
  EXPECT_NE(r.output.find("cannot execute '/nonexistent/prog'"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
