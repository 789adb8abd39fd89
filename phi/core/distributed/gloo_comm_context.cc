#include "phi/core/distributed/gloo_comm_context.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/reduce.h>
#include <gloo/transport/tcp/device.h>
#include <glog/logging.h>

#include "phi/core/distributed/cpu_coalesce.h"
#include "phi/core/distributed/cpu_reduce.h"
#include "phi/core/distributed/gloo_comm_context_internal.h"
#include "phi/core/distributed/liveness.h"
#include "phi/core/distributed/store/prefix_store.h"
#include "phi/core/distributed/store/tcp_utils.h"
#include "phi/core/errors.h"
#include "phi/core/flags.h"

namespace phi {
namespace distributed {
namespace {

bool IsLocalAddress(const char* addr) {
  return addr == nullptr || *addr == '\0' || std::strncmp(addr, "127.", 4) == 0 ||
         std::strcmp(addr, "localhost") == 0 || std::strcmp(addr, "::1") == 0;
}

// The local IP the kernel would use to reach `host` (a UDP connect sends nothing; it only
// picks the route). Empty when `host` does not resolve or has no route. Why: the host name
// often resolves to 127.0.1.1 (Debian's /etc/hosts) or to an address of another interface,
// and a rank that listens there cannot be reached by the other nodes.
std::string SourceAddressTowards(const char* host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host, "9", &hints, &res) != 0 || res == nullptr) return "";
  std::string out;
  int fd = ::socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  char buf[INET6_ADDRSTRLEN] = {0};
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    const void* a =
        local.ss_family == AF_INET6
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
    if (inet_ntop(local.ss_family, a, buf, sizeof(buf)) != nullptr) out = buf;
  }
  if (fd >= 0) ::close(fd);
  freeaddrinfo(res);
  return out;
}

// The store's host from either env convention: MASTER_ADDR, else the host of PADDLE_MASTER
// ("host:port" or "[v6]:port"). Empty when neither is set.
std::string MasterHost() {
  const char* addr = std::getenv("MASTER_ADDR");
  if (addr != nullptr && *addr) return addr;
  const char* master = std::getenv("PADDLE_MASTER");
  if (master == nullptr || *master == '\0') return "";
  std::string host, port;
  return tcputils::SplitHostPort(master, &host, &port) ? host : std::string(master);
}

::gloo::transport::tcp::attr DeviceAttr(const GlooOptions& o) {
  GlooEndpoint e = ResolveGlooEndpoint(o);
  ::gloo::transport::tcp::attr attr;
  attr.hostname = e.hostname;
  attr.iface = e.iface;
  return attr;
}

// Gloo writes to its sockets with writev, which raises SIGPIPE when the peer is gone: the
// default action kills the process before Gloo can report the broken pipe. The library
// owns these sockets, so it ignores SIGPIPE for the process, once, unless the program has
// installed a handler of its own (then that handler decides). Documented in
// docs/architecture.md ("Failure handling").
void IgnoreSigpipeOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current;
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
      VLOG(1) << "SIGPIPE ignored: a dead peer's socket raises EPIPE in Gloo instead";
    }
  });
}

}  // namespace

// ------------------------------------------------------------------ GlooCommContext
GlooCommContext::GlooCommContext(std::unique_ptr<GlooMesh> mesh,
                                 std::unique_ptr<GlooFusedExchange> exchange,
                                 std::unique_ptr<P2PEndpoint> p2p,
                                 std::shared_ptr<Store> store, std::chrono::milliseconds timeout,
                                 std::string describe, GlooOptions options, int gid)
    : CpuCommContext(mesh->context()->rank, mesh->context()->size, "Gloo", std::move(describe)),
      mesh_(std::move(mesh)),
      store_(std::move(store)),
      ctx_(mesh_->context()),
      timeout_(timeout),
      options_(std::move(options)),
      gid_(gid),
      allreduce_forced_(ParseForcedAllReduce(FLAGS_gloo_allreduce_algo)),
      exchange_(std::move(exchange)),
      p2p_(std::move(p2p)) {
  exchange_->SetTimeout(timeout);
}

GlooCommContext::~GlooCommContext() = default;

