// Fork-based multi-process test harness, used by every multi-rank test of the project.
//
//   RunRanks(4, [](const RankContext& ctx) {
//     ctx.store->set("k" + std::to_string(ctx.rank), "v");
//     EXPECT_EQ(...);               // gtest assertions work inside a rank
//   });
//
// The parent forks the children FIRST (it has no store thread yet, so fork copies a
// single-threaded process), then starts a real TCPStoreServer on 127.0.0.1 with a free
// port and sends that port to each child through a pipe. Each child connects a real
// TCPStore client, exports MASTER_ADDR / MASTER_PORT / RANK / WORLD_SIZE / LOCAL_RANK and
// PADDLE_STORE_HOSTED=1 (so Rendezvous("env://") in a child joins the parent's server),
// runs fn, and leaves with _exit: 0 only when fn returned and no gtest assertion failed in
// it. stdout and stderr of each child are captured separately.
#pragma once

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "phi/core/distributed/store/store.h"

namespace paddle_like {
namespace testing {

struct RankContext {
  int rank = 0;
  int world_size = 0;
  std::string host;  // the parent's store server
  int port = 0;
  std::shared_ptr<phi::distributed::Store> store;  // a TCPStore client of it
};

struct SpawnOptions {
  // Wall-clock limit for all ranks together; then every child still running gets SIGKILL.
  std::chrono::milliseconds timeout = std::chrono::seconds(120);
  // The timeout of each child's TCPStore (its get/wait deadline).
  std::chrono::milliseconds store_timeout = std::chrono::seconds(60);
  // Environment variables set in every child before fn runs.
  std::map<std::string, std::string> env;
  // When one rank fails, SIGKILL the others at once instead of letting them run into their
  // own timeouts. Off for tests that check how survivors notice a dead peer.
  bool kill_all_on_failure = false;
};

struct ChildResult {
  int rank = -1;
  int pid = -1;
  int exit_code = -1;    // valid when the child exited
  int term_signal = 0;   // the signal that ended it, 0 if it exited
  bool timed_out = false;  // killed by the harness's timeout
  bool killed_by_harness = false;  // killed by the timeout or kill_all_on_failure
  std::string output;    // everything it wrote to stdout and stderr

  bool ok() const { return term_signal == 0 && exit_code == 0; }
  // "rank 2 (pid 123): exit code 1" / "killed by signal 9 (timeout)".
  std::string Describe() const;
};

// How many times longer a healthy run takes in a sanitizer build, for the timeouts that bound
// a whole run (a hang still ends in a failure, just later). TSan runs ~10x slower per op.
#if defined(__SANITIZE_THREAD__)
constexpr int kSanitizerSlowdown = 4;
#elif defined(__SANITIZE_ADDRESS__)
constexpr int kSanitizerSlowdown = 2;
#else
constexpr int kSanitizerSlowdown = 1;
#endif

// Exit codes a child uses besides fn's outcome.
constexpr int kChildFailed = 1;          // fn threw or a gtest assertion failed
constexpr int kChildSetupFailed = 3;     // could not get the port or connect the store

std::vector<ChildResult> SpawnRanks(int world_size,
                                    const std::function<void(const RankContext&)>& fn,
                                    const SpawnOptions& opts = {});

// SpawnRanks, then ADD_FAILURE for every child that failed, with its rank, exit status or
// signal and its whole output.
void RunRanks(int world_size, const std::function<void(const RankContext&)>& fn,
              const SpawnOptions& opts = {});

// The number of threads of the calling process (/proc/self/status), -1 if unreadable: what
// the tests that bound a design's threads count.
inline int ThreadsOfThisProcess() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

}  // namespace testing
}  // namespace paddle_like
