// TCPStore over real sockets, with real processes from the harness.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <chrono>
#include <set>
#include <sstream>
#include <thread>

#include "phi/core/distributed/store/prefix_store.h"
#include "phi/core/distributed/store/tcp_store.h"
#include "phi/core/distributed/store/tcp_store_server.h"
#include "phi/core/flags.h"
#include "tests/harness/multiprocess.h"
#include "tests/store/store_conformance.h"
#include "tests/store/store_test_util.h"

namespace paddle_like {
namespace testing {
namespace {

using phi::distributed::PrefixStore;
using phi::distributed::TCPStore;
using phi::distributed::TCPStoreServer;
using std::chrono::milliseconds;

TEST(TCPStoreTest, AllOpsAgainstInProcessMaster) {
  TCPStore store("127.0.0.1", 0, /*is_master=*/true, /*world_size=*/0, std::chrono::seconds(10));
  ASSERT_NE(store.port(), 0);
  ASSERT_NE(store.server(), nullptr);
  ExerciseStore(store, "solo", /*exclusive=*/true);
}

TEST(TCPStoreTest, AllOpsFromEveryRankConcurrently) {
  RunRanks(4, [](const RankContext& ctx) {
    ExerciseStore(*ctx.store, "rank" + std::to_string(ctx.rank), /*exclusive=*/false);
    // Cross-process visibility: everyone publishes, everyone reads everyone (multi_get
    // waits for ranks that are still behind).
    ctx.store->set("pub/" + std::to_string(ctx.rank), "from-" + std::to_string(ctx.rank));
    std::vector<std::string> keys;
    for (int r = 0; r < ctx.world_size; ++r) keys.push_back("pub/" + std::to_string(r));
    auto values = ctx.store->multi_get(keys);
    for (int r = 0; r < ctx.world_size; ++r) {
      EXPECT_EQ(std::string(values[r].begin(), values[r].end()), "from-" + std::to_string(r));
    }
  });
}

TEST(TCPStoreTest, PrefixStoreOverTcpIsolatesNamespaces) {
  RunRanks(3, [](const RankContext& ctx) {
    auto group = std::make_shared<PrefixStore>("group" + std::to_string(ctx.rank), ctx.store);
    ExerciseStore(*group, "ops", /*exclusive=*/false);
    group->set("same-key", "value-of-" + std::to_string(ctx.rank));
    ctx.store->add("prefix/done", 1);
    ctx.store->wait({"prefix/done"});  // exists once anyone added
    // Each group's key lands under its prefix in the underlying store.
    for (int r = 0; r < ctx.world_size; ++r) {
      PrefixStore other("group" + std::to_string(r), ctx.store);
      EXPECT_EQ(other.get_string("same-key"), "value-of-" + std::to_string(r));
      EXPECT_EQ(ctx.store->get_string("group" + std::to_string(r) + "/same-key"),
                "value-of-" + std::to_string(r));
    }
  });
}

TEST(TCPStoreTest, AddFrom16ProcessesSumsExactly) {
  constexpr int kRanks = 16, kAdds = 100;
  RunRanks(kRanks, [](const RankContext& ctx) {
    std::ostringstream mine;
    for (int i = 0; i < kAdds; ++i) mine << ctx.store->add("counter", 1) << " ";
    ctx.store->set("returns/" + std::to_string(ctx.rank), mine.str());
    if (ctx.rank != 0) return;
    std::vector<std::string> keys;
    for (int r = 0; r < ctx.world_size; ++r) keys.push_back("returns/" + std::to_string(r));
    std::multiset<int64_t> seen;
    for (const auto& v : ctx.store->multi_get(keys)) {
      std::istringstream in(std::string(v.begin(), v.end()));
      int64_t x;
      while (in >> x) seen.insert(x);
    }
    // Every add returned a distinct value: exactly 1..N, so no update was lost or doubled.
    ASSERT_EQ(seen.size(), static_cast<size_t>(kRanks * kAdds));
    int64_t expect = 1;
    for (int64_t x : seen) EXPECT_EQ(x, expect++);
    EXPECT_EQ(ctx.store->add("counter", 0), kRanks * kAdds);
  });
}

TEST(TCPStoreTest, WaitAndGetWakeOnSet) {
  RunRanks(3, [](const RankContext& ctx) {
    if (ctx.rank == 0) {
      std::this_thread::sleep_for(milliseconds(400));
      ctx.store->set("late-key", "here");
      return;
    }
    auto t0 = std::chrono::steady_clock::now();
    if (ctx.rank == 1) {
      ctx.store->wait({"late-key"}, std::chrono::seconds(30));
    } else {
      EXPECT_EQ(ctx.store->get_string("late-key"), "here");
    }
    auto waited = std::chrono::steady_clock::now() - t0;
    // Woken by the set (~400 ms), not by the 30 s / 60 s deadline.
    EXPECT_GE(waited, milliseconds(300));
    EXPECT_LT(waited, milliseconds(5000));
  });
}

// SetOnClose: the server sets the key when the connection that asked ends, however it ends
// (here a process killed with SIGKILL: no goodbye), and not once cancelled. The liveness
// service's "dead" mark rests on it.
TEST(TCPStoreTest, SetOnCloseFiresWhenTheConnectionEndsAndNotOnceCancelled) {
  auto results = SpawnRanks(3, [](const RankContext& ctx) {
    if (ctx.rank == 1 || ctx.rank == 2) {
      auto own = ctx.store->Clone();
      ASSERT_TRUE(own->SetOnClose("gone/" + std::to_string(ctx.rank), std::vector<uint8_t>{'x'}));
      if (ctx.rank == 2) own->CancelSetOnClose("gone/2");
      ctx.store->set("armed/" + std::to_string(ctx.rank), "1");
      ctx.store->wait({"go"}, std::chrono::seconds(30));
      if (ctx.rank == 1) raise(SIGKILL);
      own.reset();  // closes: cancelled, so nothing is set
      ctx.store->set("closed/2", "1");
      return;
    }
    ctx.store->wait({"armed/1", "armed/2"}, std::chrono::seconds(30));
    EXPECT_FALSE(ctx.store->check({"gone/1"}));
    ctx.store->set("go", "1");
    EXPECT_EQ(ctx.store->get_string("gone/1"), "x");  // waits: set as rank 1's process died
    ctx.store->wait({"closed/2"}, std::chrono::seconds(30));
    std::this_thread::sleep_for(milliseconds(200));  // the server has seen the close by now
    EXPECT_FALSE(ctx.store->check({"gone/2"}));
  });
  EXPECT_TRUE(results[0].ok()) << results[0].Describe() << "\n" << results[0].output;
  EXPECT_EQ(results[1].term_signal, SIGKILL) << results[1].Describe();
  EXPECT_TRUE(results[2].ok()) << results[2].Describe() << "\n" << results[2].output;
}

TEST(TCPStoreTest, GetOnMissingKeyTimesOutNamingKeyHostAndTime) {
  TCPStore store("127.0.0.1", 0, true, 0, milliseconds(300));
  auto t0 = std::chrono::steady_clock::now();
  try {
    store.get("no/such/key");
    FAIL() << "get did not time out";
  } catch (const phi::TimeoutError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("no/such/key"), std::string::npos) << msg;
    EXPECT_NE(msg.find("127.0.0.1:" + std::to_string(store.port())), std::string::npos) << msg;
    EXPECT_NE(msg.find(" ms"), std::string::npos) << msg;
  }
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, milliseconds(290));
  EXPECT_LT(waited, milliseconds(3000));
  // The connection is still usable after a timeout.
  store.set("k", "v");
  EXPECT_EQ(store.get_string("k"), "v");
}

TEST(TCPStoreTest, ClientRetriesUntilLateServerStarts) {
  const uint16_t port = FreePort();
  RunRanks(2, [port](const RankContext& ctx) {
    if (ctx.rank == 1) {
      // The server appears 1.5 s after the client started connecting.
      std::this_thread::sleep_for(milliseconds(1500));
      TCPStoreServer server("127.0.0.1", port);
      TCPStore mine("127.0.0.1", port, false, 0, std::chrono::seconds(10));
      EXPECT_EQ(mine.get_string("from-late-client"), "made-it");
      ctx.store->set("late-server/done", "1");
      return;
    }
    auto t0 = std::chrono::steady_clock::now();
    TCPStore client("127.0.0.1", port, false, 0, std::chrono::seconds(10));
    EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(1000));
    client.set("from-late-client", "made-it");
    ctx.store->wait({"late-server/done"});
  });
}