ShmGroup* GlooCommContext::Shm() {
  if (shm_state_ == ShmState::kUndecided) {
    Call("shared-memory setup", [&] {
      mesh_->EnsureAll();  // every rank created the group (a timeout names who did not)
      // Over a store connection of its own: the program may block on the shared one.
      std::shared_ptr<Store> own = store_->Clone();
      shm_ = ShmGroup::Create(own ? own : store_, GetRank(), GetSize(), exchange_->Capacity(),
                              timeout_.load(), describe());
      if (!shm_) hier_ = MakeHierarchy(own ? own : store_);
    });
    shm_state_ = shm_ ? ShmState::kOn : ShmState::kOff;
    shm_live_.store(shm_.get(), std::memory_order_release);
    hier_live_.store(hier_.get(), std::memory_order_release);
  }
  return shm_.get();
}

std::string GlooCommContext::LivenessTrouble() const {
  if (!options_.liveness) return "";
  return Liveness::Process().TroubleIn(gid_, GetSize(), GetRank());
}

AllReduceAlgorithm GlooCommContext::PlanAllReduce(size_t bytes) {
  CpuAllReduceTopology where;
  where.world = GetSize();
  where.shared_memory = Shm() != nullptr;  // decided with the first op, alike on every rank
  where.hierarchical = Hier() != nullptr;
  where.exchange_capacity = VariableGatherCapacity();
  where.forced = allreduce_forced_;
  return distributed::PlanAllReduce(where, bytes);
}

const char* GlooCommContext::VariableAllGather(const void* send, size_t bytes, size_t* stride,
                                               std::vector<size_t>* lengths, Stream*) {
  PADDLE_ENFORCE(bytes <= exchange_->Capacity(),
                 errors::InvalidArgument("%s: %zu bytes exceed the variable all-gather's "
                                         "capacity of %zu",
                                         describe().c_str(), bytes, exchange_->Capacity()));
  const char* out = nullptr;
  if (ShmGroup* shm = Shm()) {
    ShmCall([&] { out = shm->VariableAllGather(send, bytes, stride, lengths); });
    return out;
  }
  Call(
      "allgather",
      [&] {
        mesh_->EnsureAll();  // the roll call after a failure learns the peers' hosts there
        exchange_->Connect();
        out = exchange_->Run(send, bytes, lengths);
      },
      /*on_exchange=*/true);
  *stride = exchange_->Stride();
  return out;
}

const char* GlooCommContext::ExchangeEqual(const char* what, const void* mine, size_t bytes,
                                           size_t* stride) {
  const char* out = VariableAllGather(mine, bytes, stride, &lengths_, nullptr);
  for (size_t len : lengths_) {
    if (len == bytes) continue;
    std::string sizes;
    for (size_t r = 0; r < lengths_.size(); ++r) {
      sizes += "\n  rank " + std::to_string(r) + ": " + std::to_string(lengths_[r]) + " bytes";
    }
    PADDLE_THROW(errors::InvalidArgument(
        "%s: the ranks' %s sizes differ (the agreement check is off?):%s", describe().c_str(),
        what, sizes.c_str()));
  }
  return out;
}

void GlooCommContext::Broadcast(const void* send, void* recv, int64_t count, DataType dtype,
                                int root, Stream*) {
  if (count == 0) return;
  if (ShmGroup* shm = Shm()) {
    ShmCall([&] { shm->Broadcast(send, recv, count * SizeOf(dtype), root); });
    return;
  }
  Call("broadcast", [&] {
    mesh_->EnsureAll();
    VisitDataType(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      ::gloo::BroadcastOptions opts(ctx_);
      opts.setRoot(root);
      if (GetRank() == root && send != recv) {
        opts.setInput(const_cast<T*>(static_cast<const T*>(send)), count);
      }
      opts.setOutput(static_cast<T*>(recv), count);
      opts.setTimeout(timeout_.load());
      ::gloo::broadcast(opts);
    });
  });
}

