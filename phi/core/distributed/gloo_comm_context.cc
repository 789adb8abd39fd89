#include "phi/core/distributed/gloo_comm_context.h"

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <glog/logging.h>

#include "phi/core/distributed/cpu_reduce.h"
#include "phi/core/distributed/store/prefix_store.h"
#include "phi/core/errors.h"

namespace phi {
namespace distributed {
namespace {

// Gloo's rendezvous store interface over ours.
class GlooStoreAdapter : public ::gloo::rendezvous::Store {
 public:
  explicit GlooStoreAdapter(std::shared_ptr<distributed::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, std::vector<uint8_t>(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    auto v = store_->get(key);
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, store_->timeout()); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& t) override {
    try {
      store_->wait(keys, t);
    } catch (const TimeoutError& e) {
      // Gloo's full-mesh keys are the ranks: say which ranks never arrived.
      std::string missing;
      for (const auto& k : keys) {
        if (!store_->check({k})) missing += (missing.empty() ? "" : ", ") + k;
      }
      PADDLE_THROW(errors::Timeout(
          "Gloo rendezvous: rank(s) %s did not arrive within %lld ms (they died, hang, or "
          "never created this group). Store said: %s",
          missing.c_str(), static_cast<long long>(t.count()), e.what()));
    }
  }

 private:
  std::shared_ptr<distributed::Store> store_;
};

// Gloo slots: collectives use tags of their own prefixes; P2P uses a prefix Gloo never does.
constexpr uint64_t kP2PSlotPrefix = uint64_t{0x7e} << 56;
uint64_t P2PSlot(int tag) { return kP2PSlotPrefix | static_cast<uint32_t>(tag); }
// The ring reduce-scatter's messages; steps of one call and calls follow each other in the
// same order on every rank, so one slot suffices.
constexpr uint64_t kReduceScatterSlot = uint64_t{0x7d} << 56;

bool IsLocalAddress(const char* addr) {
  return addr == nullptr || *addr == '\0' || std::strncmp(addr, "127.", 4) == 0 ||
         std::strcmp(addr, "localhost") == 0 || std::strcmp(addr, "::1") == 0;
}

::gloo::transport::tcp::attr DeviceAttr(const GlooOptions& o) {
  GlooEndpoint e = ResolveGlooEndpoint(o);
  ::gloo::transport::tcp::attr attr;
  attr.hostname = e.hostname;
  attr.iface = e.iface;
  return attr;
}

// Calls into Gloo and turns its exceptions into typed phi errors.
template <typename F>
void GlooCall(const char* what, F&& f) {
  try {
    f();
  } catch (const ::gloo::IoException& e) {
    std::string msg = e.what();
    if (msg.find("imed out") != std::string::npos) {
      PADDLE_THROW(errors::Timeout("Gloo %s timed out: %s", what, msg.c_str()));
    }
    PADDLE_THROW(errors::Unavailable(
        "Gloo %s failed on the network (a peer rank may have died): %s", what, msg.c_str()));
  } catch (const ::gloo::Exception& e) {
    PADDLE_THROW(errors::External("Gloo %s failed: %s", what, e.what()));
  } catch (const ::gloo::EnforceNotMet& e) {
    PADDLE_THROW(errors::External("Gloo %s failed: %s", what, e.what()));
  }
}

class GlooCommContext : public CommContext {
 public:
  GlooCommContext(std::shared_ptr<::gloo::rendezvous::Context> ctx, std::chrono::milliseconds timeout,
                  std::map<std::string, int> peer_by_address)
      : CommContext(ctx->rank, ctx->size),
        ctx_(std::move(ctx)),
        timeout_(timeout),
        peer_by_address_(std::move(peer_by_address)) {}

  std::string BackendName() const override { return "Gloo"; }
  bool SupportsAnySource() const override { return true; }

