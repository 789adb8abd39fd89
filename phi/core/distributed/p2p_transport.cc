// The point-to-point endpoint (p2p_transport_internal.h): the protocol, run on the reactor
// thread (p2p_reactor_internal.h). Everything in State is the reactor thread's, except the
// few atomics the posters read.
#include "phi/core/distributed/p2p_transport_internal.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <random>
#include <sstream>

#include <glog/logging.h>

#include "phi/core/distributed/p2p_reactor_internal.h"
#include "phi/core/distributed/peer_connection_internal.h"
#include "phi/core/distributed/shm_group.h"
#include "phi/core/distributed/store/tcp_utils.h"
#include "phi/core/errors.h"
#include "phi/core/flags.h"

namespace phi {
namespace distributed {
namespace {
using Clock = std::chrono::steady_clock;

constexpr uint32_t kFrameMagic = 0x46324c50;  // "PL2F"
constexpr uint32_t kHelloMagic = 0x48324c50;  // "PL2H"
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
bool ToSender(uint32_t kind) { return kind == kCts || kind == kReject || kind == kFin; }

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

bool KnownDtype(int32_t d) {
  return d > static_cast<int32_t>(DataType::UNDEFINED) &&
         d <= static_cast<int32_t>(DataType::COMPLEX128);
}

template <typename E>
std::exception_ptr Error(const std::string& msg) {
  return std::make_exception_ptr(E(msg));
}

void Finish(P2PDone& done, std::exception_ptr e) {
  if (!done) return;
  P2PDone d = std::move(done);
  done = nullptr;
  try {
    d(std::move(e));
  } catch (const std::exception& ex) {
    LOG(ERROR) << "point-to-point completion raised: " << ex.what();
  }
}

// Large socket buffers: a rendezvous payload moves in few system calls.
void Tune(int fd) {
  tcputils::SetNoDelay(fd);
  int size = kSocketBuffer;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
}

std::atomic<uint64_t> lent_bytes_received{0};

std::string Spec(int64_t count, DataType dtype) {
  return std::to_string(count) + " elements of " + DataTypeToString(dtype);
}

// Published beside the address: processes with the same token may read each other's memory
// (the same boot and namespaces, ShmHostIdentity, and the flag on); "-" never matches.
std::string LocalToken() {
  if (!FLAGS_cpu_shm_transport) return "-";
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : ShmHostIdentity()) h = (h ^ ch) * 1099511628211ull;
  std::ostringstream out;
  out << std::hex << h;
  return out.str();
}
}  // namespace

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

struct P2PEndpoint::State : std::enable_shared_from_this<P2PEndpoint::State> {
  std::shared_ptr<P2PReactor> reactor;
  int rank = 0, size = 0;
  std::string describe;
  uint64_t nonce = 0;
  std::atomic<int64_t> timeout_ms{0};
  std::function<std::string(const std::string&)> explain;
  std::atomic<bool> closed_flag{false};  // posters: fail at once

  // The reactor thread's.
  int listen_fd = -1;
  uint64_t listen_token = 0, timer_id = 0;
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

  // ---- connections
  void WatchConn(Conn* c) {
    c->token = reactor->Watch(c->fd, EPOLLIN, [this, c](uint32_t ev) { OnEvents(c, ev); });
  }
  void CloseConn(Conn* c) {
    if (c->fd < 0) return;
    reactor->Unwatch(c->token);
    ::close(c->fd);
    c->fd = -1;
  }
  void AdoptOut(int peer, int fd, bool lend) {
    if (closed) {
      ::close(fd);
      return;
    }
    lend_to[peer] = lend;
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->peer = peer;
    c->outgoing = true;
    WatchConn(c.get());
    out[peer] = std::move(c);
  }
  void OnAccept() {
    for (;;) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      Tune(fd);
      auto c = std::make_unique<Conn>();
      c->fd = fd;
      WatchConn(c.get());
      unidentified.push_back(std::move(c));
    }
  }
  // An accepted connection's first bytes: who it is.
  bool Identify(Conn* c) {
    if (c->rend - c->rbeg < sizeof(Hello)) return false;
    Hello h;
    std::memcpy(&h, c->rbuf.data() + c->rbeg, sizeof(h));
    auto it = std::find_if(unidentified.begin(), unidentified.end(),
                           [c](const std::unique_ptr<Conn>& u) { return u.get() == c; });
    std::unique_ptr<Conn> owned = std::move(*it);
    unidentified.erase(it);
    if (h.magic != kHelloMagic || h.nonce != nonce || h.rank < 0 || h.rank >= size ||
        h.rank == rank || (in[h.rank] && in[h.rank]->fd >= 0)) {
      LOG(WARNING) << describe << ": closed a point-to-point connection from "
                   << tcputils::Endpoint(c->fd, true)
                   << " that did not identify as a rank of this group";
      CloseConn(c);
      dead.push_back(std::move(owned));
      return false;
    }
    c->rbeg += sizeof(Hello);
    c->peer = h.rank;
    if (in[h.rank]) dead.push_back(std::move(in[h.rank]));
    in[h.rank] = std::move(owned);
    in_broken[h.rank].clear();
    return true;
  }