void GlooCommContext::Reduce(const void* send, void* recv, int64_t count, DataType dtype,
                             const Reduction& red, int root, Stream*) {
  if (count == 0) return;
  PreparedReduction prepared = PrepareReduction(send, count, dtype, red);
  const CpuReduceInput& p = prepared.in;
  if (ShmGroup* shm = Shm()) {
    ShmCall([&] { shm->Reduce(p.data, recv, p.count, p.dtype, prepared.op, root); });
    return;
  }
  const bool is_root = GetRank() == root;
  // Gloo reduces into the output on every rank; the contract writes `recv` on the root
  // only, so the other ranks reduce into scratch.
  void* out = recv;
  if (!is_root) {
    size_t bytes = static_cast<size_t>(p.count) * SizeOf(p.dtype);
    if (reduce_scratch_.size() < bytes) reduce_scratch_.resize(bytes);
    out = reduce_scratch_.data();
  }
  Call("reduce", [&] {
    mesh_->EnsureAll();
    VisitDataType(p.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      ::gloo::ReduceOptions opts(ctx_);
      opts.setRoot(root);
      if (p.data != out) opts.setInput(const_cast<T*>(static_cast<const T*>(p.data)), p.count);
      opts.setOutput(static_cast<T*>(out), p.count);
      opts.setReduceFunction(GetCpuReduceFn(p.dtype, prepared.op));
      opts.setTimeout(timeout_.load());
      ::gloo::reduce(opts);
    });
  });
  if (reduce_scratch_.size() > kMaxKeptScratch) std::vector<char>().swap(reduce_scratch_);
  if (is_root) FinishReduction(red, p.dtype, recv, p.count);
}

void GlooCommContext::AllGather(const void* send, void* recv, int64_t send_count,
                                DataType dtype, Stream*) {
  if (send_count == 0) return;
  const size_t bytes = static_cast<size_t>(send_count) * SizeOf(dtype);
  if (ShmGroup* shm = Shm()) {
    ShmCall([&] { shm->AllGather(send, recv, bytes); });
    return;
  }
  if (bytes <= VariableGatherCapacity()) {  // small: the bound exchange
    size_t stride = 0;
    const char* all = ExchangeEqual("allgather", send, bytes, &stride);
    for (int r = 0; r < GetSize(); ++r) {
      std::memcpy(static_cast<char*>(recv) + static_cast<size_t>(r) * bytes,
                  all + static_cast<size_t>(r) * stride, bytes);
    }
    return;
  }
  Call("allgather", [&] {
    mesh_->EnsureAll();
    VisitDataType(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      ::gloo::AllgatherOptions opts(ctx_);
      opts.setInput(const_cast<T*>(static_cast<const T*>(send)), send_count);
      opts.setOutput(static_cast<T*>(recv), send_count * GetSize());
      opts.setTimeout(timeout_.load());
      ::gloo::allgather(opts);
    });
  });
}

// Gloo 0.5 has no options-style reduce-scatter, so this is the ring algorithm on unbound
// buffers: n - 1 steps, each sending one block to the next rank and reducing the block
// received from the previous one, after which rank r holds the reduced block r. Half the
// traffic of an all-reduce.
void GlooCommContext::ReduceScatter(const void* send, void* recv, int64_t recv_count,
                                    DataType dtype, const Reduction& red, Stream*) {
  if (recv_count == 0) return;
  const int n = GetSize(), me = GetRank();
  if (n == 1) {
    RunAllReduce(send, recv, recv_count, dtype, red);
    return;
  }
  PreparedReduction prepared = PrepareReduction(send, recv_count * n, dtype, red);
  const CpuReduceInput& p = prepared.in;
  if (ShmGroup* shm = Shm()) {
    ShmCall([&] { shm->ReduceScatter(p.data, recv, p.count / n, p.dtype, prepared.op); });
    return;
  }
  const size_t block = static_cast<size_t>(p.count / n) * SizeOf(p.dtype);
  // Scratch kept across calls (only this stream's thread runs here): fresh pages for every
  // large call cost more than the copy. Past kMaxKeptScratch it is per call, not kept.
  std::vector<char> once_acc, once_incoming;
  const bool keep = block * n <= kMaxKeptScratch;
  std::vector<char>& acc = keep ? rs_acc_ : once_acc;  // partial sums, block by block
  std::vector<char>& incoming = keep ? rs_incoming_ : once_incoming;
  if (acc.size() < block * n) acc.resize(block * n);
  if (incoming.size() < block) incoming.resize(block);
  std::memcpy(acc.data(), p.data, block * n);
  CpuReduceFn reduce = GetCpuReduceFn(p.dtype, prepared.op);
  Call("reducescatter", [&] { mesh_->EnsureAll(); });
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
    WaitRecv(in_buf.get(), prev);
    WaitSend(acc_buf.get(), next);
    char* target = acc.data() + recv_block * block;
    reduce(target, target, incoming.data(), static_cast<size_t>(p.count / n));
  }
  std::memcpy(recv, acc.data() + static_cast<size_t>(me) * block, block);
  FinishReduction(red, p.dtype, recv, p.count / n);
}

