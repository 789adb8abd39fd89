// The TCPStore server against hostile or broken clients: killed mid-request, malformed
// and truncated frames, missing or wrong auth tokens. After each abuse a correct client
// must still get correct answers.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "phi/core/distributed/store/store_auth.h"
#include "phi/core/distributed/store/tcp_store.h"
#include "tests/harness/multiprocess.h"
#include "tests/store/raw_client.h"
#include "tests/store/store_conformance.h"

namespace paddle_like {
namespace testing {
namespace {

using phi::distributed::TCPStore;
using phi::distributed::TCPStoreOptions;
using phi::distributed::tcpstore::Command;
using phi::distributed::tcpstore::Frame;
using phi::distributed::tcpstore::Status;
using std::chrono::milliseconds;

void WaitUntilDead(int pid) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (kill(pid, 0) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
}

// A fresh client proves the server still serves correctly.
void ExpectServerHealthy(const RankContext& ctx, const std::string& ns) {
  TCPStore fresh(ctx.host, static_cast<uint16_t>(ctx.port), false, 0, std::chrono::seconds(10));
  ExerciseStore(fresh, ns, /*exclusive=*/false);
}

TEST(TCPStoreRobustnessTest, SurvivesClientsKilledMidRequest) {
  auto results = SpawnRanks(4, [](const RankContext& ctx) {
    const std::string me = std::to_string(ctx.rank);
    if (ctx.rank > 0) {
      RawClient raw(ctx.host, ctx.port);
      Frame hello;
      ASSERT_TRUE(raw.ReadFrame(&hello));
      if (ctx.rank == 1) {  // half a frame, then death
        auto bytes = EncodeRequest(Command::kSet, {"half"}, {std::vector<uint8_t>(100, 'x')});
        bytes.resize(bytes.size() / 2);
        ASSERT_TRUE(raw.Send(bytes));
      } else if (ctx.rank == 2) {  // parked on the server in a long get, then death
        ASSERT_TRUE(raw.Send(EncodeRequest(Command::kGet, {"never-yet"}, {}, 60000)));
      } else {  // in the middle of sending 8 MiB
        auto bytes = EncodeRequest(Command::kSet, {"big"}, {std::vector<uint8_t>(8 << 20, 'y')});
        bytes.resize(3 << 20);
        ASSERT_TRUE(raw.Send(bytes));
      }
      ctx.store->set("victim/" + me, std::to_string(getpid()));
      raise(SIGKILL);
    }
    for (int r = 1; r < ctx.world_size; ++r) {
      WaitUntilDead(std::stoi(ctx.store->get_string("victim/" + std::to_string(r))));
    }
    // The dead client's parked get is now due an answer: writing it must not hurt.
    ctx.store->set("never-yet", "now");
    EXPECT_FALSE(ctx.store->check({"half"}));
    EXPECT_FALSE(ctx.store->check({"big"}));
    ExpectServerHealthy(ctx, "after-kills");
    EXPECT_EQ(ctx.store->get_string("never-yet"), "now");
  });
  ASSERT_EQ(results.size(), 4u);
  EXPECT_TRUE(results[0].ok()) << results[0].Describe() << "\n" << results[0].output;
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(results[r].term_signal, SIGKILL) << results[r].Describe() << "\n"
                                               << results[r].output;
  }
}

std::vector<std::vector<uint8_t>> CorpusMessages() {
  std::string dir = std::string(__FILE__);
  dir = dir.substr(0, dir.rfind('/')) + "/../fuzz/store_corpus";
  std::vector<std::vector<uint8_t>> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 5 || name.substr(name.size() - 4) != ".bin") continue;
    std::ifstream in(dir + "/" + name, std::ios::binary);
    out.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  closedir(d);
  return out;
}

// 1,000 messages: the fuzz seed corpus, then random bytes, mutated valid frames and
// truncated valid frames (seeded, so a failure reproduces).
std::vector<std::vector<uint8_t>> HostileMessages() {
  auto msgs = CorpusMessages();
  std::mt19937 rng(1234);
  auto valid = [&]() {
    switch (rng() % 4) {
      case 0: return EncodeRequest(Command::kSet, {"k" + std::to_string(rng() % 8)}, {{1, 2, 3}});
      case 1: return EncodeRequest(Command::kAdd, {"ctr"}, {}, rng() % 10);
      case 2: return EncodeRequest(Command::kMultiGet, {"a", "b"}, {}, 0);
      default: return EncodeRequest(Command::kCompareSet, {"c"}, {{}, {9}});
    }
  };
  while (msgs.size() < 1000) {
    std::vector<uint8_t> m;
    switch (rng() % 3) {
      case 0:
        m.resize(1 + rng() % 200);
        for (auto& b : m) b = static_cast<uint8_t>(rng());
        break;
      case 1:
        m = valid();
        for (int flips = 1 + rng() % 4; flips > 0; --flips) m[rng() % m.size()] ^= 1 << (rng() % 8);
        break;
      default:
        m = valid();
        m.resize(rng() % m.size());
        break;
    }
    msgs.push_back(std::move(m));
  }
  return msgs;
}

TEST(TCPStoreRobustnessTest, SurvivesAThousandMalformedOrTruncatedMessages) {
  ASSERT_GE(CorpusMessages().size(), 20u) << "fuzz seed corpus not found next to the tests";
  RunRanks(4, [](const RankContext& ctx) {
    auto msgs = HostileMessages();
    ASSERT_EQ(msgs.size(), 1000u);
    int closed = 0;
    for (size_t i = static_cast<size_t>(ctx.rank); i < msgs.size(); i += ctx.world_size) {
      RawClient raw(ctx.host, ctx.port);
      ASSERT_TRUE(raw.connected()) << "server stopped accepting at message " << i;
      Frame hello;
      ASSERT_TRUE(raw.ReadFrame(&hello)) << "no hello at message " << i;
      raw.Send(msgs[i]);
      raw.ShutdownWrite();
      // Whatever it was, the server must answer or drop it and then close: never hang.
      ASSERT_TRUE(raw.ReadUntilEof(5000)) << "server kept connection open for message " << i;
      ++closed;
    }
    EXPECT_EQ(closed, 250);
    ctx.store->add("hostile/done", 1);
    if (ctx.rank == 0) {
      while (ctx.store->add("hostile/done", 0) < ctx.world_size) {
        std::this_thread::sleep_for(milliseconds(5));
      }
      ExpectServerHealthy(ctx, "after-garbage");
    }
  });
}

TEST(TCPStoreRobustnessTest, OversizedRequestsAreRefusedClientSide) {
  TCPStore store("127.0.0.1", 0, true, 0, std::chrono::seconds(5));
  EXPECT_THROW(store.set(std::string(5000, 'k'), "v"), phi::InvalidArgumentError);
  std::vector<uint8_t> big(1 << 20, 7);
  store.set("one-mib", big);
  EXPECT_EQ(store.get("one-mib"), big);
}

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(TCPStoreRobustnessTest, TokenRequiredWhenServerHasOne) {
  // The harness's server (in this process) and the children inherit the token.
  ScopedEnv token("PADDLE_STORE_TOKEN", "s3cret-token");
  RunRanks(2, [](const RankContext& ctx) {
    ctx.store->set("auth/ok", "1");  // the harness's client authenticated
    if (ctx.rank == 1) return;

    {  // No auth at all: only an error comes back, then the connection closes.
      RawClient raw(ctx.host, ctx.port);
      Frame hello;
      ASSERT_TRUE(raw.ReadFrame(&hello));
      EXPECT_EQ(hello.integer, 1);
      ASSERT_EQ(hello.values.size(), 1u);
      EXPECT_EQ(hello.values[0].size(), 32u);
      raw.Send(EncodeRequest(Command::kSet, {"auth/intruder"}, {{1}}));
      raw.Send(EncodeRequest(Command::kGet, {"auth/ok"}, {}, 0));
      Frame reply;
      ASSERT_TRUE(raw.ReadFrame(&reply));
      EXPECT_EQ(reply.type, static_cast<uint8_t>(Status::kError));
      EXPECT_TRUE(raw.ReadUntilEof(5000));
      EXPECT_TRUE(raw.pending().empty()) << "data leaked to an unauthenticated client";
    }
    {  // A digest for another connection's nonce (a replay) is refused.
      RawClient first(ctx.host, ctx.port), second(ctx.host, ctx.port);
      Frame h1, h2, reply;
      ASSERT_TRUE(first.ReadFrame(&h1));
      ASSERT_TRUE(second.ReadFrame(&h2));
      EXPECT_NE(h1.values[0], h2.values[0]);
      auto digest = phi::distributed::HmacSha256("s3cret-token", h1.values[0]);
      second.Send(EncodeRequest(Command::kAuth, {}, {digest}));
      ASSERT_TRUE(second.ReadFrame(&reply));
      EXPECT_EQ(reply.type, static_cast<uint8_t>(Status::kError));
      first.Send(EncodeRequest(Command::kAuth, {}, {digest}));
      ASSERT_TRUE(first.ReadFrame(&reply));
      EXPECT_EQ(reply.type, static_cast<uint8_t>(Status::kOk));
    }
    TCPStoreOptions o;
    o.host = ctx.host;
    o.port = static_cast<uint16_t>(ctx.port);
    o.timeout = std::chrono::seconds(5);
    o.token_from_env = false;
    try {
      TCPStore no_token(o);
      ADD_FAILURE() << "a client without the token connected";
    } catch (const phi::PreconditionNotMetError& e) {
      EXPECT_NE(std::string(e.what()).find("PADDLE_STORE_TOKEN"), std::string::npos) << e.what();
    }
    o.token = "wrong-token";
    try {
      TCPStore wrong(o);
      ADD_FAILURE() << "a client with a wrong token connected";
    } catch (const phi::PreconditionNotMetError& e) {
      EXPECT_NE(std::string(e.what()).find("authentication failed"), std::string::npos)
          << e.what();
    }
    o.token = "s3cret-token";
    TCPStore right(o);
    EXPECT_EQ(right.get_string("auth/ok"), "1");
    EXPECT_FALSE(right.check({"auth/intruder"}));
  });
}

TEST(TCPStoreRobustnessTest, OpenStoreWithoutToken) {
  unsetenv("PADDLE_STORE_TOKEN");
  TCPStore store("127.0.0.1", 0, true, 0, std::chrono::seconds(5));
  RawClient raw("127.0.0.1", store.port());
  Frame hello, reply;
  ASSERT_TRUE(raw.ReadFrame(&hello));
  EXPECT_EQ(hello.integer, 0);  // anyone who can reach the port may use the store
  raw.Send(EncodeRequest(Command::kSet, {"open"}, {{'y'}}));
  ASSERT_TRUE(raw.ReadFrame(&reply));
  EXPECT_EQ(reply.type, static_cast<uint8_t>(Status::kOk));
  EXPECT_EQ(store.get_string("open"), "y");
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