TEST(TCPStoreTest, ConnectGivesUpAfterTimeoutNamingAddress) {
  const uint16_t port = FreePort();
  auto t0 = std::chrono::steady_clock::now();
  try {
    TCPStore client("127.0.0.1", port, false, 0, milliseconds(500));
    FAIL() << "connected to a port nobody listens on";
  } catch (const phi::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << e.what();
  }
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(400));
}

TEST(TCPStoreTest, ServerBindsOnlyTheGivenAddressAndAdoptsFds) {
  TCPStoreServer server("127.0.0.1", 0);
  ASSERT_TRUE(server.running());
  EXPECT_EQ(server.host(), "127.0.0.1");
  // A second server cannot take the same address.
  EXPECT_THROW(TCPStoreServer("127.0.0.1", server.port()), phi::UnavailableError);

  // Adopting a listening socket bound by someone else (a launcher).
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(fd, 16), 0);
  TCPStoreServer adopted;
  adopted.StartWithListeningFd(fd, "127.0.0.1");
  TCPStore client("127.0.0.1", adopted.port(), false, 0, std::chrono::seconds(5));
  client.set("a", "b");
  EXPECT_EQ(client.get_string("a"), "b");
}

TEST(TCPStoreTest, MasterWaitsForAllWorkers) {
  RunRanks(3, [](const RankContext& ctx) {
    if (ctx.rank == 0) ctx.store->set("port", std::to_string(FreePort()));
    const uint16_t port = static_cast<uint16_t>(std::stoi(ctx.store->get_string("port")));
    if (ctx.rank == 2) std::this_thread::sleep_for(milliseconds(500));
    auto t0 = std::chrono::steady_clock::now();
    TCPStore store("127.0.0.1", port, ctx.rank == 0, 3, std::chrono::seconds(20));
    if (ctx.rank == 0) {
      EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(400));
      EXPECT_EQ(store.add("__tcpstore_init/workers", 0), 3);
    }
    HostStaysUntilAllDone(ctx, "workers-done");
  });
}

