// The Gloo engine as a CommContext: CPU collectives over TCP, run on a comm stream's
// worker thread. Includes no Gloo header (the implementation does).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "phi/core/distributed/comm_context.h"
#include "phi/core/distributed/store/store.h"

namespace phi {
namespace distributed {

struct GlooOptions {
  // Address Gloo listens on. Empty: GLOO_SOCKET_IFNAME / PADDLE_GLOO_IFNAME (an interface
  // name) if set, else 127.0.0.1 when the store's host (MASTER_ADDR, else PADDLE_MASTER's
  // host) is local or unset, else the local address of the route to the store's host (the
  // interface that reaches the store reaches the peers), else this host's name.
  std::string hostname;
  std::string iface;
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  std::string group_desc;  // the user's description of the group, in every message
  // Errors say whether the ranks they name are alive (phi/core/distributed/liveness.h): off
  // for a communicator whose ranks are not its group's (the hierarchical path's leaders).
  bool liveness = true;
};

// Where Gloo listens for `options`: exactly one of hostname / iface is set (the rule
// described at GlooOptions). Raw-Gloo baselines use it to match the engine.
struct GlooEndpoint {
  std::string hostname;
  std::string iface;
};
GlooEndpoint ResolveGlooEndpoint(const GlooOptions& options);

// Rendezvouses the full mesh through `store` under "gloo/<gid>/" and returns the context.
std::unique_ptr<CommContext> CreateGlooCommContext(const std::shared_ptr<Store>& store, int gid,
                                                   int rank, int size,
                                                   const GlooOptions& options);

}  // namespace distributed
}  // namespace phi
