// Init-method parsing (pure, with an injected environment) and real rendezvous over TCP
// and a file with real processes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "phi/core/distributed/store/file_store.h"
#include "phi/core/errors.h"
#include "phi/core/distributed/store/rendezvous.h"
#include "phi/core/distributed/store/tcp_store.h"
#include "tests/harness/multiprocess.h"
#include "tests/store/store_test_util.h"

namespace paddle_like {
namespace testing {
namespace {

using phi::distributed::ParseInitMethod;
using phi::distributed::Rendezvous;
using phi::distributed::RendezvousSpec;

phi::distributed::EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string ErrorOf(const std::string& url, std::map<std::string, std::string> env,
                    int rank = -1, int world_size = -1) {
  try {
    ParseInitMethod(url, rank, world_size, Env(std::move(env)));
  } catch (const phi::InvalidArgumentError& e) {
    return e.what();
  }
  return "";
}

TEST(RendezvousParseTest, EnvStandardNames) {
  auto s = ParseInitMethod("env://", -1, -1,
                           Env({{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"},
                                {"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}}));
  EXPECT_EQ(s.kind, RendezvousSpec::Kind::kTcp);
  EXPECT_EQ(s.master_addr, "10.0.0.1");
  EXPECT_EQ(s.master_port, 29500);
  EXPECT_EQ(s.rank, 3);
  EXPECT_EQ(s.world_size, 8);
  EXPECT_EQ(s.local_rank, 1);
  EXPECT_FALSE(s.host_server);
}

// Under mpirun, OpenMPI's variables give rank, size and local rank where nothing else does;
// the store's address must still be given, and the error says how.
TEST(RendezvousParseTest, EnvOpenMpiNames) {
  auto s = ParseInitMethod("env://", -1, -1,
                           Env({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"},
                                {"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}}));
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.world_size, 4);
  EXPECT_EQ(s.local_rank, 0);
  auto launcher = ParseInitMethod("env://", -1, -1,
                                  Env({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"},
                                       {"RANK", "1"}, {"WORLD_SIZE", "2"},
                                       {"OMPI_COMM_WORLD_RANK", "0"},
                                       {"OMPI_COMM_WORLD_SIZE", "1"}}));
  EXPECT_EQ(launcher.rank, 1);  // the launcher's own variables win
  EXPECT_EQ(launcher.world_size, 2);
  std::string msg = ErrorOf("env://", {{"OMPI_COMM_WORLD_RANK", "0"},
                                       {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_NE(msg.find("mpirun -x MASTER_ADDR"), std::string::npos) << msg;
}

TEST(RendezvousParseTest, EnvPaddleNames) {
  auto s = ParseInitMethod("env://", -1, -1,
                           Env({{"PADDLE_MASTER", "node0:6170"}, {"PADDLE_TRAINER_ID", "0"},
                                {"PADDLE_TRAINERS_NUM", "2"}}));
  EXPECT_EQ(s.master_addr, "node0");
  EXPECT_EQ(s.master_port, 6170);
  EXPECT_EQ(s.rank, 0);
  EXPECT_EQ(s.world_size, 2);
  EXPECT_EQ(s.local_rank, 0);  // defaults to the rank
  EXPECT_TRUE(s.host_server);  // rank 0 hosts...
  auto hosted = ParseInitMethod("env://", -1, -1,
                                Env({{"PADDLE_MASTER", "node0:6170"}, {"PADDLE_TRAINER_ID", "0"},
                                     {"PADDLE_TRAINERS_NUM", "2"}, {"PADDLE_STORE_HOSTED", "1"}}));
  EXPECT_FALSE(hosted.host_server);  // ...unless a launcher already does
  // Both spellings given and agreeing is fine.
  auto both = ParseInitMethod("env://", -1, -1,
                              Env({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}, {"RANK", "1"},
                                   {"PADDLE_TRAINER_ID", "1"}, {"WORLD_SIZE", "2"},
                                   {"PADDLE_MASTER", "h:1"}}));
  EXPECT_EQ(both.rank, 1);
}

TEST(RendezvousParseTest, TcpAndFileUrls) {
  auto t = ParseInitMethod("tcp://127.0.0.1:4000?rank=1&world_size=4", -1, -1, Env({}));
  EXPECT_EQ(t.master_addr, "127.0.0.1");
  EXPECT_EQ(t.master_port, 4000);
  EXPECT_EQ(t.rank, 1);
  EXPECT_EQ(t.world_size, 4);
  auto v6 = ParseInitMethod("tcp://[::1]:4000", 0, 1, Env({}));
  EXPECT_EQ(v6.master_addr, "::1");
  EXPECT_TRUE(v6.host_server);
  auto f = ParseInitMethod("file:///tmp/rdzv?rank=2&world_size=3", -1, -1, Env({}));
  EXPECT_EQ(f.kind, RendezvousSpec::Kind::kFile);
  EXPECT_EQ(f.path, "/tmp/rdzv");
  EXPECT_EQ(f.rank, 2);
  EXPECT_FALSE(f.host_server);
}

TEST(RendezvousParseTest, EverythingMissingIsListedInOneError) {
  std::string msg = ErrorOf("env://", {});
  EXPECT_NE(msg.find("missing rank"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing world size"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing master address"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing master port"), std::string::npos) << msg;
  EXPECT_NE(msg.find("RANK"), std::string::npos) << msg;
  EXPECT_NE(msg.find("PADDLE_TRAINER_ID"), std::string::npos) << msg;

  msg = ErrorOf("tcp://host:12", {});
  EXPECT_NE(msg.find("missing rank"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing world size"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("master port"), std::string::npos) << msg;
}

TEST(RendezvousParseTest, ContradictionsAndBadValuesAreListed) {
  std::string msg = ErrorOf("env://", {{"RANK", "1"}, {"PADDLE_TRAINER_ID", "2"},
                                       {"WORLD_SIZE", "x"}, {"MASTER_ADDR", "a"},
                                       {"PADDLE_MASTER", "b:5"}, {"MASTER_PORT", "5"}});
  EXPECT_NE(msg.find("contradictory rank: RANK=1 but PADDLE_TRAINER_ID=2"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("WORLD_SIZE='x' is not an integer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("contradictory master address"), std::string::npos) << msg;

  msg = ErrorOf("tcp://h:70000?rank=5&world_size=4&colour=red", {}, 1);
  EXPECT_NE(msg.find("contradictory rank"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not in 1..65535"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown query parameter 'colour'"), std::string::npos) << msg;

  msg = ErrorOf("tcp://h:7?rank=4&world_size=4", {});
  EXPECT_NE(msg.find("rank 4 is not in [0, world size 4)"), std::string::npos) << msg;
  EXPECT_NE(ErrorOf("file://relative?rank=0&world_size=1", {}).find("absolute path"),
            std::string::npos);
  EXPECT_NE(ErrorOf("mpi://", {}).find("not supported"), std::string::npos);
}

TEST(RendezvousTest, EnvJoinsTheLaunchersServer) {
  // The harness exports MASTER_ADDR/PORT, RANK, WORLD_SIZE and PADDLE_STORE_HOSTED=1.
  RunRanks(3, [](const RankContext& ctx) {
    auto r = Rendezvous("env://", -1, -1, std::chrono::seconds(20));
    EXPECT_EQ(r.rank, ctx.rank);
    EXPECT_EQ(r.world_size, 3);
    EXPECT_EQ(r.local_rank, ctx.rank);
    auto* tcp = dynamic_cast<phi::distributed::TCPStore*>(r.store.get());
    ASSERT_NE(tcp, nullptr);
    EXPECT_FALSE(tcp->is_master());
    r.store->set("via-env/" + std::to_string(r.rank), "1");
    EXPECT_EQ(ctx.store->get_string("via-env/" + std::to_string((r.rank + 1) % 3)), "1");
  });
}

TEST(RendezvousTest, TcpRankZeroHostsTheServer) {
  RunRanks(3, [](const RankContext& ctx) {
    // Pick a port for rank 0 to host on and share it through the harness's store.
    if (ctx.rank == 0) ctx.store->set("port", std::to_string(FreePort()));
    const std::string url = "tcp://127.0.0.1:" + ctx.store->get_string("port") +
                            "?rank=" + std::to_string(ctx.rank) + "&world_size=3";
    setenv("PADDLE_STORE_HOSTED", "0", 1);
    auto r = Rendezvous(url, -1, -1, std::chrono::seconds(20));
    auto* tcp = dynamic_cast<phi::distributed::TCPStore*>(r.store.get());
    ASSERT_NE(tcp, nullptr);
    EXPECT_EQ(tcp->is_master(), ctx.rank == 0);
    const int64_t sum = r.store->add("sum", ctx.rank + 1);
    EXPECT_GE(sum, ctx.rank + 1);
    EXPECT_LE(sum, 6);
    HostStaysUntilAllDone(ctx, "tcp-done");
    if (ctx.rank == 0) {
      EXPECT_EQ(r.store->add("sum", 0), 6);
    }
  });
}

TEST(RendezvousTest, FileRendezvous) {
  ScopedTempFile file("rdzv");
  const std::string& path = file.path();
  RunRanks(3, [path](const RankContext& ctx) {
    auto r = Rendezvous("file://" + path + "?world_size=3", ctx.rank, -1,
                        std::chrono::seconds(20));
    EXPECT_EQ(r.rank, ctx.rank);
    EXPECT_NE(dynamic_cast<phi::distributed::FileStore*>(r.store.get()), nullptr);
    r.store->add("n", 1);
    r.store->set("r" + std::to_string(ctx.rank), "x");
    r.store->wait({"r0", "r1", "r2"});
    EXPECT_EQ(r.store->add("n", 0), 3);
  });
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
