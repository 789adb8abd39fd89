// Point-to-point messages of the CPU engines on a transport of the runtime's own: sends and
// receives are posted without blocking and completed by a callback, by one reactor per
// process however many ops are in flight: its thread, or the thread that posts or waits when
// the reactor's work is free (p2p_reactor_internal.h), so that a small message needs no
// thread woken at either end (internal to the CPU engines).
//
// Why not Gloo's unbound buffers: a posted Gloo send or receive can only be waited for
// (there is no test and no callback), so every op in flight needed a thread blocked in its
// wait, and a wait that timed out poisoned every pair of the context.
//
// Connections. Each endpoint (one per communicator) listens on the address Gloo listens on
// and publishes "host port nonce" under the group's store prefix at creation (creation
// waits for nobody). A rank's messages to a peer travel on the connection it dials itself
// (on its first send to that peer, or on its first receive from it: see Prepare), so a
// send never waits for the peer to post anything; the peer answers a rendezvous on the
// same connection. The dialer first sends the listener's nonce and its rank: a stale or
// foreign connection is closed.
//
// Protocol (p2p_transport.cc). A message of up to kEagerBytes travels at once (header and
// payload). A larger one is announced (RTS); the receiver answers when a receive matches it
// (CTS, or REJECT when the receive expects another dtype or count), and only then does the
// payload follow, straight into the receive's buffer: an unmatched large message costs the
// receiver no memory. Between ranks that share a host (and FLAGS_cpu_shm_transport), the
// payload moves in one copy instead of two: the announcement lends the sender's memory
// (RTS-LOCAL: its pid and address), the receiver reads it into the receive's buffer
// (process_vm_readv), says so (FIN), and completes once the sender confirms that the send
// was still pending throughout (FIN-ACK); a send that timed out meanwhile answers WITHDRAWN
// and the receive fails. A receiver that cannot read the sender's memory asks for the
// payload on the socket instead (CTS), and the sender stops lending to it. Receives match messages of their (peer, tag), or any peer's for a
// receive from any source, in the order the receives were posted and the messages arrived.
//
// Failures. A malformed header, a connection that ends with ops pending, or an op past the
// endpoint's timeout fails the ops it concerns, with a typed error naming the peer
// (Unavailable, Timeout, External); a send that timed out closes its connection, so the
// peer's receive learns it at once instead of waiting for bytes that will never come.
// A receive that expects another dtype or count than the matching send carries fails with
// InvalidArgument naming both, its buffer unchanged, and the send completes (the pair stays
// in step). Abort fails every pending op and closes the connections; so does destruction.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "phi/core/data_type.h"
#include "phi/core/distributed/cpu_coalesce.h"
#include "phi/core/distributed/store/store.h"

namespace phi {
namespace distributed {

// Called once when the op has completed (null) or failed, on the thread running the
// reactor's work (p2p_reactor_internal.h): the reactor's, the poster's (a send written at
// once, an op that fails before it is posted) or a waiter's. It must not block.
using P2PDone = std::function<void(std::exception_ptr)>;

namespace p2p {
struct EndpointState;
}  // namespace p2p
class P2PReactor;

class P2PEndpoint {
 public:
  static constexpr int kAnyPeer = -1;
  static constexpr size_t kEagerBytes = size_t{64} << 10;

  // Listens on `host` and publishes this rank's address under `store` (the group's
  // prefix). Raises Unavailable when it cannot listen. `explain`, when set, adds to the
  // message of a failure that blames a peer (which rank is gone, and why); it runs on the
  // reactor's work, once per broken connection.
  P2PEndpoint(std::shared_ptr<Store> store, int rank, int size, const std::string& host,
              std::string describe, std::chrono::milliseconds timeout,
              std::function<std::string(const std::string&)> explain = nullptr);
  // Fails what is still pending (Unavailable) and closes the connections; no callback runs
  // after it returns.
  ~P2PEndpoint();
  P2PEndpoint(const P2PEndpoint&) = delete;
  P2PEndpoint& operator=(const P2PEndpoint&) = delete;

  // Makes sure this rank can post to and hear from `peer` (kAnyPeer: every peer): dials it
  // unless dialed. Blocks only to learn the peer's address (the group's timeout) the first
  // time; raises Timeout naming a peer that never created the group. Any thread.
  void Prepare(int peer);
  // Post an op; `data` stays valid and untouched until `done`. The peer must be another
  // rank (the caller checked). Never blocks on the peer once prepared. Any thread.
  void PostSend(const void* data, int64_t count, DataType dtype, int peer, int tag,
                P2PDone done);
  // `*source`, when given, is the sender's rank once the receive completed.
  void PostRecv(void* data, int64_t count, DataType dtype, int peer, int tag, int* source,
                P2PDone done);

  // Ops posted from now on time out after `timeout`. Any thread.
  void SetTimeout(std::chrono::milliseconds timeout);
  // Fails every pending op and every later one with Unavailable(why) and closes the
  // connections (the peers' ops fail at once). Any thread; idempotent.
  void Abort(const std::string& why);

  using State = p2p::EndpointState;  // the reactor's work's (p2p_transport_state_internal.h)
  // The reactor this endpoint's sockets are served by: a waiter polls it (RunP2POps).
  std::shared_ptr<P2PReactor> Reactor() const;

 private:
  std::shared_ptr<State> state_;
  std::shared_ptr<Store> store_;
  std::mutex dial_mu_;
  std::vector<bool> dialed_;  // under dial_mu_
};

// Payload bytes this process's receives read from their senders' memory (the one-copy path
// between ranks of one host) since it started: what tests and benchmarks check the path by.
uint64_t P2PLentBytesReceived();
// Bytes this process's connections read from shared-memory channels instead of sockets
// (frames and eager payloads from ranks of this host, p2p_shm_channel.h) since it started.
uint64_t P2PChannelBytesReceived();

// Posts `ops` (sends and receives) and waits for all of them; raises the first error after
// every op ended. The endpoint's deadlines end each op; `timeout` (the group's) only sets
// when a wait that outlasts them is logged.
void RunP2POps(P2PEndpoint* endpoint, const std::vector<PendingCpuP2P>& ops,
               std::chrono::milliseconds timeout);

}  // namespace distributed
}  // namespace phi