  // A connection failed or ended: the ops it carried fail. What arrived whole before a
  // peer closed stays receivable.
  void Break(Conn* c, const std::string& why, bool blame_peer) {
    const int p = c->peer;
    CloseConn(c);
    if (p < 0) {  // never identified
      for (auto it = unidentified.begin(); it != unidentified.end(); ++it) {
        if (it->get() == c) {
          dead.push_back(std::move(*it));
          unidentified.erase(it);
          break;
        }
      }
      return;
    }
    std::string msg = Why(why);
    if (blame_peer && explain) msg += explain(msg);
    if (c->outgoing) {
      out_broken[p] = msg;
      for (auto it = sends.begin(); it != sends.end();) {
        if (it->second.peer == p) {
          Finish(it->second.done, Error<UnavailableError>(msg));
          it = sends.erase(it);
        } else {
          ++it;
        }
      }
    } else {
      in_broken[p] = msg;
      if (c->in_payload && c->into == Conn::Into::kRecv) {
        Finish(c->recv.done, Error<UnavailableError>(msg));
      }
      c->in_payload = false;
      for (auto it = posted.begin(); it != posted.end();) {
        if (it->peer == p) {
          Finish(it->done, Error<UnavailableError>(msg));
          it = posted.erase(it);
        } else {
          ++it;
        }
      }
      for (auto it = awaiting_data.begin(); it != awaiting_data.end();) {
        if (it->first.first == p) {
          Finish(it->second.done, Error<UnavailableError>(msg));
          it = awaiting_data.erase(it);
        } else {
          ++it;
        }
      }
      // An announced large message of a gone sender can never be sent.
      unexpected.remove_if([p](const Unexpected& u) { return u.peer == p && u.rts; });
    }
  }

