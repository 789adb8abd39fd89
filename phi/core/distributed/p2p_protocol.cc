// The point-to-point protocol (p2p_transport_internal.h describes it): frames, matching
// receives to messages, the rendezvous and lent payloads, posting on the reactor thread,
// deadlines and closing (p2p_transport_state_internal.h).
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

void EndpointState::OnFrame(Conn* c, const Frame& f) {
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

void EndpointState::PayloadDone(Conn* c) {
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

std::list<RecvOp>::iterator EndpointState::FindPosted(int from, int tag) {
  return std::find_if(posted.begin(), posted.end(),
                      [&](const RecvOp& r) { return r.Matches(from, tag); });
}

std::exception_ptr EndpointState::Mismatch(const RecvOp& r, int from, int tag, DataType dt, int64_t count) {
  return Error<InvalidArgumentError>(
      Why("Recv from rank " + std::to_string(from) + " (tag " + std::to_string(tag) +
          ") expects " + Spec(r.count, r.dtype) + ", but the matching Send carries " +
          Spec(count, dt) + ". The receive buffer was left unchanged."));
}

// A receive matched a large message's announcement: ask for the payload (or read it, when
// lent), or refuse it.
void EndpointState::Answer(Conn* c, const Frame& rts, RecvOp op) {
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
void EndpointState::ReadLent(std::pair<int, uint64_t> key) {
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
void EndpointState::Deliver(RecvOp op, Unexpected u) {
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

void EndpointState::DoSend(SendOp s) {
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

void EndpointState::DoRecv(RecvOp r) {
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

Clock::time_point EndpointState::Expire(Clock::time_point now) {
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
  EraseIf(&posted, [&](RecvOp& r) {
    if (!late(r.deadline)) return false;
    Finish(r.done, recv_timeout(r));
    return true;
  });
  EraseIf(&awaiting_data, [&](auto& kv) {
    // Late, and its connection quiet as long (its payload may queue behind another); its
    // payload, if it comes, is drained.
    const Conn* c = in[kv.first.first].get();
    const bool moving = c != nullptr && c->last_bytes + ms > now;
    if (!late(kv.second.deadline) || moving) return false;
    Finish(kv.second.done, recv_timeout(kv.second));
    return true;
  });
  std::vector<int> stuck;  // peers whose connection holds a send that timed out
  for (auto& kv : sends) {
    SendOp& s = kv.second;
    if (!late(s.deadline)) continue;
    if (s.awaiting_cts) continue;  // handled below, without closing
    const Conn* c = out[s.peer].get();
    if (c != nullptr && c->last_sent + ms > now) continue;  // still moving
    stuck.push_back(s.peer);
  }
  // An announced message no receive matched in time (a later CTS for it is answered
  // kWithdrawn).
  EraseIf(&sends, [&](auto& kv) {
    const SendOp& s = kv.second;
    if (!s.awaiting_cts || s.deadline > now) return false;
    Finish(kv.second.done, Error<TimeoutError>(Why("Send to rank " + std::to_string(s.peer) +
                                                   " (tag " + std::to_string(s.tag) +
                                                   ") did not complete within " +
                                                   std::to_string(ms.count()) +
                                                   " ms: no receive matched it")));
    return true;
  });
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

void EndpointState::Close(const std::string& why) {
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
  reactor->RemovePollHook(poll_hook_id);
}

}  // namespace p2p
}  // namespace distributed
}  // namespace phi