// A rank 0 that fails first must not take the store with it: the master's destructor keeps
// serving another process's client until it leaves, bounded by FLAGS_store_host_linger_s,
// and does not wait for clients of its own process.
TEST(TCPStoreTest, MasterKeepsServingOtherProcessesUntilTheyLeave) {
  RunRanks(2, [](const RankContext& ctx) {
    using Clock = std::chrono::steady_clock;
    if (ctx.rank == 0) {
      auto host = std::make_unique<TCPStore>("127.0.0.1", 0, true, 0, std::chrono::seconds(20));
      auto own_clone = host->Clone();  // a client of this process: never waited for
      ctx.store->set("port", std::to_string(host->port()));
      host->wait({"joined"});
      auto t0 = Clock::now();
      host.reset();
      const auto waited = Clock::now() - t0;
      EXPECT_GE(waited, milliseconds(400)) << "the master went while rank 1 still used it";
      EXPECT_LT(waited, std::chrono::seconds(8));
      // Rank 1 now stays connected past the linger time: the master goes after it.
      FLAGS_store_host_linger_s = 1;
      auto second = std::make_unique<TCPStore>("127.0.0.1", 0, true, 0, std::chrono::seconds(20));
      ctx.store->set("port2", std::to_string(second->port()));
      second->wait({"joined2"});
      t0 = Clock::now();
      second.reset();
      EXPECT_GE(Clock::now() - t0, milliseconds(900));
      EXPECT_LT(Clock::now() - t0, milliseconds(2500));
      ctx.store->set("second-gone", "1");
      // With only its own clone left, a master goes at once.
      auto third = std::make_unique<TCPStore>("127.0.0.1", 0, true, 0, std::chrono::seconds(20));
      auto clone3 = third->Clone();
      clone3->set("k", "v");
      t0 = Clock::now();
      third.reset();
      EXPECT_LT(Clock::now() - t0, milliseconds(300));
      // A master that is never destroyed: the exit path (atexit, watchdog abort) waits too.
      auto kept = std::make_unique<TCPStore>("127.0.0.1", 0, true, 0, std::chrono::seconds(20));
      ctx.store->set("port4", std::to_string(kept->port()));
      kept->wait({"joined4"});
      t0 = Clock::now();
      TCPStore::KeepHostedStoresForOtherProcesses();
      EXPECT_GE(Clock::now() - t0, milliseconds(400));
      EXPECT_EQ(kept->get_string("after4"), "4");
      (void)own_clone;
      return;
    }
    {
      TCPStore client("127.0.0.1", static_cast<uint16_t>(std::stoi(ctx.store->get_string("port"))),
                      false, 0, std::chrono::seconds(20));
      client.set("joined", "1");
      std::this_thread::sleep_for(milliseconds(600));  // rank 0 is in its destructor now
      client.set("after", "2");
      EXPECT_EQ(client.get_string("after"), "2");
    }
    TCPStore lingering("127.0.0.1",
                       static_cast<uint16_t>(std::stoi(ctx.store->get_string("port2"))), false,
                       0, std::chrono::seconds(20));
    lingering.set("joined2", "1");
    ctx.store->wait({"second-gone"});
    TCPStore last("127.0.0.1", static_cast<uint16_t>(std::stoi(ctx.store->get_string("port4"))),
                  false, 0, std::chrono::seconds(20));
    last.set("joined4", "1");
    std::this_thread::sleep_for(milliseconds(600));
    last.set("after4", "4");
  });
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