  // ---- writing
  void Enqueue(Conn* c, OutSegment seg) {
    c->out.push_back(seg);
    if (!c->writing) Flush(c);
  }
  void Flush(Conn* c) {
    while (!c->out.empty() && c->fd >= 0) {
      iovec iov[kMaxIov];
      int n = 0;
      for (auto it = c->out.begin(); it != c->out.end() && n + 2 <= kMaxIov; ++it) {
        size_t skip = it->written;
        const size_t hl = it->header_len();
        if (skip < hl) {
          iov[n++] = {const_cast<char*>(it->header()) + skip, hl - skip};
          skip = 0;
        } else {
          skip -= hl;
        }
        if (it->payload_len > skip) {
          iov[n++] = {const_cast<char*>(it->payload) + skip, it->payload_len - skip};
        }
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = n;
      const ssize_t w = ::sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          if (!c->writing) {
            c->writing = true;
            reactor->Modify(c->token, EPOLLIN | EPOLLOUT);
          }
          return;
        }
        Break(c, std::string("sending to rank ") + std::to_string(c->peer) + " failed: " +
                     std::strerror(errno) + " (the connection to rank " +
                     std::to_string(c->peer) + " ended)",
              /*blame_peer=*/true);
        return;
      }
      size_t moved = static_cast<size_t>(w);
      c->last_sent = Clock::now();
      while (moved > 0 && !c->out.empty()) {
        OutSegment& s = c->out.front();
        const size_t total = s.header_len() + s.payload_len;
        const size_t take = std::min(moved, total - s.written);
        s.written += take;
        moved -= take;
        if (s.written == total) {
          const uint64_t id = s.completes;
          c->out.pop_front();
          if (id != 0) CompleteSend(id);
        }
      }
    }
    if (c->writing && c->fd >= 0) {
      c->writing = false;
      reactor->Modify(c->token, EPOLLIN);
    }
  }
  void CompleteSend(uint64_t id) {
    auto it = sends.find(id);
    if (it == sends.end()) return;
    P2PDone done = std::move(it->second.done);
    sends.erase(it);
    Finish(done, nullptr);
  }
  static OutSegment Control(FrameKind kind, const Frame& about) {
    OutSegment s;
    s.frame = Frame{kFrameMagic, kind, about.tag, about.dtype, about.count, about.id, 0, 0};
    return s;
  }

  // ---- reading
  void OnEvents(Conn* c, uint32_t ev) {
    dead.clear();  // none of them is `c`: a dead connection is no longer watched
    if (ev & EPOLLOUT) Flush(c);
    if (c->fd >= 0 && (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))) Read(c);
  }
  void Read(Conn* c) {
    for (;;) {
      if (c->fd < 0) return;
      if (c->peer < 0) {
        if (!Identify(c)) {
          if (c->fd < 0) return;
        } else {
          continue;
        }
      } else if (c->in_payload) {
        // A drained payload is read into its scratch over and over.
        const bool drain = c->into == Conn::Into::kDrain;
        const size_t have = std::min(std::min(c->left, c->rend - c->rbeg),
                                     drain ? c->drain.size() : c->left);
        if (have > 0) {
          std::memcpy(c->sink, c->rbuf.data() + c->rbeg, have);
          c->sink = drain ? c->drain.data() : c->sink + have;
          c->left -= have;
          c->rbeg += have;
          continue;
        }
        while (c->left > c->rbuf.size() / 2) {  // large: straight into its place
          const size_t room = drain ? std::min(c->left, c->drain.size()) : c->left;
          const ssize_t n = ::recv(c->fd, c->sink, room, MSG_DONTWAIT);
          if (n > 0) {
            c->sink = drain ? c->drain.data() : c->sink + n;
            c->left -= static_cast<size_t>(n);
            c->last_bytes = Clock::now();
            continue;
          }
          if (n < 0 && errno == EINTR) continue;
          if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
          return Ended(c, n);
        }
        if (c->left == 0) {
          PayloadDone(c);
          continue;
        }
      } else if (c->rend - c->rbeg >= sizeof(Frame)) {
        Frame f;
        std::memcpy(&f, c->rbuf.data() + c->rbeg, sizeof(f));
        c->rbeg += sizeof(f);
        OnFrame(c, f);
        continue;
      }
      // Need bytes: compact, then read what is there.
      if (c->rbeg == c->rend) {
        c->rbeg = c->rend = 0;
      } else if (c->rbeg > 0 && c->rend - c->rbeg < sizeof(Frame)) {
        std::memmove(c->rbuf.data(), c->rbuf.data() + c->rbeg, c->rend - c->rbeg);
        c->rend -= c->rbeg;
        c->rbeg = 0;
      }
      if (c->rend == c->rbuf.size()) continue;  // full: consume first
      const ssize_t n =
          ::recv(c->fd, c->rbuf.data() + c->rend, c->rbuf.size() - c->rend, MSG_DONTWAIT);
      if (n > 0) {
        c->rend += static_cast<size_t>(n);
        c->last_bytes = Clock::now();
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      return Ended(c, n);
    }
  }
  // recv returned 0 (the peer closed) or an error.
  void Ended(Conn* c, ssize_t n) {
    const int p = c->peer;
    const std::string who = "rank " + std::to_string(p);
    if (n == 0 && !c->in_payload && c->rbeg == c->rend) {
      // At a message boundary: the peer's communicator went away. Not an error by itself;
      // what was pending on it fails, and so does what is posted later.
      Break(c, who + " closed its point-to-point connection (its communicator was destroyed, "
                     "or its process ended)",
            /*blame_peer=*/true);
      return;
    }
    Break(c, "the point-to-point connection to " + who + " ended" +
                 (n == 0 ? std::string(" in the middle of a message")
                         : std::string(": ") + std::strerror(errno)),
          /*blame_peer=*/true);
  }
  void Malformed(Conn* c, const Frame& f, const char* what) {
    LOG(ERROR) << describe << ": " << what << " from rank " << c->peer;
    Break(c, std::string("malformed point-to-point message from rank ") +
                 std::to_string(c->peer) + " (" + what + ": magic " + std::to_string(f.magic) +
                 ", kind " + std::to_string(f.kind) + ", dtype " + std::to_string(f.dtype) +
                 ", count " + std::to_string(f.count) + "): the stream is out of step",
          /*blame_peer=*/false);
  }
  void StartPayload(Conn* c, const Frame& f, Conn::Into into, char* sink, size_t bytes) {
    c->cur = f;
    c->into = into;
    c->in_payload = true;
    if (into == Conn::Into::kDrain) {
      c->drain.resize(std::max<size_t>(1, std::min(bytes, kReadBuffer)));
      sink = c->drain.data();
    }
    c->sink = sink;
    c->left = bytes;
  }
  void OnFrame(Conn* c, const Frame& f) {
    const bool with_payload = f.kind == kEager || f.kind == kData;
    const uint64_t es = KnownDtype(f.dtype) ? SizeOf(static_cast<DataType>(f.dtype)) : 0;
    if (f.magic != kFrameMagic || f.kind < kEager || f.kind > kFinAck ||
        c->outgoing != ToSender(f.kind) || es == 0 || f.count < 0 ||
        static_cast<uint64_t>(f.count) > kMaxPayloadBytes / es) {
      return Malformed(c, f, "a malformed header");
    }
    const int p = c->peer;
    const size_t bytes = static_cast<size_t>(f.count) * es;
    const DataType dt = static_cast<DataType>(f.dtype);
    switch (f.kind) {
      case kEager: {
        auto r = FindPosted(p, f.tag);
        if (r == posted.end()) {
          c->unexpected = Unexpected{p, f.tag, dt, f.count, false, 0, {}};
          c->unexpected.bytes.resize(bytes);
          StartPayload(c, f, Conn::Into::kUnexpected, c->unexpected.bytes.data(), bytes);
        } else if (r->dtype == dt && r->count == f.count) {
          c->recv = std::move(*r);
          posted.erase(r);
          StartPayload(c, f, Conn::Into::kRecv, c->recv.dst, bytes);
        } else {
          c->recv = std::move(*r);
          posted.erase(r);
          c->after_drain = Mismatch(c->recv, p, f.tag, dt, f.count);
          StartPayload(c, f, Conn::Into::kDrain, nullptr, bytes);
        }
        break;
      }
      case kRts:
      case kRtsLocal: {
        auto r = FindPosted(p, f.tag);
        if (r == posted.end()) {
          const bool lent = f.kind == kRtsLocal;
          unexpected.push_back(Unexpected{p, f.tag, dt, f.count, true, f.id, {},
                                          lent ? f.pid : 0, lent ? f.addr : 0});
        } else {
          RecvOp op = std::move(*r);
          posted.erase(r);
          Answer(c, f, std::move(op));
        }
        break;
      }
      case kData: {
        auto it = awaiting_data.find({p, f.id});
        if (it == awaiting_data.end() || it->second.bytes != bytes) {
          if (it != awaiting_data.end()) return Malformed(c, f, "a payload of another size");
          StartPayload(c, f, Conn::Into::kDrain, nullptr, bytes);  // its receive timed out
          c->after_drain = nullptr;
          c->recv = RecvOp{};
        } else {
          c->recv = std::move(it->second);
          awaiting_data.erase(it);
          StartPayload(c, f, Conn::Into::kRecv, c->recv.dst, bytes);
        }
        break;
      }
      case kWithdrawn: {
        auto it = awaiting_data.find({p, f.id});
        if (it != awaiting_data.end()) {
          Finish(it->second.done,
                 Error<TimeoutError>(Why("rank " + std::to_string(p) + " gave up its send (tag " +
                                         std::to_string(f.tag) +
                                         ") before this receive matched it: it timed out "
                                         "there")));
          awaiting_data.erase(it);
        }
        break;
      }
      case kCts: {
        auto it = sends.find(f.id);
        if (it == sends.end() || !it->second.awaiting_cts) {
          Enqueue(c, Control(kWithdrawn, f));
          break;
        }
        SendOp& s = it->second;
        if (s.lent && lend_to[p]) {  // the receiver could not read this process's memory
          VLOG(1) << describe << ": rank " << p << " cannot read this process's memory; "
                  << "large messages to it go on the socket";
          lend_to[p] = false;
        }
        s.awaiting_cts = false;
        OutSegment seg;
        seg.frame =
            Frame{kFrameMagic, kData, s.tag, static_cast<int32_t>(s.dtype), s.count, s.id, 0, 0};
        seg.payload = s.data;
        seg.payload_len = s.bytes;
        seg.completes = s.id;
        Enqueue(c, seg);
        break;
      }
      case kReject:
        CompleteSend(f.id);  // the receiver reports the mismatch; this send is done
        break;
      case kFin: {  // the receiver read the lent payload: confirm it was the send's throughout
        auto it = sends.find(f.id);
        if (it == sends.end() || !it->second.awaiting_cts || !it->second.lent) {
          Enqueue(c, Control(kWithdrawn, f));  // it timed out before: the read is void
          break;
        }
        Enqueue(c, Control(kFinAck, f));
        CompleteSend(f.id);
        break;
      }
      case kFinAck: {
        auto it = awaiting_data.find({p, f.id});
        if (it != awaiting_data.end() && it->second.lent_pid != 0 &&
            it->second.copied == it->second.bytes) {
          lent_bytes_received.fetch_add(it->second.bytes, std::memory_order_relaxed);
          P2PDone done = std::move(it->second.done);
          awaiting_data.erase(it);
          Finish(done, nullptr);
        }
        break;
      }
    }
    if (with_payload && c->in_payload && c->left == 0) PayloadDone(c);
  }
  void PayloadDone(Conn* c) {
    c->in_payload = false;
    const int p = c->peer;
    switch (c->into) {
      case Conn::Into::kRecv:
        if (c->recv.source != nullptr) *c->recv.source = p;
        Finish(c->recv.done, nullptr);
        break;
      case Conn::Into::kDrain:
        if (c->recv.source != nullptr) *c->recv.source = p;
        if (c->recv.done) Finish(c->recv.done, c->after_drain);
        c->drain.clear();
        c->drain.shrink_to_fit();
        break;
      case Conn::Into::kUnexpected: {
        Unexpected u = std::move(c->unexpected);
        auto r = FindPosted(p, u.tag);  // posted while the payload arrived
        if (r == posted.end()) {
          unexpected.push_back(std::move(u));
        } else {
          RecvOp op = std::move(*r);
          posted.erase(r);
          Deliver(std::move(op), std::move(u));
        }
        break;
      }
    }
    c->recv = RecvOp{};
  }

  // ---- matching
  std::list<RecvOp>::iterator FindPosted(int from, int tag) {
    return std::find_if(posted.begin(), posted.end(),
                        [&](const RecvOp& r) { return r.Matches(from, tag); });
  }
  std::exception_ptr Mismatch(const RecvOp& r, int from, int tag, DataType dt, int64_t count) {
    return Error<InvalidArgumentError>(
        Why("Recv from rank " + std::to_string(from) + " (tag " + std::to_string(tag) +
            ") expects " + Spec(r.count, r.dtype) + ", but the matching Send carries " +
            Spec(count, dt) + ". The receive buffer was left unchanged."));
  }
  // A receive matched a large message's announcement: ask for the payload (or read it, when
  // lent), or refuse it.
  void Answer(Conn* c, const Frame& rts, RecvOp op) {
    const int p = c->peer;
    if (op.dtype == static_cast<DataType>(rts.dtype) && op.count == rts.count) {
      if (op.source != nullptr) *op.source = p;
      const bool lent = rts.kind == kRtsLocal;
      op.lent_pid = lent ? rts.pid : 0;
      op.lent_addr = lent ? rts.addr : 0;
      awaiting_data[{p, rts.id}] = std::move(op);
      if (lent) return ReadLent({p, rts.id});
      Enqueue(c, Control(kCts, rts));
    } else {
      Enqueue(c, Control(kReject, rts));
      if (op.source != nullptr) *op.source = p;
      Finish(op.done, Mismatch(op, p, rts.tag, static_cast<DataType>(rts.dtype), rts.count));
    }
  }
  // A lent payload (kRtsLocal) matched: read it from the sender's memory, a chunk per
  // reactor turn, then tell the sender (kFin); the receive completes on its answer (kFinAck:
  // the memory was the send's throughout; kWithdrawn: the send had ended, the read is void).
  // Memory that cannot be read (no permission to attach, say) is asked for instead (kCts):
  // the payload then comes on the socket, over whatever was read.
  void ReadLent(std::pair<int, uint64_t> key) {
    auto it = awaiting_data.find(key);
    if (it == awaiting_data.end()) return;  // it ended meanwhile
    RecvOp& op = it->second;
    Conn* c = in[key.first].get();
    const Frame about{kFrameMagic, 0,       op.tag, static_cast<int32_t>(op.dtype),
                      op.count,    key.second, 0,   0};
    const size_t n = std::min(kLentChunk, op.bytes - op.copied);
    if (n > 0) {
      iovec local{op.dst + op.copied, n};
      iovec remote{reinterpret_cast<void*>(op.lent_addr + op.copied), n};
      const ssize_t got = ::process_vm_readv(static_cast<pid_t>(op.lent_pid), &local, 1,
                                             &remote, 1, 0);
      if (got <= 0) {
        VLOG(1) << describe << ": reading rank " << key.first << "'s memory failed ("
                << (got < 0 ? std::strerror(errno) : "nothing read") << "); asking for it";
        op.lent_pid = 0;
        return Enqueue(c, Control(kCts, about));
      }
      op.copied += static_cast<size_t>(got);
      c->last_bytes = Clock::now();
    }
    if (op.copied < op.bytes) {
      auto self = shared_from_this();
      reactor->Post([self, key] { self->ReadLent(key); });
      return;
    }
    Enqueue(c, Control(kFin, about));
  }
  // A receive matched a message that had arrived already.
  void Deliver(RecvOp op, Unexpected u) {
    if (u.rts) {
      Conn* c = in[u.peer].get();
      Frame rts{kFrameMagic, u.lent_pid != 0 ? kRtsLocal : kRts, u.tag,
                static_cast<int32_t>(u.dtype), u.count, u.id, u.lent_pid, u.lent_addr};
      return Answer(c, rts, std::move(op));
    }
    if (op.source != nullptr) *op.source = u.peer;
    if (op.dtype != u.dtype || op.count != u.count) {
      return Finish(op.done, Mismatch(op, u.peer, u.tag, u.dtype, u.count));
    }
    if (!u.bytes.empty()) std::memcpy(op.dst, u.bytes.data(), u.bytes.size());
    Finish(op.done, nullptr);
  }

  // ---- posting (on the reactor thread)
  void DoSend(SendOp s) {
    if (closed) return Finish(s.done, Error<UnavailableError>(Why(closed_why)));
    if (!out_broken[s.peer].empty()) {
      return Finish(s.done, Error<UnavailableError>(out_broken[s.peer]));
    }
    Conn* c = out[s.peer].get();
    if (c == nullptr || c->fd < 0) {
      return Finish(s.done, Error<UnavailableError>(
                                Why("no point-to-point connection to rank " +
                                    std::to_string(s.peer) + " (it was never dialed)")));
    }
    s.id = next_send_id++;
    OutSegment seg;
    const bool eager = s.bytes <= P2PEndpoint::kEagerBytes;
    s.lent = !eager && lend_to[s.peer];
    seg.frame = Frame{kFrameMagic,
                      eager ? kEager : (s.lent ? kRtsLocal : kRts),
                      s.tag,
                      static_cast<int32_t>(s.dtype),
                      s.count,
                      s.id,
                      s.lent ? static_cast<int64_t>(::getpid()) : 0,
                      s.lent ? reinterpret_cast<uint64_t>(s.data) : 0};
    if (eager) {
      seg.payload = s.data;
      seg.payload_len = s.bytes;
      seg.completes = s.id;
    }
    s.awaiting_cts = !eager;
    const uint64_t id = s.id;
    sends.emplace(id, std::move(s));
    reactor->Rearm();
    Enqueue(c, seg);
  }
  void DoRecv(RecvOp r) {
    if (closed) return Finish(r.done, Error<UnavailableError>(Why(closed_why)));
    auto u = std::find_if(unexpected.begin(), unexpected.end(), [&](const Unexpected& x) {
      return r.Matches(x.peer, x.tag);
    });
    if (u != unexpected.end()) {
      Unexpected got = std::move(*u);
      unexpected.erase(u);
      return Deliver(std::move(r), std::move(got));
    }
    if (r.peer != P2PEndpoint::kAnyPeer && !in_broken[r.peer].empty()) {
      return Finish(r.done, Error<UnavailableError>(in_broken[r.peer]));
    }
    posted.push_back(std::move(r));
    reactor->Rearm();
  }

  // ---- time
  Clock::time_point Expire(Clock::time_point now) {
    Clock::time_point next = Clock::time_point::max();
    const auto ms = std::chrono::milliseconds(timeout_ms.load());
    auto late = [&](Clock::time_point d) {
      if (d <= now) return true;
      next = std::min(next, d);
      return false;
    };
    auto recv_timeout = [&](const RecvOp& r) {
      return Error<TimeoutError>(
          Why("Recv from " +
              (r.peer == P2PEndpoint::kAnyPeer ? std::string("any rank")
                                               : "rank " + std::to_string(r.peer)) +
              " (tag " + std::to_string(r.tag) + ") did not complete within " +
              std::to_string(ms.count()) + " ms"));
    };
    for (auto it = posted.begin(); it != posted.end();) {
      if (late(it->deadline)) {
        Finish(it->done, recv_timeout(*it));
        it = posted.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = awaiting_data.begin(); it != awaiting_data.end();) {
      // Late, and its connection quiet as long (its payload may queue behind another).
      const Conn* c = in[it->first.first].get();
      const bool moving = c != nullptr && c->last_bytes + ms > now;
      if (late(it->second.deadline) && !moving) {  // its payload, if it comes, is drained
        Finish(it->second.done, recv_timeout(it->second));
        it = awaiting_data.erase(it);
      } else {
        ++it;
      }
    }
    std::vector<int> stuck;  // peers whose connection holds a send that timed out
    for (auto& kv : sends) {
      SendOp& s = kv.second;
      if (!late(s.deadline)) continue;
      if (s.awaiting_cts) continue;  // handled below, without closing
      const Conn* c = out[s.peer].get();
      if (c != nullptr && c->last_sent + ms > now) continue;  // still moving
      stuck.push_back(s.peer);
    }
    for (auto it = sends.begin(); it != sends.end();) {
      if (it->second.awaiting_cts && it->second.deadline <= now) {
        Finish(it->second.done,
               Error<TimeoutError>(Why("Send to rank " + std::to_string(it->second.peer) +
                                       " (tag " + std::to_string(it->second.tag) +
                                       ") did not complete within " +
                                       std::to_string(ms.count()) +
                                       " ms: no receive matched it")));
        it = sends.erase(it);  // a later CTS for it is answered kWithdrawn
      } else {
        ++it;
      }
    }
    for (int p : stuck) {  // its bytes could not all be written: the stream cannot go on
      if (out[p] && out[p]->fd >= 0) {
        Break(out[p].get(),
              "a send to rank " + std::to_string(p) + " did not complete within " +
                  std::to_string(ms.count()) + " ms (rank " + std::to_string(p) +
                  " did not read it)",
              /*blame_peer=*/false);
      }
    }
    for (auto& c : in) {  // a payload that stopped arriving half-way
      if (c && c->fd >= 0 && c->in_payload && late(c->last_bytes + ms)) {
        Break(c.get(), "rank " + std::to_string(c->peer) + " sent nothing for " +
                           std::to_string(ms.count()) + " ms in the middle of a message",
              /*blame_peer=*/true);
      }
    }
    return next;
  }

  void Close(const std::string& why) {
    if (closed) return;
    closed = true;
    closed_why = why;
    closed_flag.store(true);
    const std::string msg = Why(why);
    for (auto& kv : sends) Finish(kv.second.done, Error<UnavailableError>(msg));
    sends.clear();
    for (auto& r : posted) Finish(r.done, Error<UnavailableError>(msg));
    posted.clear();
    for (auto& kv : awaiting_data) Finish(kv.second.done, Error<UnavailableError>(msg));
    awaiting_data.clear();
    for (auto* v : {&out, &in}) {
      for (auto& c : *v) {
        if (!c) continue;
        if (c->in_payload && c->into == Conn::Into::kRecv) {
          Finish(c->recv.done, Error<UnavailableError>(msg));
        }
        CloseConn(c.get());
      }
    }
    for (auto& c : unidentified) CloseConn(c.get());
    unidentified.clear();
    unexpected.clear();
    if (listen_fd >= 0) {
      reactor->Unwatch(listen_token);
      ::close(listen_fd);
      listen_fd = -1;
    }
    reactor->RemoveTimer(timer_id);
  }
};

namespace {
uint64_t RandomNonce() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ 0x5bd1e9955bd1e995ull;
}
std::string AddressKey(int rank) { return "p2p/" + std::to_string(rank); }
}  // namespace

