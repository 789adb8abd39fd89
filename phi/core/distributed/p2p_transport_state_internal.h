// The point-to-point endpoint's state and wire format (internal to the transport:
// p2p_transport.cc holds the endpoint's API and the helpers, p2p_connections.cc the
// connections, p2p_protocol.cc the frames, matching, posting, deadlines and closing).
// Everything in EndpointState is the reactor work's, run by one thread at a time
// (p2p_reactor_internal.h), except the few atomics the posters read.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <iterator>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "phi/core/distributed/p2p_reactor_internal.h"
#include "phi/core/distributed/p2p_shm_channel.h"
#include "phi/core/distributed/p2p_transport_internal.h"

namespace phi {
namespace distributed {
namespace p2p {
using Clock = std::chrono::steady_clock;

constexpr uint32_t kFrameMagic = 0x46324c50;  // "PL2F"
constexpr uint32_t kHelloMagic = 0x48324c50;  // "PL2H"
// A hello followed by ShmChannel::kNameBytes of a segment's name: the dialer's bytes travel
// in that shared-memory channel from here on (p2p_shm_channel.h).
constexpr uint32_t kHelloShmMagic = 0x53324c50;  // "PL2S"
// A larger claimed payload is not a real message: the stream is out of step.
constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 40;
constexpr size_t kReadBuffer = size_t{256} << 10;
constexpr int kSocketBuffer = 4 << 20;
constexpr int kMaxIov = 32;
// A lent payload is read this much per reactor turn, so other connections are served between.
constexpr size_t kLentChunk = size_t{4} << 20;

// Sender -> receiver: kEager (payload follows), kRts (announces a large message), kData (the
// payload a kCts asked for), kWithdrawn (the send behind a kCts or kFin ended before it),
// kRtsLocal (announces a large message the receiver may read from the sender's memory),
// kFinAck (the memory read was the send's throughout). Receiver -> sender: kCts (send it),
// kReject (the receive expects another size: do not), kFin (read it from your memory).
enum FrameKind : uint32_t {
  kEager = 1, kRts, kData, kWithdrawn, kCts, kReject, kRtsLocal, kFin, kFinAck
};
inline bool ToSender(uint32_t kind) { return kind == kCts || kind == kReject || kind == kFin; }

struct Frame {
  uint32_t magic;
  uint32_t kind;
  int32_t tag;
  int32_t dtype;
  int64_t count;
  uint64_t id;        // the send's, for the rendezvous frames
  int64_t pid = 0;    // kRtsLocal: the sender's process
  uint64_t addr = 0;  // kRtsLocal: the payload's address there
};
static_assert(sizeof(Frame) == 48, "the wire format");

struct Hello {
  uint32_t magic;
  int32_t rank;
  uint64_t nonce;
};
static_assert(sizeof(Hello) == 16, "the wire format");

bool KnownDtype(int32_t d);
template <typename E>
std::exception_ptr Error(const std::string& msg) {
  return std::make_exception_ptr(E(msg));
}
// Runs `done` once (and forgets it); a callback that raises is logged.
void Finish(P2PDone& done, std::exception_ptr e);
// Large socket buffers: a rendezvous payload moves in few system calls.
void Tune(int fd);
std::string Spec(int64_t count, DataType dtype);
extern std::atomic<uint64_t> lent_bytes_received;
extern std::atomic<uint64_t> channel_bytes_received;
// Erases the elements of a list or map for which `pick` (which may act on them) is true.
template <typename Container, typename Pick>
void EraseIf(Container* c, Pick pick) {
  for (auto it = c->begin(); it != c->end();) it = pick(*it) ? c->erase(it) : std::next(it);
}

struct SendOp {
  uint64_t id = 0;
  int peer = -1, tag = 0;
  DataType dtype = DataType::UNDEFINED;
  int64_t count = 0;
  const char* data = nullptr;
  size_t bytes = 0;
  bool awaiting_cts = false;  // a large message announced, its payload not yet asked for
  bool lent = false;          // announced with kRtsLocal: the receiver may read `data`
  Clock::time_point deadline;
  P2PDone done;
};

struct RecvOp {
  int peer = -1, tag = 0;  // peer: P2PEndpoint::kAnyPeer allowed
  DataType dtype = DataType::UNDEFINED;
  int64_t count = 0;
  char* dst = nullptr;
  size_t bytes = 0;
  int* source = nullptr;
  Clock::time_point deadline;
  P2PDone done;
  // Matched to a lent payload: where it is, and how much of it was read.
  int64_t lent_pid = 0;
  uint64_t lent_addr = 0;
  size_t copied = 0;
  bool Matches(int from, int t) const {
    return tag == t && (peer == P2PEndpoint::kAnyPeer || peer == from);
  }
};

// A message that arrived before a receive matched it: an eager one with its payload, or a
// large one's announcement.
struct Unexpected {
  int peer, tag;
  DataType dtype;
  int64_t count;
  bool rts;
  uint64_t id;              // rts: the send's
  std::vector<char> bytes;  // eager: the payload
  int64_t lent_pid = 0;     // rts: the kRtsLocal's memory, or 0
  uint64_t lent_addr = 0;
};

struct OutSegment {
  Frame frame;
  Hello hello;        // used instead of frame when is_hello
  bool is_hello = false;
  const char* payload = nullptr;
  size_t payload_len = 0;
  size_t written = 0;       // of header + payload
  uint64_t completes = 0;   // the send that is complete once this is written; 0: none
  size_t header_len() const { return is_hello ? sizeof(Hello) : sizeof(Frame); }
  const char* header() const {
    return is_hello ? reinterpret_cast<const char*>(&hello) : reinterpret_cast<const char*>(&frame);
  }
};

struct Conn {
  int fd = -1;
  // The connection's bytes, when its peer shares this host: the socket then carries only
  // doorbells (and says when the peer is gone).
  std::shared_ptr<ShmChannel> shm;
  bool socket_readable = false;  // epoll said so: doorbells (or the end) to read
  uint64_t token = 0;
  int peer = -1;  // -1 until an accepted connection said who it is
  bool outgoing = false;
  bool writing = false;  // EPOLLOUT armed
  std::deque<OutSegment> out;
  std::vector<char> rbuf = std::vector<char>(kReadBuffer);
  size_t rbeg = 0, rend = 0;
  // The payload being read: into `sink` (a matched receive's buffer, an unexpected
  // message's bytes, or scratch to drain), `left` bytes to go.
  bool in_payload = false;
  char* sink = nullptr;
  size_t left = 0;
  Frame cur{};
  enum class Into { kRecv, kUnexpected, kDrain } into = Into::kDrain;
  RecvOp recv;             // kRecv: the receive it completes
  Unexpected unexpected{}; // kUnexpected
  std::vector<char> drain;
  std::exception_ptr after_drain;  // kDrain: the error its receive ends with, if any
  Clock::time_point last_bytes = Clock::now();  // the last bytes read
  Clock::time_point last_sent = Clock::now();   // the last bytes written
};

struct EndpointState : std::enable_shared_from_this<EndpointState> {
  std::shared_ptr<P2PReactor> reactor;
  int rank = 0, size = 0;
  std::string describe;
  // Published beside the address, what the shared-memory group publishes
  // (ShmGroup::HostValue: FLAGS_cpu_shm_transport and the host identity), read once; two
  // endpoints whose values ShmGroup::SharesMemory may read each other's memory.
  std::string host_value;
  uint64_t nonce = 0;
  std::atomic<int64_t> timeout_ms{0};
  std::function<std::string(const std::string&)> explain;
  std::atomic<bool> closed_flag{false};  // posters: fail at once

