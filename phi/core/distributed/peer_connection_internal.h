// PeerConnection: a TCP connection of the runtime's own between the two ranks of a two-rank
// group (internal to the CPU engine). The group's fast paths run on it: the fused exchange
// (small all-reduces, all-gathers and the agreement check) and the streamed all-reduce.
//
// Why a connection of our own: those paths read and write the socket themselves (a blocking
// read where Gloo would wake its loop thread and then ours, a non-blocking duplex stream for
// the all-reduce). Gloo keeps its sockets private, and finding them from outside (as this
// code once did, through /proc/self/fd) picked another communicator's socket when two
// communicators of a process joined the same peers. A socket opened here is known by
// construction, and its timeouts, buffer sizes and shutdown are ours to set.
//
// Rendezvous: rank 0 listens on the address Gloo listens on (the same network, so the same
// reachability) and publishes "host port nonce" under the group's store prefix; rank 1
// connects and sends the nonce first, so rank 0 accepts only its peer (a stale or foreign
// connection to a reused port is closed and the accept goes on). Creating the connection
// waits for nobody; it connects at its first use, on both ranks.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "phi/core/distributed/spin_policy.h"
#include "phi/core/distributed/store/store.h"

namespace phi {
namespace distributed {

// Two byte streams moved at once on the connection (PeerConnection::Duplex): what this rank
// sends and where what it receives goes. Positions count from the stream's start.
class DuplexStreams {
 public:
  virtual ~DuplexStreams() = default;
  virtual size_t SendTotal() const = 0;
  // May grow once a header that says how much follows has arrived.
  virtual size_t RecvTotal() const = 0;
  // The bytes ready to send at `sent` (0 when the next ones are not ready yet) at *from; one
  // send call takes at most this many, so a stream that wants the loop to turn to its
  // receives in between returns less.
  virtual size_t ReadyToSend(size_t sent, const char** from) = 0;
  // Where the bytes received at `received` go (*to) and how many fit there (> 0).
  virtual size_t RoomToReceive(size_t received, char** to) = 0;
  // Bytes [before, after) arrived.
  virtual void Received(size_t before, size_t after) = 0;
};

// A connection to the rank that published "host port nonce" under `key` in `store` (the
// rendezvous of PeerConnection and of the point-to-point endpoint): waits for the key in
// slices (Unavailable once `aborted()`; Timeout naming `peer` at `deadline`), connects,
// retrying until the deadline, and returns the connected non-blocking fd, with the nonce the
// listener expects in *nonce and, when `rest` is given, what the value holds after the nonce
// (trimmed). The caller greets.
int DialPublishedAddress(Store* store, const std::string& key, int peer,
                         std::chrono::steady_clock::time_point deadline,
                         const std::function<bool()>& aborted, const std::string& describe,
                         uint64_t* nonce, std::string* rest = nullptr);

class PeerConnection {
 public:
  // `rank` is 0 or 1. Rank 0 listens on `host` and publishes its address under `key` in
  // `store`; raises Unavailable when it cannot listen. Waits for nobody.
  PeerConnection(std::shared_ptr<Store> store, std::string key, int rank,
                 const std::string& host, std::string describe);
  ~PeerConnection();
  PeerConnection(const PeerConnection&) = delete;
  PeerConnection& operator=(const PeerConnection&) = delete;

  // Connects unless connected, within `timeout` (Timeout naming the peer when it never
  // comes; Unavailable after Shutdown). Only the comm stream's thread.
  void Connect(std::chrono::milliseconds timeout);

  // Moves both streams to their totals. Sends and receives are non-blocking and interleaved,
  // so neither rank waits for the other to read whatever the kernel buffers hold. Waits for
  // the peer under `spin`'s rule (spin_policy.h), then in poll. Raises Timeout when the peer
  // sent nothing for `timeout` (counted from its last bytes: a long transfer that keeps
  // moving does not time out), Unavailable when the connection fails or closes early; both
  // name the peer, `what` and where the streams stood. Only the comm stream's thread.
  void Duplex(const char* what, DuplexStreams* streams, std::chrono::milliseconds timeout,
              SpinPolicy* spin);

  // Abort: shuts the connection down. A Duplex or Connect blocked on it, and every later
  // one, fails at once; the peer reads the end of the stream. Any thread; idempotent.
  void Shutdown();

 private:
  void Accept(std::chrono::steady_clock::time_point deadline);
  void Dial(std::chrono::steady_clock::time_point deadline);
  void Adopt(int fd);  // the connected socket, unless shut down meanwhile
  [[noreturn]] void Fail(const std::string& what, int err) const;

  std::shared_ptr<Store> store_;
  const std::string key_;
  const int rank_, peer_;
  const std::string describe_;
  uint64_t nonce_ = 0;  // rank 0's: what the peer must send first
  int listen_fd_ = -1;  // rank 0 until connected
  int fd_ = -1;         // the connection; written under mu_, read by the comm thread
  std::mutex mu_;       // fd_ and listen_fd_ against Shutdown
  std::atomic<bool> shut_{false};
};

}  // namespace distributed
}  // namespace phi