P2PEndpoint::P2PEndpoint(std::shared_ptr<Store> store, int rank, int size,
                         const std::string& host, std::string describe,
                         std::chrono::milliseconds timeout,
                         std::function<std::string(const std::string&)> explain)
    : state_(std::make_shared<State>()), store_(std::move(store)), dialed_(size, false) {
  State& s = *state_;
  s.reactor = P2PReactor::Get();
  s.rank = rank;
  s.size = size;
  s.describe = std::move(describe);
  s.timeout_ms.store(timeout.count());
  s.explain = std::move(explain);
  s.out.resize(size);
  s.in.resize(size);
  s.out_broken.resize(size);
  s.in_broken.resize(size);
  s.lend_to.resize(size, false);
  if (size < 2) return;
  std::string error;
  s.listen_fd = tcputils::Listen(host, 0, &error);
  PADDLE_ENFORCE(s.listen_fd >= 0,
                 errors::Unavailable("%s: cannot listen on %s for point-to-point messages: %s",
                                     s.describe.c_str(), host.c_str(), error.c_str()));
  s.nonce = RandomNonce();
  std::ostringstream value;
  value << host << ' ' << tcputils::LocalPort(s.listen_fd) << ' ' << s.nonce << ' '
        << LocalToken();
  try {
    store_->set(AddressKey(rank), value.str());
  } catch (...) {
    ::close(s.listen_fd);
    throw;
  }
  State* raw = state_.get();
  s.reactor->PostAndWait([raw] {
    raw->listen_token = raw->reactor->Watch(raw->listen_fd, EPOLLIN, [raw](uint32_t) {
      raw->OnAccept();
    });
    raw->timer_id =
        raw->reactor->AddTimer([raw](Clock::time_point now) { return raw->Expire(now); });
  });
}