  void AllReduce(const void* send, void* recv, int64_t count, DataType dtype,
                 const Reduction& red, Stream*) override {
    if (depth_ > 0) {  // fused at the outermost GroupEnd
      pending_allreduce_.push_back(PendingAllReduce{send, recv, count, dtype, red});
      return;
    }
    RunAllReduce(send, recv, count, dtype, red);
  }

  void Broadcast(const void* send, void* recv, int64_t count, DataType dtype, int root,
                 Stream*) override {
    if (count == 0) return;
    Call("broadcast", [&] {
      VisitDataType(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        ::gloo::BroadcastOptions opts(ctx_);
        opts.setRoot(root);
        if (GetRank() == root && send != recv) {
          opts.setInput(const_cast<T*>(static_cast<const T*>(send)), count);
        }
        opts.setOutput(static_cast<T*>(recv), count);
        opts.setTimeout(timeout_);
        ::gloo::broadcast(opts);
      });
    });
  }

  void Reduce(const void* send, void* recv, int64_t count, DataType dtype, const Reduction& red,
              int root, Stream*) override {
    if (count == 0) return;
    Prepared p = Prepare(send, count, dtype, red);
    Call("reduce", [&] {
      VisitDataType(p.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        ::gloo::ReduceOptions opts(ctx_);
        opts.setRoot(root);
        if (p.send != recv) opts.setInput(const_cast<T*>(static_cast<const T*>(p.send)), p.count);
        opts.setOutput(static_cast<T*>(recv), p.count);
        opts.setReduceFunction(GetCpuReduceFn(p.dtype, red.op));
        opts.setTimeout(timeout_);
        ::gloo::reduce(opts);
      });
    });
    if (red.op == ReduceOp::AVG && GetRank() == root) CpuDivide(p.dtype, recv, p.count, GetSize());
  }

  void AllGather(const void* send, void* recv, int64_t send_count, DataType dtype,
                 Stream*) override {
    if (send_count == 0) return;
    Call("allgather", [&] {
      VisitDataType(dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        ::gloo::AllgatherOptions opts(ctx_);
        opts.setInput(const_cast<T*>(static_cast<const T*>(send)), send_count);
        opts.setOutput(static_cast<T*>(recv), send_count * GetSize());
        opts.setTimeout(timeout_);
        ::gloo::allgather(opts);
      });
    });
  }

  // Gloo 0.5 has no options-style reduce-scatter, so this is the ring algorithm on unbound
  // buffers: n - 1 steps, each sending one block to the next rank and reducing the block
  // received from the previous one, after which rank r holds the reduced block r. Half the
  // traffic of an all-reduce.
  void ReduceScatter(const void* send, void* recv, int64_t recv_count, DataType dtype,
                     const Reduction& red, Stream*) override {
    if (recv_count == 0) return;
    const int n = GetSize(), me = GetRank();
    if (n == 1) {
      RunAllReduce(send, recv, recv_count, dtype, red);
      return;
    }
    Prepared p = Prepare(send, recv_count * n, dtype, red);
    const size_t block = static_cast<size_t>(p.count / n) * SizeOf(p.dtype);
    // Scratch kept across calls (only this stream's thread runs here): fresh pages for every
    // large call cost more than the copy. Past kMaxKeptScratch it is per call, not kept.
    std::vector<char> once_acc, once_incoming;
    const bool keep = block * n <= kMaxKeptScratch;
    std::vector<char>& acc = keep ? rs_acc_ : once_acc;  // partial sums, block by block
    std::vector<char>& incoming = keep ? rs_incoming_ : once_incoming;
    if (acc.size() < block * n) acc.resize(block * n);
    if (incoming.size() < block) incoming.resize(block);
    std::memcpy(acc.data(), p.send, block * n);
    CpuReduceFn reduce = GetCpuReduceFn(p.dtype, red.op);
    auto in_buf = ctx_->createUnboundBuffer(incoming.data(), block);
    auto acc_buf = ctx_->createUnboundBuffer(acc.data(), block * n);
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    for (int step = 0; step < n - 1; ++step) {
      const size_t send_block = static_cast<size_t>((me - step - 1 + 2 * n) % n);
      const size_t recv_block = static_cast<size_t>((me - step - 2 + 2 * n) % n);
      Call("reducescatter", [&] {
        in_buf->recv(prev, kReduceScatterSlot);
        acc_buf->send(next, kReduceScatterSlot, send_block * block, block);
      });
      WaitRecv(in_buf.get(), nullptr, prev);
      WaitSend(acc_buf.get(), next);
      char* target = acc.data() + recv_block * block;
      reduce(target, target, incoming.data(), static_cast<size_t>(p.count / n));
    }
    std::memcpy(recv, acc.data() + static_cast<size_t>(me) * block, block);
    if (red.op == ReduceOp::AVG) CpuDivide(p.dtype, recv, p.count / n, n);
  }