  // The reactor thread's.
  int listen_fd = -1;
  uint64_t listen_token = 0, timer_id = 0, poll_hook_id = 0;
  bool closed = false;
  std::string closed_why;
  std::vector<std::unique_ptr<Conn>> out, in;  // per peer: dialed by us / by the peer
  std::vector<std::string> out_broken, in_broken;
  std::vector<bool> lend_to;  // per peer: announce large sends with kRtsLocal
  std::list<std::unique_ptr<Conn>> unidentified;
  // Closed connections that no map holds any more, freed once no handler runs on them.
  std::vector<std::unique_ptr<Conn>> dead;
  std::map<uint64_t, SendOp> sends;  // by id
  uint64_t next_send_id = 1;
  std::list<RecvOp> posted;       // unmatched, in post order
  std::list<Unexpected> unexpected;  // unmatched, in arrival order
  std::map<std::pair<int, uint64_t>, RecvOp> awaiting_data;  // (peer, send id)

  Clock::time_point Deadline() const {
    return Clock::now() + std::chrono::milliseconds(timeout_ms.load());
  }
  std::string Why(const std::string& what) const { return describe + ": " + what; }

  // ---- connections (p2p_connections.cc)
  void WatchConn(Conn* c);
  void CloseConn(Conn* c);
  void AdoptOut(int peer, int fd, bool lend, std::shared_ptr<ShmChannel> channel);
  void AttachChannel(Conn* c, std::shared_ptr<ShmChannel> channel);
  // The connection's bytes, through its channel or its socket: as sendmsg and recv
  // (non-blocking: -1 with errno EAGAIN when nothing moves).
  ssize_t SendBytes(Conn* c, const iovec* iov, int n);
  ssize_t RecvBytes(Conn* c, char* buf, size_t len);
  void Doorbell(Conn* c);
  // The poll hook: what the channels hold, and room in them for what waits to be written.
  void PollChannels();
  void OnAccept();
  bool Identify(Conn* c);
  void Break(Conn* c, const std::string& why, bool blame_peer);

  // ---- writing (p2p_connections.cc)
  void Enqueue(Conn* c, OutSegment seg);
  void Flush(Conn* c);
  void CompleteSend(uint64_t id);
  static OutSegment Control(FrameKind kind, const Frame& about);

  // ---- reading (p2p_connections.cc)
  void OnEvents(Conn* c, uint32_t ev);
  void Read(Conn* c);
  void Ended(Conn* c, ssize_t n);
  void Malformed(Conn* c, const Frame& f, const char* what);
  void StartPayload(Conn* c, const Frame& f, Conn::Into into, char* sink, size_t bytes);

  // ---- frames (p2p_protocol.cc)
  void OnFrame(Conn* c, const Frame& f);
  void PayloadDone(Conn* c);

  // ---- matching (p2p_protocol.cc)
  std::list<RecvOp>::iterator FindPosted(int from, int tag);
  std::exception_ptr Mismatch(const RecvOp& r, int from, int tag, DataType dt, int64_t count);
  void Answer(Conn* c, const Frame& rts, RecvOp op);
  void ReadLent(std::pair<int, uint64_t> key);
  void Deliver(RecvOp op, Unexpected u);

  // ---- posting, on the reactor thread (p2p_protocol.cc)
  void DoSend(SendOp s);
  void DoRecv(RecvOp r);

  // ---- time and closing (p2p_protocol.cc)
  Clock::time_point Expire(Clock::time_point now);
  void Close(const std::string& why);
};

}  // namespace p2p
}  // namespace distributed
}  // namespace phi