P2PEndpoint::~P2PEndpoint() {
  auto s = state_;
  s->reactor->PostAndWait([s] { s->Close("the communicator was destroyed"); });
}

void P2PEndpoint::SetTimeout(std::chrono::milliseconds timeout) {
  state_->timeout_ms.store(timeout.count());
}

void P2PEndpoint::Abort(const std::string& why) {
  auto s = state_;
  s->closed_flag.store(true);
  s->reactor->Post([s, why] { s->Close("aborted: " + why); });
}

void P2PEndpoint::Prepare(int peer) {
  State& s = *state_;
  if (peer == kAnyPeer) return;  // receives need no connection of their own
  std::lock_guard<std::mutex> lk(dial_mu_);
  if (dialed_[peer]) return;
  PADDLE_ENFORCE(!s.closed_flag.load(),
                 errors::Unavailable("%s: the communicator was aborted or destroyed",
                                     s.describe.c_str()));
  const auto deadline = Clock::now() + std::chrono::milliseconds(s.timeout_ms.load());
  uint64_t nonce = 0;
  std::string token;
  const int fd =
      DialPublishedAddress(store_.get(), AddressKey(peer), peer, deadline,
                           [&s] { return s.closed_flag.load(); }, s.describe, &nonce, &token);
  const bool lend = token != "-" && token == LocalToken();
  std::string error;
  Tune(fd);
  const Hello hello{kHelloMagic, s.rank, nonce};
  if (!tcputils::SendAll(fd, reinterpret_cast<const uint8_t*>(&hello), sizeof(hello), deadline,
                         &error)) {
    ::close(fd);
    PADDLE_THROW(errors::Unavailable("%s: greeting rank %d failed: %s", s.describe.c_str(),
                                     peer, error.c_str()));
  }
  auto st = state_;
  st->reactor->Post([st, peer, fd, lend] { st->AdoptOut(peer, fd, lend); });
  dialed_[peer] = true;
}

