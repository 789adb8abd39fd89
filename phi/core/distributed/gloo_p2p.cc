// Point-to-point on the Gloo engine, and engine groups.
//
// Gloo aborts the process (an exception on its own I/O thread) when a message is larger
// than the buffer posted for it, and a smaller one completes silently short. So every
// message carries its size: a send is a header message {magic, dtype, count} followed by
// the payload, in the same message when the payload is small (<= kEagerBytes: one message,
// one copy on each side) and as a second message on the tag's data slot when it is large
// (no copy). A receive always posts room for a header and an eager payload, learns the
// sender's dtype and count from the header, and only then posts the payload's buffer, of
// exactly the size that comes. A mismatch is drained into scratch, so the pair stays in
// step, and raised on the receiver as InvalidArgument naming both sides (the sender's op
// completes: its data was delivered whole, as MPI reports truncation at the receiver).
#include <algorithm>
#include <cstring>
#include <limits>

#include "phi/core/distributed/gloo_comm_context_internal.h"
#include "phi/core/errors.h"

namespace phi {
namespace distributed {
namespace {

constexpr uint32_t kP2PMagic = 0x50324c50;  // "PL2P"
constexpr size_t kEagerBytes = size_t{64} << 10;
// A larger claimed payload is not a real message: the pair is out of step.
constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 40;

struct P2PHeader {
  uint32_t magic;
  int32_t dtype;
  int64_t count;
};

}  // namespace

void GlooCommContext::CheckPeer(int peer, bool any_allowed, const char* what) const {
  PADDLE_ENFORCE((any_allowed && peer == kAnyPeer) ||
                     (peer != GetRank() && peer >= 0 && peer < GetSize()),
                 errors::InvalidArgument("%s: %s rank %d: the peer must be another rank in "
                                         "[0, %d)%s.",
                                         describe().c_str(), what, peer, GetSize(),
                                         any_allowed ? ", or any source" : ""));
}

GlooCommContext::PostedSend GlooCommContext::PostSend(const void* send, int64_t count,
                                                      DataType dtype, int peer, int tag) {
  Call("send", [&] { mesh_->EnsurePeer(peer); });
  const size_t bytes = static_cast<size_t>(count) * SizeOf(dtype);
  const bool eager = bytes <= kEagerBytes;
  PostedSend s;
  s.peer = peer;
  P2PHeader h{kP2PMagic, static_cast<int32_t>(dtype), count};
  s.message.resize(sizeof(h) + (eager ? bytes : 0));
  std::memcpy(s.message.data(), &h, sizeof(h));
  if (eager && bytes > 0) std::memcpy(s.message.data() + sizeof(h), send, bytes);
  s.header = ctx_->createUnboundBuffer(s.message.data(), s.message.size());
  if (!eager) s.payload = ctx_->createUnboundBuffer(const_cast<void*>(send), bytes);
  Call("send", [&] {
    s.header->send(peer, P2PSlot(tag));
    if (s.payload) s.payload->send(peer, P2PDataSlot(tag));
  });
  return s;
}

void GlooCommContext::FinishSend(PostedSend* s) {
  WaitSend(s->header.get(), s->peer);
  if (s->payload) WaitSend(s->payload.get(), s->peer);
}

GlooCommContext::PostedRecv GlooCommContext::PostRecv(void* recv, int64_t count,
                                                      DataType dtype, int peer, int tag,
                                                      int* source) {
  PostedRecv r;
  r.dst = recv;
  r.count = count;
  r.dtype = dtype;
  r.peer = peer;
  r.tag = tag;
  r.source = source;
  r.message.resize(sizeof(P2PHeader) + kEagerBytes);
  r.header = ctx_->createUnboundBuffer(r.message.data(), r.message.size());
  Call("recv", [&] {
    if (peer == kAnyPeer) {
      mesh_->EnsureAll();  // any rank may be the sender
      std::vector<int> peers;
      for (int p = 0; p < GetSize(); ++p) {
        if (p != GetRank()) peers.push_back(p);
      }
      r.header->recv(peers, P2PSlot(tag));
    } else {
      mesh_->EnsurePeer(peer);
      r.header->recv(peer, P2PSlot(tag));
    }
  });
  return r;
}

void GlooCommContext::FinishRecv(PostedRecv* r) {
  const int src = WaitRecv(r->header.get(), r->peer);
  P2PHeader h;
  std::memcpy(&h, r->message.data(), sizeof(h));
  const bool known_dtype = h.dtype > static_cast<int32_t>(DataType::UNDEFINED) &&
                           h.dtype <= static_cast<int32_t>(DataType::COMPLEX128);
  const uint64_t es = known_dtype ? SizeOf(static_cast<DataType>(h.dtype)) : 0;
  if (h.magic != kP2PMagic || !known_dtype || h.count < 0 ||
      static_cast<uint64_t>(h.count) > kMaxPayloadBytes / es) {
    std::string msg = describe() + ": malformed point-to-point header from rank " +
                      std::to_string(src) + " (magic " + std::to_string(h.magic) + ", dtype " +
                      std::to_string(h.dtype) + ", count " + std::to_string(h.count) +
                      "): the pair is out of step";
    MarkBroken(msg);
    PADDLE_THROW(errors::External("%s", msg.c_str()));
  }
  const DataType sent_dtype = static_cast<DataType>(h.dtype);
  const size_t sent_bytes = static_cast<size_t>(h.count) * es;
  const bool matches = sent_dtype == r->dtype && h.count == r->count;
  if (sent_bytes <= kEagerBytes) {
    if (matches && sent_bytes > 0) {
      std::memcpy(r->dst, r->message.data() + sizeof(P2PHeader), sent_bytes);
    }
  } else {
    std::vector<char> drain;  // a mismatched payload is received, then dropped
    void* into = r->dst;
    if (!matches) {
      drain.resize(sent_bytes);
      into = drain.data();
    }
    auto payload = ctx_->createUnboundBuffer(into, sent_bytes);
    Call("recv", [&] { payload->recv(src, P2PDataSlot(r->tag)); });
    WaitRecv(payload.get(), src);
  }
  if (r->source != nullptr) *r->source = src;
  PADDLE_ENFORCE(matches,
                 errors::InvalidArgument(
                     "%s: Recv from rank %d (tag %d) expects %lld elements of %s, but the "
                     "matching Send carries %lld elements of %s. The receive buffer was left "
                     "unchanged.",
                     describe().c_str(), src, r->tag, static_cast<long long>(r->count),
                     DataTypeToString(r->dtype), static_cast<long long>(h.count),
                     DataTypeToString(sent_dtype)));
}

void GlooCommContext::Send(const void* send, int64_t count, DataType dtype, int peer, int tag,
                           Stream*) {
  CheckPeer(peer, false, "send to");
  if (DeferToGroup(DeferredP2P{true, send, nullptr, count, dtype, peer, tag, nullptr})) return;
  PostedSend s = PostSend(send, count, dtype, peer, tag);
  FinishSend(&s);
}

void GlooCommContext::Recv(void* recv, int64_t count, DataType dtype, int peer, int tag,
                           Stream*, int* source) {
  CheckPeer(peer, true, "recv from");
  if (DeferToGroup(DeferredP2P{false, nullptr, recv, count, dtype, peer, tag, source})) return;
  PostedRecv r = PostRecv(recv, count, dtype, peer, tag, source);
  FinishRecv(&r);
}

// A group's sends and receives are posted at its end, after connecting every peer they
// need in ascending rank order. Connecting in call order could deadlock: in a ring where
// each rank first sends to its next and then receives from its previous, each may wait as
// the listening side of its first pair for a peer that is itself waiting on its own first
// pair. In ascending order on every rank a waiting cycle cannot form (gloo_mesh_internal.h).
void GlooCommContext::RunP2PBatch(const std::vector<DeferredP2P>& ops) {
  if (ops.empty()) return;
  bool any = false;
  std::vector<int> peers;
  for (const auto& op : ops) {
    if (op.peer == kAnyPeer) {
      any = true;
    } else {
      peers.push_back(op.peer);
    }
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  Call("connect", [&] {
    if (any) {
      mesh_->EnsureAll();
    } else {
      for (int p : peers) mesh_->EnsurePeer(p);
    }
  });
  std::vector<PostedSend> sends;
  std::vector<PostedRecv> recvs;
  std::exception_ptr first;
  for (const auto& op : ops) {
    try {
      if (op.is_send) {
        sends.push_back(PostSend(op.src, op.count, op.dtype, op.peer, op.tag));
      } else {
        recvs.push_back(PostRecv(op.dst, op.count, op.dtype, op.peer, op.tag, op.source));
      }
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  // Every message is posted: finish them all in any order, each one even after another
  // failed (a mismatch drains, so the pairs stay in step); then raise the first error.
  for (auto& r : recvs) {
    try {
      FinishRecv(&r);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  for (auto& snd : sends) {
    try {
      FinishSend(&snd);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

bool GlooCommContext::AbortableWait(::gloo::transport::UnboundBuffer* buf, bool recv,
                                    int* source) {
  {
    std::lock_guard<std::mutex> lk(waiting_mu_);
    const std::string broken = Broken();
    PADDLE_ENFORCE(broken.empty(), errors::Unavailable("%s: %s", describe().c_str(),
                                                       broken.c_str()));
    waiting_.emplace_back(buf, recv);
  }
  bool done = false;
  try {
    done = recv ? buf->waitRecv(source, timeout_.load()) : buf->waitSend(timeout_.load());
  } catch (...) {
    std::lock_guard<std::mutex> lk(waiting_mu_);
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), std::make_pair(buf, recv)));
    throw;
  }
  {
    std::lock_guard<std::mutex> lk(waiting_mu_);
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), std::make_pair(buf, recv)));
  }
  // Gloo returns false for an aborted wait and for one that timed out.
  const std::string broken = done ? std::string() : Broken();
  PADDLE_ENFORCE(broken.empty(),
                 errors::Unavailable("%s: %s", describe().c_str(), broken.c_str()));
  return done;
}

void GlooCommContext::WakeOnAbort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lk(waiting_mu_);
    for (const auto& w : waiting_) {
      if (w.second) {
        w.first->abortWaitRecv();
      } else {
        w.first->abortWaitSend();
      }
    }
  }
  if (ShmGroup* shm = shm_live_.load(std::memory_order_acquire)) shm->Abort(why);
  if (Hierarchy* h = hier_live_.load(std::memory_order_acquire)) h->Abort(why);
  exchange_->Abort();
  mesh_->CloseConnected();
}

void GlooCommContext::WaitSend(::gloo::transport::UnboundBuffer* buf, int peer) {
  Call("send", [&] {
    if (!AbortableWait(buf, /*recv=*/false, nullptr)) {
      PADDLE_THROW(errors::Timeout("Gloo send to rank %d did not complete within %lld ms.",
                                   peer, static_cast<long long>(timeout_.load().count())));
    }
  });
}

int GlooCommContext::WaitRecv(::gloo::transport::UnboundBuffer* buf, int peer) {
  int src = -1;
  Call("recv", [&] {
    if (!AbortableWait(buf, /*recv=*/true, &src)) {
      PADDLE_THROW(errors::Timeout("Gloo recv from rank %d did not complete within %lld ms.",
                                   peer, static_cast<long long>(timeout_.load().count())));
    }
  });
  return src;
}

}  // namespace distributed
}  // namespace phi