  void Send(const void* send, int64_t count, DataType dtype, int peer, int tag,
            Stream*) override {
    if (count == 0) return;
    size_t bytes = static_cast<size_t>(count) * SizeOf(dtype);
    auto buf = ctx_->createUnboundBuffer(const_cast<void*>(send), bytes);
    Call("send", [&] { buf->send(peer, P2PSlot(tag)); });
    if (depth_ > 0) {
      pending_sends_.push_back(std::move(buf));
    } else {
      WaitSend(buf.get(), peer);
    }
  }

  void Recv(void* recv, int64_t count, DataType dtype, int peer, int tag, Stream*,
            int* source) override {
    if (count == 0) return;
    size_t bytes = static_cast<size_t>(count) * SizeOf(dtype);
    auto buf = ctx_->createUnboundBuffer(recv, bytes);
    Call("recv", [&] {
      if (peer == kAnyPeer) {
        std::vector<int> peers;
        for (int r = 0; r < GetSize(); ++r) {
          if (r != GetRank()) peers.push_back(r);
        }
        buf->recv(peers, P2PSlot(tag));
      } else {
        buf->recv(peer, P2PSlot(tag));
      }
    });
    if (depth_ > 0) {
      pending_recvs_.push_back(PendingRecv{std::move(buf), source, peer});
    } else {
      WaitRecv(buf.get(), source, peer);
    }
  }

  void GroupStart() override { ++depth_; }

  void GroupEnd() override {
    PADDLE_ENFORCE(depth_ > 0, errors::PreconditionNotMet("Gloo GroupEnd without GroupStart."));
    if (--depth_ > 0) return;
    // Take the batch first, so that a failure below leaves the context clean.
    auto allreduces = std::move(pending_allreduce_);
    auto sends = std::move(pending_sends_);
    auto recvs = std::move(pending_recvs_);
    pending_allreduce_.clear();
    pending_sends_.clear();
    pending_recvs_.clear();
    // Sends and receives were posted when called; wait for all of them in any order.
    for (auto& r : recvs) WaitRecv(r.buf.get(), r.source, r.peer);
    for (auto& s : sends) WaitSend(s.get(), -1);
    RunFusedAllReduces(allreduces);
  }

  void GroupAbort() override {
    if (depth_ == 0) return;
    if (--depth_ > 0) return;
    for (auto& r : pending_recvs_) r.buf->abortWaitRecv();
    for (auto& s : pending_sends_) s->abortWaitSend();
    pending_allreduce_.clear();
    pending_sends_.clear();
    pending_recvs_.clear();
  }

 private:
  struct PendingAllReduce {
    const void* send;
    void* recv;
    int64_t count;
    DataType dtype;
    Reduction red;
  };
  struct PendingRecv {
    std::unique_ptr<::gloo::transport::UnboundBuffer> buf;
    int* source;
    int peer;
  };
  // Complex reduces through its real view; PREMUL_SUM scales a copy of the input first.
  struct Prepared {
    const void* send;
    int64_t count;
    DataType dtype;
    std::vector<char> scaled;  // owns the scaled input of PREMUL_SUM
  };