void P2PEndpoint::PostSend(const void* data, int64_t count, DataType dtype, int peer, int tag,
                           P2PDone done) {
  SendOp op;
  op.peer = peer;
  op.tag = tag;
  op.dtype = dtype;
  op.count = count;
  op.data = static_cast<const char*>(data);
  op.bytes = static_cast<size_t>(count) * SizeOf(dtype);
  op.deadline = state_->Deadline();
  op.done = std::move(done);
  try {
    Prepare(peer);
  } catch (...) {
    return Finish(op.done, std::current_exception());
  }
  auto s = state_;
  s->reactor->Post([s, op = std::move(op)]() mutable { s->DoSend(std::move(op)); });
}

void P2PEndpoint::PostRecv(void* data, int64_t count, DataType dtype, int peer, int tag,
                           int* source, P2PDone done) {
  RecvOp op;
  op.peer = peer;
  op.tag = tag;
  op.dtype = dtype;
  op.count = count;
  op.dst = static_cast<char*>(data);
  op.bytes = static_cast<size_t>(count) * SizeOf(dtype);
  op.source = source;
  op.deadline = state_->Deadline();
  op.done = std::move(done);
  auto s = state_;
  s->reactor->Post([s, op = std::move(op)]() mutable { s->DoRecv(std::move(op)); });
}