bool GlooCommContext::AllReducePrepared(const void* send, void* recv, int64_t count,
                                        DataType dtype, ReduceOp op) {
  const size_t bytes = static_cast<size_t>(count) * SizeOf(dtype);
  const AllReduceAlgorithm algorithm = PlanAllReduce(bytes);
  VLOG(4) << describe() << " allreduce " << bytes << " B: " << AllReduceAlgorithmName(algorithm);
  switch (algorithm) {
    case AllReduceAlgorithm::kSharedMemory:
      ShmCall([&] { Shm()->AllReduce(send, recv, count, dtype, op); });
      return true;
    case AllReduceAlgorithm::kHierarchical:
      ShmCall([&] { HierAllReduce(Hier(), send, recv, count, dtype, op); });
      return true;
    case AllReduceAlgorithm::kGathered: {
      // Every rank's input through the exchange, reduced locally in rank order (the same bits
      // on every rank).
      size_t stride = 0;
      const char* all = ExchangeEqual("allreduce", send, bytes, &stride);
      CpuAllReduceGathered(dtype, op, all, stride, GetSize(), count, recv);
      return true;
    }
    case AllReduceAlgorithm::kTwoRankStream:
      // A reduce-scatter and an all-gather streamed both ways at once over the exchange's
      // peer connection, each rank reducing its half as it arrives (gloo_two_rank_allreduce.cc).
      Call(
          "allreduce",
          [&] {
            mesh_->EnsureAll();  // the roll call after a failure learns the peers' hosts there
            exchange_->Connect();
            exchange_->TwoRankAllReduce(send, recv, count, dtype, GetCpuReduceFn(dtype, op),
                                        op == ReduceOp::AVG);
          },
          /*on_exchange=*/true);
      return true;
    case AllReduceAlgorithm::kHalvingDoubling:
    case AllReduceAlgorithm::kRing:
    case AllReduceAlgorithm::kNative:
      break;
  }
  Call("allreduce", [&] {
    mesh_->EnsureAll();
    VisitDataType(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      ::gloo::AllreduceOptions opts(ctx_);
      if (send != recv) opts.setInput(const_cast<T*>(static_cast<const T*>(send)), count);
      opts.setOutput(static_cast<T*>(recv), count);
      opts.setReduceFunction(GetCpuReduceFn(dtype, op));
      opts.setTimeout(timeout_.load());
      opts.setAlgorithm(algorithm == AllReduceAlgorithm::kRing
                            ? ::gloo::AllreduceOptions::Algorithm::RING
                            : ::gloo::AllreduceOptions::Algorithm::BCUBE);
      ::gloo::allreduce(opts);
    });
  });
  return false;  // AVG: CpuCommContext divides
}

// Gather, Scatter and AllToAllV are native on the shared-memory path only (the engine asks
// HasNativeGatherScatter, and takes false from AllToAllV, before sending blocks itself).
void GlooCommContext::Gather(const void* send, void* recv, int64_t count, DataType dtype,
                             int root, Stream*) {
  ShmGroup* shm = NativeShm("gather");
  ShmCall([&] { shm->Gather(send, recv, count * SizeOf(dtype), root); });
}

void GlooCommContext::Scatter(const void* send, void* recv, int64_t count, DataType dtype,
                              int root, Stream*) {
  ShmGroup* shm = NativeShm("scatter");
  ShmCall([&] { shm->Scatter(send, recv, count * SizeOf(dtype), root); });
}

ShmGroup* GlooCommContext::NativeShm(const char* op) {
  ShmGroup* shm = Shm();
  PADDLE_ENFORCE_NOT_NULL(shm, errors::PreconditionNotMet("%s: no native %s here",
                                                          describe().c_str(), op));
  return shm;
}

