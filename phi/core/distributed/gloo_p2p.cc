// Point-to-point on the Gloo engine, and engine groups. Messages travel on the runtime's own
// point-to-point transport (p2p_transport_internal.h), not on Gloo's pairs: every op is
// posted and completed by a callback, so neither a blocking Send nor the process group's
// posted ops need a thread per op in flight, and a timed-out op poisons nothing else.
#include "phi/core/distributed/gloo_comm_context_internal.h"
#include "phi/core/distributed/p2p_reactor_internal.h"

namespace phi {
namespace distributed {

void GlooCommContext::CheckPeer(int peer, bool any_allowed, const char* what) const {
  PADDLE_ENFORCE((any_allowed && peer == kAnyPeer) ||
                     (peer != GetRank() && peer >= 0 && peer < GetSize()),
                 errors::InvalidArgument("%s: %s rank %d: the peer must be another rank in "
                                         "[0, %d)%s.",
                                         describe().c_str(), what, peer, GetSize(),
                                         any_allowed ? ", or any source" : ""));
}

void GlooCommContext::Send(const void* send, int64_t count, DataType dtype, int peer, int tag,
                           Stream*) {
  CheckPeer(peer, false, "send to");
  if (DeferToGroup(DeferredP2P{true, send, nullptr, count, dtype, peer, tag, nullptr})) return;
  RunP2PBatch({DeferredP2P{true, send, nullptr, count, dtype, peer, tag, nullptr}});
}

void GlooCommContext::Recv(void* recv, int64_t count, DataType dtype, int peer, int tag,
                           Stream*, int* source) {
  CheckPeer(peer, true, "recv from");
  if (DeferToGroup(DeferredP2P{false, nullptr, recv, count, dtype, peer, tag, source})) return;
  RunP2PBatch({DeferredP2P{false, nullptr, recv, count, dtype, peer, tag, source}});
}

// A group's sends and receives are all posted before any is waited for (a ring of blocking
// sends would deadlock); every op ends, then the first error is raised.
void GlooCommContext::RunP2PBatch(const std::vector<DeferredP2P>& ops) {
  if (ops.empty()) return;
  ThrowIfBroken();
  RunP2POps(p2p_.get(), ops, timeout_.load());
}

std::shared_ptr<ProgressPoller> GlooCommContext::P2PPoller() { return p2p_->Reactor(); }

void GlooCommContext::PostSend(const void* send, int64_t count, DataType dtype, int peer,
                               int tag, P2PDone done) {
  try {
    CheckPeer(peer, false, "send to");
    ThrowIfBroken();
  } catch (...) {
    return done(std::current_exception());
  }
  p2p_->PostSend(send, count, dtype, peer, tag, std::move(done));
}

void GlooCommContext::PostRecv(void* recv, int64_t count, DataType dtype, int peer, int tag,
                               int* source, P2PDone done) {
  try {
    CheckPeer(peer, true, "recv from");
    ThrowIfBroken();
  } catch (...) {
    return done(std::current_exception());
  }
  p2p_->PostRecv(recv, count, dtype, peer, tag, source, std::move(done));
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
  p2p_->Abort(why);
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