uint64_t P2PLentBytesReceived() { return lent_bytes_received.load(); }

void RunP2POps(P2PEndpoint* endpoint, const std::vector<PendingCpuP2P>& ops,
               std::chrono::milliseconds timeout) {
  struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    size_t left = 0;
    std::exception_ptr first;
  };
  auto w = std::make_shared<Waiter>();
  w->left = ops.size();
  auto done = [w](std::exception_ptr e) {
    std::lock_guard<std::mutex> lk(w->mu);
    if (e && !w->first) w->first = e;
    if (--w->left == 0) w->cv.notify_all();
  };
  for (const auto& op : ops) {
    if (op.is_send) {
      endpoint->PostSend(op.src, op.count, op.dtype, op.peer, op.tag, done);
    } else {
      endpoint->PostRecv(op.dst, op.count, op.dtype, op.peer, op.tag, op.source, done);
    }
  }
  // The endpoint's deadlines end every op (the buffers are the ops' until then).
  std::unique_lock<std::mutex> lk(w->mu);
  while (!w->cv.wait_for(lk, timeout + std::chrono::seconds(10), [&] { return w->left == 0; })) {
    LOG(ERROR) << w->left << " point-to-point op(s) still pending " << timeout.count()
               << " ms + 10 s after they were posted";
  }
  if (w->first) std::rethrow_exception(w->first);
}

}  // namespace distributed
}  // namespace phi