bool GlooCommContext::AllToAllV(const void* send, const std::vector<int64_t>& send_counts,
                                const std::vector<int64_t>& send_offsets, void* recv,
                                const std::vector<int64_t>& recv_counts,
                                const std::vector<int64_t>& recv_offsets, DataType dtype,
                                Stream*) {
  ShmGroup* shm = Shm();
  if (shm == nullptr) return false;
  const size_t es = SizeOf(dtype);
  auto bytes = [es](const std::vector<int64_t>& v) {
    std::vector<size_t> out;
    for (int64_t x : v) out.push_back(static_cast<size_t>(x) * es);
    return out;
  };
  ShmCall([&] {
    shm->AllToAllV(static_cast<const char*>(send), bytes(send_counts), bytes(send_offsets),
                   static_cast<char*>(recv), bytes(recv_counts), bytes(recv_offsets));
  });
  return true;
}

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
  } else if (IsLocalAddress(MasterHost().c_str())) {
    e.hostname = "127.0.0.1";
  } else {
    e.hostname = SourceAddressTowards(MasterHost().c_str());
    if (e.hostname.empty()) {  // no route known: the host name, as Gloo does by default
      char host[256] = {0};
      gethostname(host, sizeof(host) - 1);
      e.hostname = host;
    }
  }
  return e;
}

std::unique_ptr<CommContext> CreateGlooCommContext(const std::shared_ptr<Store>& store, int gid,
                                                   int rank, int size,
                                                   const GlooOptions& options) {
  IgnoreSigpipeOnce();
  auto attr = DeviceAttr(options);
  std::string describe =
      "Gloo communicator of group " + std::to_string(gid) +
      (options.group_desc.empty() ? std::string() : " '" + options.group_desc + "'") +
      " (rank " + std::to_string(rank) + "/" + std::to_string(size) + ")";
  std::shared_ptr<::gloo::transport::Device> device;
  GlooCall("device creation", [&] { device = ::gloo::transport::tcp::CreateDevice(attr); });
  const std::string listening = device->str();  // before the mesh takes the device
  // Pairs connect on first use (gloo_mesh_internal.h): creating the group waits for no one.
  auto group_store = std::make_shared<PrefixStore>("gloo/" + std::to_string(gid), store);
  // Before the mesh publishes this rank's address: a rank whose address is there has
  // published where it runs too (ShmGroup::Create reads it without waiting).
  group_store->set(ShmGroup::HostKey(rank), ShmGroup::HostValue());
  const int liveness_gid = options.liveness ? gid : kUnmappedRanks;
  auto mesh = std::make_unique<GlooMesh>(group_store, rank, size, device, options.timeout,
                                         describe, liveness_gid);
  // The fused exchange's connections (GlooFusedExchange): a connection of our own between two
  // ranks, on the address Gloo listens on; a ring of Gloo pairs of their own for more.
  std::unique_ptr<GlooMesh> ring;
  std::unique_ptr<PeerConnection> peer;
  const std::string exchange_prefix = "gloo/" + std::to_string(gid) + "/exchange";
  if (size == 2) {
    peer = std::make_unique<PeerConnection>(std::make_shared<PrefixStore>(exchange_prefix, store),
                                            "peer", rank, mesh->host(),
                                            describe + " (exchange connection)");
  } else if (size > 2) {
    ring = std::make_unique<GlooMesh>(std::make_shared<PrefixStore>(exchange_prefix, store), rank,
                                      size, std::move(device), options.timeout,
                                      describe + " (exchange connections)", liveness_gid);
  }
  auto exchange = std::make_unique<GlooFusedExchange>(rank, size, std::move(ring), std::move(peer));
  // Point-to-point messages, on the same address. A connection that ends blames its peer
  // only after the liveness service said who of the group is really gone.
  auto explain = [liveness_gid, size, rank](const std::string&) {
    return liveness_gid == kUnmappedRanks
               ? std::string()
               : Liveness::Process().TroubleIn(liveness_gid, size, rank);
  };
  auto p2p = std::make_unique<P2PEndpoint>(group_store, rank, size, mesh->host(),
                                           describe + " (point-to-point)", options.timeout,
                                           explain);
  // Where this rank listens, as Gloo bound it (GLOG_v=1, or GLOG_vmodule=gloo_comm_context=1):
  // the multi-node tests assert with it that nothing listens on loopback.
  VLOG(1) << describe << " listens on " << listening << " (chosen by "
          << (attr.iface.empty() ? "address " + attr.hostname : "interface " + attr.iface) << ")";
  return std::make_unique<GlooCommContext>(std::move(mesh), std::move(exchange), std::move(p2p),
                                           std::move(group_store), options.timeout,
                                           std::move(describe), options, gid);
}

}  // namespace distributed
}  // namespace phi
