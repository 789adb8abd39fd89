// The liveness service (phi/core/distributed/liveness.h) across real processes and a real
// TCPStore: what each state reads as, from another rank.
#include "phi/core/distributed/liveness.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <thread>

#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

using phi::distributed::Liveness;
using phi::distributed::RankLiveness;
using State = RankLiveness::State;
using std::chrono::milliseconds;

// Rank r's fact as seen now (init ranks).
RankLiveness Fact(int r) { return Liveness::Process().Query(phi::distributed::kInitRanks, {r})[0]; }

// Polls until rank r reads as `state`, at most 5 s.
RankLiveness AwaitState(int r, State state) {
  RankLiveness f;
  for (int i = 0; i < 100; ++i) {
    f = Fact(r);
    if (f.state == state) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return f;
}

TEST(Liveness, EachStateAsAnotherRankSeesIt) {
  auto results = SpawnRanks(4, [](const RankContext& ctx) {
    Liveness::Process().Start(ctx.store, ctx.rank, milliseconds(100));
    ctx.store->set("started/" + std::to_string(ctx.rank), "1");
    ctx.store->wait({"started/0", "started/1", "started/2", "started/3"}, std::chrono::seconds(30));
    if (ctx.rank == 1) {
      Liveness::Process().Announce("aborted group 7: a peer failed");
      ctx.store->set("announced", "1");
      ctx.store->wait({"stop/1"}, std::chrono::seconds(30));
      Liveness::Process().Stop();
      ctx.store->set("stopped/1", "1");
      ctx.store->wait({"done"}, std::chrono::seconds(30));
      return;
    }
    if (ctx.rank == 2) {
      ctx.store->wait({"kill/2"}, std::chrono::seconds(30));
      raise(SIGKILL);  // no exit handler runs: the store marks it dead as its connection closes
    }
    if (ctx.rank == 3) {
      ctx.store->wait({"done"}, std::chrono::seconds(30));
      return;
    }
    // Rank 0 looks.
    EXPECT_EQ(Fact(0).state, State::kAlive);
    RankLiveness three = Fact(3);
    EXPECT_EQ(three.state, State::kAlive);
    EXPECT_EQ(three.what, "running");
    EXPECT_GE(three.age_ms, 0);
    EXPECT_LT(three.age_ms, 1000);

    ctx.store->wait({"announced"}, std::chrono::seconds(30));
    RankLiveness one = Fact(1);
    EXPECT_EQ(one.state, State::kAlive);
    EXPECT_EQ(one.ToString(), "rank 1: alive, aborted group 7: a peer failed (heartbeat " +
                                  std::to_string(one.age_ms) + " ms ago)");

    ctx.store->set("kill/2", "1");
    RankLiveness two = AwaitState(2, State::kDead);
    EXPECT_EQ(two.state, State::kDead) << two.ToString();
    EXPECT_NE(two.what.find("ended without a goodbye"), std::string::npos) << two.what;

    ctx.store->set("stop/1", "1");
    ctx.store->wait({"stopped/1"}, std::chrono::seconds(30));
    EXPECT_EQ(Fact(1).state, State::kExited) << Fact(1).ToString();  // a stop is no death

    // A launcher's mark; a rank never started; a rank whose beat is old.
    phi::distributed::MarkRankDead(*ctx.store, 3, "the launcher says it exited with code 1");
    EXPECT_EQ(Fact(3).ToString(), "rank 3: dead (the launcher says it exited with code 1)");
    EXPECT_EQ(Fact(9).state, State::kNeverSeen);
    ctx.store->set("liveness/8", "1000 42 somehost|running");
    EXPECT_EQ(Fact(8).state, State::kSilent);

    // What an error says: only the trouble, or every rank asked about.
    const std::string trouble = Liveness::Process().TroubleIn(phi::distributed::kInitRanks, 4, 0);
    EXPECT_NE(trouble.find("rank 1: exited"), std::string::npos) << trouble;
    EXPECT_NE(trouble.find("rank 2: dead"), std::string::npos) << trouble;
    EXPECT_NE(trouble.find("rank 3: dead"), std::string::npos) << trouble;
    Liveness::Process().MapGroup(5, {3, 0});  // a group whose rank 0 is init rank 3
    EXPECT_EQ(Liveness::Process().About(5, {0}),
              " [liveness: rank 0: dead (the launcher says it exited with code 1)]");
    EXPECT_EQ(Liveness::Process().About(6, {0}), "");  // a group nobody mapped: nothing known
    ctx.store->set("done", "1");
  });
  EXPECT_TRUE(results[0].ok()) << results[0].Describe() << "\n" << results[0].output;
  EXPECT_TRUE(results[1].ok()) << results[1].Describe() << "\n" << results[1].output;
  EXPECT_EQ(results[2].term_signal, SIGKILL) << results[2].Describe();
  EXPECT_TRUE(results[3].ok()) << results[3].Describe() << "\n" << results[3].output;
}

TEST(Liveness, AStoppedProcessGoesSilent) {
  auto results = SpawnRanks(2, [](const RankContext& ctx) {
    Liveness::Process().Start(ctx.store, ctx.rank, milliseconds(100));
    ctx.store->set("started/" + std::to_string(ctx.rank), "1");
    if (ctx.rank == 1) {
      ctx.store->set("pid/1", std::to_string(::getpid()));
      ctx.store->wait({"stop"}, std::chrono::seconds(30));
      raise(SIGSTOP);  // rank 0 kills it once it has looked
      return;
    }
    ctx.store->wait({"started/1"}, std::chrono::seconds(30));
    ctx.store->set("stop", "1");
    // Silent after three beats and a second; no process ended, so nothing marks it dead.
    EXPECT_EQ(Liveness::Process().silent_after(), milliseconds(1300));
    RankLiveness one = AwaitState(1, State::kSilent);
    EXPECT_EQ(one.state, State::kSilent) << one.ToString();
    EXPECT_NE(one.ToString().find("stopped, hung, or cut off"), std::string::npos);
    ::kill(std::stoi(ctx.store->get_string("pid/1")), SIGKILL);
  }, [] {
    SpawnOptions o;
    o.timeout = std::chrono::seconds(20);
    o.kill_all_on_failure = false;
    return o;
  }());
  EXPECT_TRUE(results[0].ok()) << results[0].Describe() << "\n" << results[0].output;
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
