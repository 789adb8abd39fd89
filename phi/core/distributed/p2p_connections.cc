// The point-to-point endpoint's connections (p2p_transport_state_internal.h): accepting and
// identifying them, writing queued segments, reading frames and payloads, and what a
// connection that ends or breaks fails.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <glog/logging.h>

#include "phi/core/distributed/p2p_transport_state_internal.h"
#include "phi/core/distributed/store/tcp_utils.h"
#include "phi/core/errors.h"

namespace phi {
namespace distributed {
namespace p2p {

void EndpointState::WatchConn(Conn* c) {
  c->token = reactor->Watch(c->fd, EPOLLIN, [this, c](uint32_t ev) { OnEvents(c, ev); });
}

void EndpointState::CloseConn(Conn* c) {
  if (c->fd < 0) return;
  reactor->Unwatch(c->token);
  if (c->shm) {
    reactor->RemovePolledChannel(c->shm.get());
    c->shm.reset();
  }
  ::close(c->fd);
  c->fd = -1;
}

void EndpointState::AdoptOut(int peer, int fd, bool lend, std::shared_ptr<ShmChannel> channel) {
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
  if (channel) AttachChannel(c.get(), std::move(channel));
  out[peer] = std::move(c);
}

void EndpointState::AttachChannel(Conn* c, std::shared_ptr<ShmChannel> channel) {
  c->shm = std::move(channel);
  reactor->AddPolledChannel(c->shm);
}

ssize_t EndpointState::SendBytes(Conn* c, const iovec* iov, int n) {
  if (!c->shm) {
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(iov);
    msg.msg_iovlen = static_cast<size_t>(n);
    return ::sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  const size_t w = c->shm->Write(iov, n);
  if (w == 0) {
    errno = EAGAIN;  // full: the reader's next read rings for room
    return -1;
  }
  if (c->shm->ReaderNeedsDoorbell()) Doorbell(c);
  return static_cast<ssize_t>(w);
}

ssize_t EndpointState::RecvBytes(Conn* c, char* buf, size_t len) {
  if (!c->shm) return ::recv(c->fd, buf, len, MSG_DONTWAIT);
  auto from_ring = [&] {  // what the ring holds, counted; a writer waiting for room is rung
    const size_t n = c->shm->Read(buf, len);
    if (n > 0) {
      channel_bytes_received.fetch_add(n, std::memory_order_relaxed);
      if (c->shm->WriterNeedsDoorbell()) Doorbell(c);
    }
    return static_cast<ssize_t>(n);
  };
  for (;;) {
    if (const ssize_t n = from_ring()) return n;
    if (!c->socket_readable) {
      errno = EAGAIN;
      return -1;
    }
    char bells[256];
    const ssize_t r = ::recv(c->fd, bells, sizeof(bells), MSG_DONTWAIT);
    if (r > 0) continue;  // doorbells: look at the ring again
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      c->socket_readable = false;
      errno = EAGAIN;
      return -1;
    }
    // The peer closed or failed: what it wrote before is in the ring, read to its end first
    // (its writes came before its close).
    if (const ssize_t last = from_ring()) return last;
    return r;
  }
}

void EndpointState::Doorbell(Conn* c) {
  // A socket buffer full of doorbells wakes the peer as well as one more would: a failed
  // send is ignored (a gone peer is seen by the reading side).
  const char bell = 0;
  (void)!::send(c->fd, &bell, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void EndpointState::PollChannels() {
  dead.clear();  // no handler runs on them now
  for (auto* conns : {&out, &in}) {
    for (size_t p = 0; p < conns->size(); ++p) {
      Conn* c = (*conns)[p].get();
      if (c == nullptr || !c->shm || c->fd < 0) continue;
      if (c->shm->Readable()) Read(c);
      if (c->shm && c->fd >= 0 && !c->out.empty() && c->shm->Writable()) Flush(c);
    }
  }
}

void EndpointState::OnAccept() {
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
bool EndpointState::Identify(Conn* c) {
  if (c->rend - c->rbeg < sizeof(Hello)) return false;
  Hello h;
  std::memcpy(&h, c->rbuf.data() + c->rbeg, sizeof(h));
  const bool shm = h.magic == kHelloShmMagic;
  if (shm && c->rend - c->rbeg < sizeof(Hello) + ShmChannel::kNameBytes) return false;
  auto it = std::find_if(unidentified.begin(), unidentified.end(),
                         [c](const std::unique_ptr<Conn>& u) { return u.get() == c; });
  std::unique_ptr<Conn> owned = std::move(*it);
  unidentified.erase(it);
  if ((h.magic != kHelloMagic && !shm) || h.nonce != nonce || h.rank < 0 || h.rank >= size ||
      h.rank == rank || (in[h.rank] && in[h.rank]->fd >= 0)) {
    LOG(WARNING) << describe << ": closed a point-to-point connection from "
                 << tcputils::Endpoint(c->fd, true)
                 << " that did not identify as a rank of this group";
    CloseConn(c);
    dead.push_back(std::move(owned));
    return false;
  }
  c->rbeg += sizeof(Hello);
  if (shm) {
    char name[ShmChannel::kNameBytes];
    std::memcpy(name, c->rbuf.data() + c->rbeg, sizeof(name));
    name[sizeof(name) - 1] = '\0';
    std::string error;
    std::shared_ptr<ShmChannel> channel = ShmChannel::Open(name, &error);
    if (!channel) {
      // The dialer writes only to the channel: without it the connection is of no use.
      LOG(WARNING) << describe << ": closed the point-to-point connection from rank " << h.rank
                   << ": its shared-memory channel cannot be used here: " << error;
      CloseConn(c);
      dead.push_back(std::move(owned));
      return false;
    }
    AttachChannel(c, std::move(channel));
    c->rbeg = c->rend;  // after the hello the socket carries only doorbells
  }
  c->peer = h.rank;
  if (in[h.rank]) dead.push_back(std::move(in[h.rank]));
  in[h.rank] = std::move(owned);
  in_broken[h.rank].clear();
  return true;
}

// A connection failed or ended: the ops it carried fail. What arrived whole before a
// peer closed stays receivable.
void EndpointState::Break(Conn* c, const std::string& why, bool blame_peer) {
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
  auto fail = [&msg](P2PDone& done) {
    Finish(done, Error<UnavailableError>(msg));
    return true;
  };
  if (c->outgoing) {
    out_broken[p] = msg;
    EraseIf(&sends, [&](auto& kv) { return kv.second.peer == p && fail(kv.second.done); });
  } else {
    in_broken[p] = msg;
    if (c->in_payload && c->into == Conn::Into::kRecv) fail(c->recv.done);
    c->in_payload = false;
    EraseIf(&posted, [&](RecvOp& r) { return r.peer == p && fail(r.done); });
    EraseIf(&awaiting_data, [&](auto& kv) { return kv.first.first == p && fail(kv.second.done); });
    // An announced large message of a gone sender can never be sent.
    unexpected.remove_if([p](const Unexpected& u) { return u.peer == p && u.rts; });
  }
}

void EndpointState::Enqueue(Conn* c, OutSegment seg) {
  c->out.push_back(seg);
  if (!c->writing) Flush(c);
}

void EndpointState::Flush(Conn* c) {
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
    const ssize_t w = SendBytes(c, iov, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (c->shm) return;  // a full channel: its reader rings when it made room
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

void EndpointState::CompleteSend(uint64_t id) {
  auto it = sends.find(id);
  if (it == sends.end()) return;
  P2PDone done = std::move(it->second.done);
  sends.erase(it);
  Finish(done, nullptr);
}

OutSegment EndpointState::Control(FrameKind kind, const Frame& about) {
  OutSegment s;
  s.frame = Frame{kFrameMagic, kind, about.tag, about.dtype, about.count, about.id, 0, 0};
  return s;
}

void EndpointState::OnEvents(Conn* c, uint32_t ev) {
  dead.clear();  // none of them is `c`: a dead connection is no longer watched
  if (ev & EPOLLOUT) Flush(c);
  if (c->fd >= 0 && (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
    c->socket_readable = true;
    Read(c);
  }
  // A channel's doorbell may also say that the ring has room again.
  if (c->fd >= 0 && c->shm && !c->out.empty()) Flush(c);
}

void EndpointState::Read(Conn* c) {
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
      // Large, or from a channel (no system call per read): straight into its place.
      while (c->left > (c->shm ? 0 : c->rbuf.size() / 2)) {
        const size_t room = drain ? std::min(c->left, c->drain.size()) : c->left;
        const ssize_t n = RecvBytes(c, c->sink, room);
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
    // From a channel, a frame's header at a time: its payload is then read straight into
    // its place (above) instead of through this buffer.
    const size_t want = c->shm && c->peer >= 0 ? sizeof(Frame) - (c->rend - c->rbeg)
                                               : c->rbuf.size() - c->rend;
    const ssize_t n = RecvBytes(c, c->rbuf.data() + c->rend, want);
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
void EndpointState::Ended(Conn* c, ssize_t n) {
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

void EndpointState::Malformed(Conn* c, const Frame& f, const char* what) {
  LOG(ERROR) << describe << ": " << what << " from rank " << c->peer;
  Break(c, std::string("malformed point-to-point message from rank ") +
               std::to_string(c->peer) + " (" + what + ": magic " + std::to_string(f.magic) +
               ", kind " + std::to_string(f.kind) + ", dtype " + std::to_string(f.dtype) +
               ", count " + std::to_string(f.count) + "): the stream is out of step",
        /*blame_peer=*/false);
}

void EndpointState::StartPayload(Conn* c, const Frame& f, Conn::Into into, char* sink, size_t bytes) {
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

}  // namespace p2p
}  // namespace distributed
}  // namespace phi