  Prepared Prepare(const void* send, int64_t count, DataType dtype,
                   const Reduction& red) {
    Prepared p{send, count, dtype, {}};
    if (IsComplex(dtype)) {
      p.dtype = ToRealType(dtype);
      p.count = count * 2;
    }
    if (red.op == ReduceOp::PREMUL_SUM) {
      p.scaled.resize(static_cast<size_t>(p.count) * SizeOf(p.dtype));
      CpuScale(p.dtype, p.scaled.data(), send, p.count, red.premul_factor);
      p.send = p.scaled.data();
    }
    return p;
  }

  void RunAllReduce(const void* send, void* recv, int64_t count, DataType dtype,
                    const Reduction& red) {
    if (count == 0) return;
    Prepared p = Prepare(send, count, dtype, red);
    Call("allreduce", [&] {
      VisitDataType(p.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        ::gloo::AllreduceOptions opts(ctx_);
        if (p.send != recv) opts.setInput(const_cast<T*>(static_cast<const T*>(p.send)), p.count);
        opts.setOutput(static_cast<T*>(recv), p.count);
        opts.setReduceFunction(GetCpuReduceFn(p.dtype, red.op));
        opts.setTimeout(timeout_);
        ::gloo::allreduce(opts);
      });
    });
    if (red.op == ReduceOp::AVG) CpuDivide(p.dtype, recv, p.count, GetSize());
  }

  // The all-reduces of one group, fused per (dtype, op, factor) into one flat buffer each:
  // one Gloo call instead of one per tensor. Every rank builds the same buckets from the
  // same call sequence, so the fused calls match across ranks.
  void RunFusedAllReduces(const std::vector<PendingAllReduce>& ops) {
    if (ops.size() == 1) {
      const auto& o = ops[0];
      RunAllReduce(o.send, o.recv, o.count, o.dtype, o.red);
      return;
    }
    std::vector<bool> done(ops.size(), false);
    for (size_t i = 0; i < ops.size(); ++i) {
      if (done[i]) continue;
      std::vector<size_t> bucket;
      int64_t total = 0;
      for (size_t j = i; j < ops.size(); ++j) {
        if (!done[j] && ops[j].dtype == ops[i].dtype && ops[j].red.op == ops[i].red.op &&
            ops[j].red.premul_factor == ops[i].red.premul_factor) {
          bucket.push_back(j);
          done[j] = true;
          total += ops[j].count;
        }
      }
      size_t es = SizeOf(ops[i].dtype);
      std::vector<char> flat(static_cast<size_t>(total) * es);
      size_t off = 0;
      for (size_t j : bucket) {
        size_t b = static_cast<size_t>(ops[j].count) * es;
        if (b) std::memcpy(flat.data() + off, ops[j].send, b);
        off += b;
      }
      RunAllReduce(flat.data(), flat.data(), total, ops[i].dtype, ops[i].red);
      off = 0;
      for (size_t j : bucket) {
        size_t b = static_cast<size_t>(ops[j].count) * es;
        if (b) std::memcpy(ops[j].recv, flat.data() + off, b);
        off += b;
      }
    }
  }

  void WaitSend(::gloo::transport::UnboundBuffer* buf, int peer) {
    Call("send", [&] {
      if (!buf->waitSend(timeout_)) {
        PADDLE_THROW(errors::Timeout("Gloo send to rank %d did not complete within %lld ms.",
                                     peer, static_cast<long long>(timeout_.count())));
      }
    });
  }

  void WaitRecv(::gloo::transport::UnboundBuffer* buf, int* source, int peer) {
    int src = -1;
    Call("recv", [&] {
      if (!buf->waitRecv(&src, timeout_)) {
        PADDLE_THROW(errors::Timeout(
            "Gloo recv from rank %d did not complete within %lld ms.", peer,
            static_cast<long long>(timeout_.count())));
      }
    });
    if (source != nullptr) *source = src;
  }

  // GlooCall, plus the rank behind a failed connection: Gloo names only the peer's address.
  // Best effort: Gloo reports the peer's listening address for connections this rank
  // initiated, but the peer's ephemeral port for those it accepted, which no one publishes.
  template <typename F>
  void Call(const char* what, F&& f) {
    try {
      GlooCall(what, std::forward<F>(f));
    } catch (const UnavailableError& e) {
      std::string msg = e.what();
      for (const auto& kv : peer_by_address_) {
        size_t at = msg.find(kv.first);
        size_t next = at + kv.first.size();
        if (at != std::string::npos && (next >= msg.size() || !std::isdigit(msg[next]))) {
          msg += " [the peer at " + kv.first + " is rank " + std::to_string(kv.second) +
                 ": it died or closed its connection]";
        }
      }
      throw UnavailableError(msg);
    }
  }

  std::shared_ptr<::gloo::rendezvous::Context> ctx_;
  std::chrono::milliseconds timeout_;
  std::map<std::string, int> peer_by_address_;  // "[ip]:port" of each peer's end -> rank
  // Group state; only the comm stream's thread touches it.
  int depth_ = 0;
  std::vector<PendingAllReduce> pending_allreduce_;
  std::vector<std::unique_ptr<::gloo::transport::UnboundBuffer>> pending_sends_;
  std::vector<PendingRecv> pending_recvs_;
  static constexpr size_t kMaxKeptScratch = size_t{256} << 20;
  std::vector<char> rs_acc_, rs_incoming_;  // ReduceScatter scratch
};

}  // namespace

