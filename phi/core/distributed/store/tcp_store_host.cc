// Store hosting: a master that keeps serving other processes' clients while they still use
// it, when it is destroyed and when its process exits (tcp_store_host_internal.h).
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "phi/core/distributed/store/tcp_store.h"
#include "phi/core/distributed/store/tcp_store_host_internal.h"
#include "phi/core/distributed/store/tcp_store_server.h"
#include "phi/core/flags.h"

namespace phi {
namespace distributed {
namespace {

using Clock = std::chrono::steady_clock;

int64_t MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// The clients and masters of this process, so a master can tell which of its server's
// connections belong to other processes.
struct InProcessStores {
  std::mutex mu;
  std::multiset<std::string> client_endpoints;
  std::set<TCPStore*> masters;
  pid_t masters_pid = 0;  // a forked child inherits the set but not the servers' threads
};
InProcessStores& Registry() {
  static auto* r = new InProcessStores;  // never destroyed: used from exit paths
  return *r;
}

// Connections of `server` from clients of other processes that still use the store: one
// that waits for a key, or sent something lately. A rank that still runs talks to the store
// at least every watchdog tick (its progress), so a connection silent for several ticks is
// a rank that is gone or cut off, which the store cannot help any more. Caller holds
// Registry().mu.
size_t LiveClientsOfOtherProcesses(const TCPStoreServer& server) {
  const std::chrono::milliseconds silent_after(
      std::max(2000, 4 * FLAGS_comm_watchdog_interval_ms));
  size_t n = 0;
  for (const auto& c : server.Clients()) {
    if (!c.endpoint.empty() && Registry().client_endpoints.count(c.endpoint)) continue;
    if (c.waiting || c.idle < silent_after) ++n;
  }
  return n;
}

// Polls `count` (called with Registry().mu held) until it is 0 or the linger time passed.
template <typename Count>
void LingerWhile(const std::string& who, Count count) {
  const auto started = Clock::now();
  const auto deadline = started + std::chrono::seconds(std::max(0, FLAGS_store_host_linger_s));
  size_t n = 0;
  bool announced = false;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(Registry().mu);
      n = count();
    }
    if (n == 0) break;
    if (!announced) {
      VLOG(1) << who << ": " << n << " client(s) of other processes still use it; serving "
              << "them for up to " << FLAGS_store_host_linger_s << " s before going";
      announced = true;
    }
    if (Clock::now() >= deadline) {
      LOG(WARNING) << who << ": goes with " << n << " client(s) of other processes still "
                   << "using it after " << MsSince(started) << " ms (FLAGS_store_host_linger_s="
                   << FLAGS_store_host_linger_s << ")";
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (announced) VLOG(1) << who << ": the last client left after " << MsSince(started) << " ms";
}

}  // namespace

namespace storehost {

void NoteClientEndpoint(const std::string& endpoint) {
  std::lock_guard<std::mutex> lock(Registry().mu);
  Registry().client_endpoints.insert(endpoint);
}

void ForgetClientEndpoint(const std::string& endpoint) {
  std::lock_guard<std::mutex> lock(Registry().mu);
  auto& endpoints = Registry().client_endpoints;
  auto it = endpoints.find(endpoint);
  if (it != endpoints.end()) endpoints.erase(it);
}

void RegisterMaster(TCPStore* master) {
  std::lock_guard<std::mutex> lock(Registry().mu);
  Registry().masters.insert(master);
  Registry().masters_pid = getpid();
  // A master is often never destroyed (a process group kept in a leaked registry holds it):
  // a normal exit keeps it for the other processes too.
  static const bool hooked =
      (std::atexit([] { TCPStore::KeepHostedStoresForOtherProcesses(); }), true);
  (void)hooked;
}

void UnregisterMaster(TCPStore* master) {
  std::lock_guard<std::mutex> lock(Registry().mu);
  Registry().masters.erase(master);
}

}  // namespace storehost

void TCPStore::LingerWhileOtherProcessesAreConnected() {
  LingerWhile("store host " + Where(), [this] { return LiveClientsOfOtherProcesses(*server_); });
}

void TCPStore::KeepHostedStoresForOtherProcesses() {
  {
    std::lock_guard<std::mutex> lock(Registry().mu);
    if (Registry().masters.empty() || Registry().masters_pid != getpid()) return;
  }
  LingerWhile("store host(s) of this process", [] {
    size_t n = 0;
    for (TCPStore* m : Registry().masters) n += LiveClientsOfOtherProcesses(*m->server_);
    return n;
  });
}

}  // namespace distributed
}  // namespace phi
