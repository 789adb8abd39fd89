// Rendezvous: turn an init method into a connected Store plus this process's rank.
//
//   env://                      MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, or
//                               Paddle's PADDLE_MASTER="host:port", PADDLE_TRAINER_ID,
//                               PADDLE_TRAINERS_NUM, PADDLE_RANK_IN_NODE
//   tcp://host:port?rank=R&world_size=N
//   file:///path?rank=R&world_size=N
//
// rank / world_size passed as arguments (>= 0) count as one more source. Every source that
// is given must agree with the others. Anything missing, malformed or contradictory is
// collected and raised as ONE phi::InvalidArgumentError that lists all of it.
//
// For env:// and tcp:// rank 0 hosts the TCPStoreServer in-process (bound to exactly
// master_addr) unless PADDLE_STORE_HOSTED=1 says a launcher already runs it; then every
// rank is a client. LOCAL_RANK defaults to the rank (single node) when no source gives it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "phi/core/distributed/store/store.h"

namespace phi {
namespace distributed {

constexpr const char* kStoreHostedEnv = "PADDLE_STORE_HOSTED";

struct RendezvousSpec {
  enum class Kind { kTcp, kFile };
  Kind kind = Kind::kTcp;
  std::string master_addr;  // kTcp
  uint16_t master_port = 0;  // kTcp
  std::string path;         // kFile
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;
  bool host_server = false;  // this process starts the TCPStoreServer
};

struct RendezvousResult {
  std::shared_ptr<Store> store;
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;
};

// Looks an environment variable up; std::nullopt when unset. Injectable for tests.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup ProcessEnv();

// Pure parsing and validation: connects nothing.
RendezvousSpec ParseInitMethod(const std::string& init_method, int rank = -1,
                               int world_size = -1, const EnvLookup& env = ProcessEnv());

// Parses, then connects (rank 0 starting the server where it hosts it). With TCP every rank
// registers and rank 0 returns only once world_size ranks have, or raises
// phi::TimeoutError after `timeout`.
RendezvousResult Rendezvous(const std::string& init_method, int rank = -1, int world_size = -1,
                            std::chrono::milliseconds timeout = Store::kDefaultTimeout);

}  // namespace distributed
}  // namespace phi