GlooEndpoint ResolveGlooEndpoint(const GlooOptions& o) {
  GlooEndpoint e;
  const char* ifname = std::getenv("PADDLE_GLOO_IFNAME");
  if (ifname == nullptr) ifname = std::getenv("GLOO_SOCKET_IFNAME");
  if (!o.iface.empty()) {
    e.iface = o.iface;
  } else if (!o.hostname.empty()) {
    e.hostname = o.hostname;
  } else if (ifname != nullptr && *ifname) {
    e.iface = ifname;
  } else if (IsLocalAddress(std::getenv("MASTER_ADDR"))) {
    e.hostname = "127.0.0.1";
  } else {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    e.hostname = host;
  }
  return e;
}

std::unique_ptr<CommContext> CreateGlooCommContext(const std::shared_ptr<Store>& store, int gid,
                                                   int rank, int size,
                                                   const GlooOptions& options) {
  auto attr = DeviceAttr(options);
  auto prefixed = std::make_shared<PrefixStore>("gloo/" + std::to_string(gid), store);
  GlooStoreAdapter adapter(prefixed);
  auto ctx = std::make_shared<::gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(options.timeout);
  GlooCall("rendezvous", [&] {
    auto device = ::gloo::transport::tcp::CreateDevice(attr);
    ctx->connectFullMesh(adapter, device);
  });
  // Each rank publishes the address of its end of every pair; the peers keep the ones facing
  // them, so an error naming "[ip]:port" can be traced to a rank.
  std::string mine;
  for (int r = 0; r < size; ++r) {
    if (r != rank) mine += std::to_string(r) + "=" + ctx->getPair(r)->address().str() + ";";
  }
  prefixed->set("pairs/" + std::to_string(rank), mine);
  std::map<std::string, int> peer_by_address;
  const std::string me = std::to_string(rank) + "=";
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    std::string theirs = prefixed->get_string("pairs/" + std::to_string(r));
    size_t at = theirs.find(me);
    while (at != std::string::npos && at != 0 && theirs[at - 1] != ';') {
      at = theirs.find(me, at + 1);
    }
    if (at == std::string::npos) continue;
    size_t end = theirs.find(';', at);
    peer_by_address[theirs.substr(at + me.size(), end - at - me.size())] = r;
  }
  VLOG(1) << "Gloo context for group " << gid << " ready: rank " << rank << "/" << size
          << " on " << (attr.iface.empty() ? attr.hostname : attr.iface);
  return std::make_unique<GlooCommContext>(std::move(ctx), options.timeout,
                                           std::move(peer_by_address));
}

}  // namespace distributed
}  // namespace phi
