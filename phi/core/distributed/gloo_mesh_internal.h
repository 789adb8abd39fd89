// GlooMesh: a Gloo context whose pairs connect on first use (internal to the Gloo engine;
// includes Gloo headers, so only gloo_*.cc files include it).
//
// Why: Gloo's connectFullMesh connects every pair at once, so the first op on a group waits
// for every member. A send/recv between two ranks must involve only those two, or a correct
// program deadlocks on when communicators get created (rank 2 busy on another group while
// ranks 0 and 1 talk). Here creation only opens this rank's listening ends and publishes
// their addresses in the store, without waiting for anyone; a pair connects when an op
// first needs it (EnsurePeer), and a collective connects all pairs first (EnsureAll).
//
// Connecting a pair blocks only the side that listens, until the other side connects
// (Gloo's initiator does not wait for its peer's thread). EnsureAll connects in rank order
// on every rank, which cannot form a waiting cycle: a rank waiting on peer p means p is
// still at a lower rank than this one, so following the waits the ranks strictly decrease.
#pragma once

#include <chrono>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gloo/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/pair.h>

#include "phi/core/distributed/store/store.h"

namespace phi {
namespace distributed {

class GlooMesh {
 public:
  // Opens the listening ends and publishes them under "<prefix>/addr/<rank>" in `store`.
  // Does not wait for any other rank. `liveness_gid`: the group whose ranks these are, for
  // the liveness facts in errors (Liveness::Query).
  GlooMesh(std::shared_ptr<Store> store, int rank, int size,
           std::shared_ptr<::gloo::transport::Device> device, std::chrono::milliseconds timeout,
           std::string describe, int liveness_gid);
  ~GlooMesh();

  // The context Gloo's algorithms run on (its pairs may be unconnected: call EnsurePeer /
  // EnsureAll first).
  const std::shared_ptr<::gloo::Context>& context() const { return context_; }

  // Connects the pair with `peer` unless it is connected. Waits at most the timeout for
  // the peer to create its side; the error names the peer. Thread-safe.
  void EnsurePeer(int peer);
  // Connects every pair (rank order). A timeout names every rank that never created its
  // side of the group.
  void EnsureAll();

  // Closes every connected pair (Abort): a peer's op on them fails at once with a network
  // error instead of waiting for its timeout. This rank's own op blocked in one of Gloo's
  // waits is not woken (Gloo's close does not signal the pair's buffers, and the one call
  // that does is not public); GlooCommContext wakes the waits it owns itself. A pair still
  // being connected (its lock held) is left to fail at its own timeout. Idempotent; never
  // raises.
  void CloseConnected();

  // This rank's listening address without the port (the network the group runs on).
  const std::string& host() const { return my_host_; }

  // " [the peer at ADDR is rank R]" for each known peer address in `msg`.
  std::string NamePeersIn(const std::string& msg) const;

  // After a timeout: which ranks are silent? A partition or a stopped rank sends no FIN and
  // no RST, so Gloo's timeout names nobody. Every rank that fails posts "fail/<rank>" in the
  // store and waits up to `budget` for the others' posts; the ranks that never post are the
  // lost ones (stopped, hung, or cut off). When the store itself is unreachable, this rank
  // is on the cut-off side and names the ranks on other hosts. The first call does the work
  // (the communicator is broken after it); later calls return the same text, which ends
  // with the liveness facts of the silent ranks (alive: stuck elsewhere). Defined in
  // gloo_roll_call.cc.
  std::string RollCall(std::chrono::milliseconds budget);
  // The budget of later connections (set_timeout). Any thread.
  void SetTimeout(std::chrono::milliseconds timeout) { timeout_.store(timeout); }

 private:
  std::string AddrKey(int rank) const;
  // store_->wait within the timeout, in slices (see the .cc).
  void WaitKeys(const std::vector<std::string>& keys);
  void ConnectLocked(int peer);  // holds peer_mu_[peer]

  std::shared_ptr<Store> store_;
  bool own_store_;  // store_ is the mesh's own connection (the store can be cloned)
  int rank_, size_;
  const int liveness_gid_;
  std::atomic<std::chrono::milliseconds> timeout_;
  std::string describe_;
  std::shared_ptr<::gloo::transport::Device> device_;
  std::shared_ptr<::gloo::transport::Context> transport_;
  std::shared_ptr<::gloo::Context> context_;
  std::vector<std::unique_ptr<std::mutex>> peer_mu_;
  std::vector<char> connected_;  // per peer, guarded by that peer's mutex
  std::atomic<bool> all_connected_{false};
  mutable std::mutex names_mu_;
  std::map<std::string, int> peer_by_address_;  // a peer's listening address -> its rank
  std::vector<int> remote_peers_;               // connected peers on other hosts
  std::string my_host_;                         // this rank's listening IP (without the port)
  std::mutex roll_mu_;
  bool rolled_ = false;
  std::string roll_result_;
};

}  // namespace distributed
}  // namespace phi
