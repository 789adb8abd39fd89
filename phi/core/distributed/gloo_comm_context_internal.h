// The Gloo CommContext's class (internal to the Gloo engine: gloo_comm_context.cc holds the
// collectives, gloo_p2p.cc the point-to-point protocol and groups).
#pragma once

#include <atomic>
#include <chrono>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/common/error.h>
#include <gloo/transport/buffer.h>
#include <gloo/transport/unbound_buffer.h>

#include "phi/core/distributed/comm_context.h"
#include "phi/core/distributed/cpu_comm_context.h"
#include "phi/core/distributed/gloo_comm_context.h"
#include "phi/core/distributed/cpu_coalesce.h"
#include "phi/core/distributed/cpu_reduce.h"
#include "phi/core/distributed/gloo_mesh_internal.h"
#include "phi/core/distributed/p2p_transport_internal.h"
#include "phi/core/distributed/peer_connection_internal.h"
#include "phi/core/distributed/shm_group.h"
#include "phi/core/distributed/spin_policy.h"
#include "phi/core/errors.h"

namespace phi {
namespace distributed {

// Gloo slots: Gloo's collectives use slots of their own prefixes; ours use prefixes Gloo
// never does. Point-to-point messages do not travel on Gloo's pairs at all
// (p2p_transport_internal.h). The ring reduce-scatter's messages; steps of one call and calls follow each other in the
// same order on every rank, so one slot suffices.
constexpr uint64_t kReduceScatterSlot = uint64_t{0x7d} << 56;

// Calls into Gloo and turns its exceptions into typed phi errors by their Gloo type:
// IoException (the network: Timeout or Unavailable), EnforceNotMet and other Exceptions
// (External). Gloo has no type for a timeout: an IoException is a Timeout when the call
// ran for its whole `timeout` (our own clock decides), and, as a documented fallback for
// Gloo's internal deadlines, when its text says "Timed out". `gloo_timed_out`, when given,
// is set when Gloo itself timed out (not a phi error raised inside `f`).
template <typename F>
void GlooCall(const char* what, F&& f,
              std::chrono::milliseconds timeout = std::chrono::milliseconds::zero(),
              bool* gloo_timed_out = nullptr);

// How long a rank that timed out in Gloo waits for the others to report the same failure
// (GlooMesh::RollCall): an error comes at most this long (+150 ms) after the group's timeout.
// The ranks alive time out within milliseconds of each other, and the answer must come before
// the comm watchdog's next tick past the timeout (FLAGS_comm_watchdog_interval_ms, 500 ms),
// which would otherwise report the same op with less to say (and abort by default).
constexpr std::chrono::milliseconds kRollCallBudget{300};

// An all-gather of blocks up to Capacity() bytes whose sizes may differ across ranks
// (gloo_fused_exchange.cc explains the protocol). It carries the agreement check with its
// payload (one exchange per checked op), and the small all-gathers and all-reduces. It runs
// on connections of its own: with two ranks a PeerConnection (peer_connection_internal.h),
// which the two-rank all-reduce streams over too; with three or more a ring of Gloo pairs
// with buffers bound once. Not on the communicator's pairs: Gloo sizes a socket's send
// buffer to its first bound message and so turns the kernel's buffer autotuning off, which
// would slow large unbound transfers on the same socket 50-100x (a 1 MiB all-reduce took
// 90 ms instead of 1 ms). Only the comm stream's thread runs it (Abort and SetTimeout: any
// thread); needs more than one rank.
class GlooFusedExchange {
 public:
  // Exactly one of `ring` (three or more ranks) and `peer` (two ranks).
  GlooFusedExchange(int rank, int size, std::unique_ptr<GlooMesh> ring,
                    std::unique_ptr<PeerConnection> peer);
  ~GlooFusedExchange();
  // The same on every rank of a group of `size`.
  static size_t CapacityFor(int size);
  size_t Capacity() const { return capacity_; }
  size_t Stride() const { return stride_; }
  // Connects the exchange's connections (the group's timeout).
  void Connect();
  // Sends `bytes` (<= Capacity()) and returns where rank r's block starts: at
  // result + r * Stride(), (*lengths)[r] bytes long. Valid until the next call.
  const char* Run(const void* mine, size_t bytes, std::vector<size_t>* lengths);
  // Two ranks only: the all-reduce of `count` elements as a reduce-scatter and an all-gather
  // streamed both ways at once over the peer connection (gloo_two_rank_allreduce.cc).
  // `reduce` combines rank 0's operand with rank 1's; `average` divides the result by 2.
  // Raises Timeout for a peer silent for the group's timeout, Unavailable for a network
  // failure, InvalidArgument when the peer streams another size.
  void TwoRankAllReduce(const void* in, void* out, int64_t count, DataType dtype,
                        CpuReduceFn reduce, bool average);
  bool OnPeerConnection() const { return peer_ != nullptr; }
  // An op of Gloo's ran on the other connections: the next receive blocks at once
  // (SpinPolicy::Disarm). Any thread.
  void AfterGlooOp() { spin_.Disarm(); }
  // Later calls and connections take `timeout`. Any thread.
  void SetTimeout(std::chrono::milliseconds timeout);
  // Closes the connections: the peers' calls on them fail at once, and so does this rank's
  // on the peer connection. Any thread; never raises.
  void Abort();
  // " [the peer at ADDR is rank R: ...]" for the ring's peers named in `msg`.
  std::string NamePeersIn(const std::string& msg) const {
    return ring_ ? ring_->NamePeersIn(msg) : std::string();
  }

 private:
  const char* RunRing(char* region, uint64_t call);
  const char* RunOnPeer(char* region, uint64_t call, size_t bytes);
  void BindRing();  // the ring's buffers on buffer_ (allocated by the first Run)
  const int rank_, size_;
  std::unique_ptr<GlooMesh> ring_;
  std::unique_ptr<PeerConnection> peer_;
  std::atomic<std::chrono::milliseconds> timeout_{};
  size_t capacity_, stride_;
  std::vector<char> buffer_;  // two regions of size blocks of stride_ bytes
  int region_ = 0;            // the region the next call uses
  uint64_t calls_ = 0;        // calls so far: the same count on every rank
  std::unique_ptr<::gloo::transport::Buffer> send_, recv_;  // the ring's bound buffers
  SpinPolicy spin_;  // the peer connection's waits
  uint64_t two_rank_calls_ = 0;  // TwoRankAllReduce calls so far: the same on both ranks
  std::vector<char> segment_;    // the peer's operand, one segment at a time
};

class GlooCommContext : public CpuCommContext {
 public:
  // `exchange`: the fused exchange, on connections of its own. `store`: the group's rendezvous prefix, where the
  // first collective decides whether the ranks share a host (ShmGroup::Create).
  // `options`, `gid`: what the group was created with (the hierarchical path's network
  // step makes a communicator of its own with them).
  // `p2p`: the point-to-point endpoint.
  GlooCommContext(std::unique_ptr<GlooMesh> mesh, std::unique_ptr<GlooFusedExchange> exchange,
                  std::unique_ptr<P2PEndpoint> p2p, std::shared_ptr<Store> store,
                  std::chrono::milliseconds timeout, std::string describe,
                  GlooOptions options = {}, int gid = 0);
  ~GlooCommContext() override;

  std::string BackendName() const override { return "Gloo"; }
  bool SupportsAnySource() const override { return true; }
  bool PostsP2P() const override { return true; }
  std::shared_ptr<ProgressPoller> P2PPoller() override;
  void PostSend(const void* send, int64_t count, DataType dtype, int peer, int tag,
                P2PDone done) override;
  void PostRecv(void* recv, int64_t count, DataType dtype, int peer, int tag, int* source,
                P2PDone done) override;

  void Broadcast(const void* send, void* recv, int64_t count, DataType dtype, int root,
                 Stream*) override;
  void Reduce(const void* send, void* recv, int64_t count, DataType dtype, const Reduction& red,
              int root, Stream*) override;
  void AllGather(const void* send, void* recv, int64_t send_count, DataType dtype,
                 Stream*) override;
  void ReduceScatter(const void* send, void* recv, int64_t recv_count, DataType dtype,
                     const Reduction& red, Stream*) override;
  void Send(const void* send, int64_t count, DataType dtype, int peer, int tag,
            Stream*) override;
  void Recv(void* recv, int64_t count, DataType dtype, int peer, int tag, Stream*,
            int* source) override;
  size_t VariableGatherCapacity() const override {
    return GetSize() > 1 ? exchange_->Capacity() : 0;
  }
  AllReduceAlgorithm PlanAllReduce(size_t bytes) override;
  const char* VariableAllGather(const void* send, size_t bytes, size_t* stride,
                                std::vector<size_t>* lengths, Stream*) override;
  // Native where the group shares a host (the shared-memory path); else the engine's sends.
  bool HasNativeGatherScatter() override { return Shm() != nullptr; }
  void Gather(const void* send, void* recv, int64_t count, DataType dtype, int root,
              Stream*) override;
  void Scatter(const void* send, void* recv, int64_t count, DataType dtype, int root,
               Stream*) override;
  bool AllToAllV(const void* send, const std::vector<int64_t>& send_counts,
                 const std::vector<int64_t>& send_offsets, void* recv,
                 const std::vector<int64_t>& recv_counts,
                 const std::vector<int64_t>& recv_offsets, DataType dtype, Stream*) override;
  void ConnectAll() override {
    Call("connect", [this] {
      mesh_->EnsureAll();
      exchange_->Connect();
    });
  }
  // Later calls, connections and the shared segment's waits use `timeout`.
  void SetTimeout(std::chrono::milliseconds timeout) override {
    timeout_.store(timeout);
    mesh_->SetTimeout(timeout);
    exchange_->SetTimeout(timeout);
    p2p_->SetTimeout(timeout);
    if (ShmGroup* shm = shm_live_.load(std::memory_order_acquire)) shm->SetTimeout(timeout);
    if (Hierarchy* h = hier_live_.load(std::memory_order_acquire)) h->SetTimeout(timeout);
  }

 private:
  // A send or receive of an open group, posted at the outermost GroupEnd (gloo_p2p.cc).
  using DeferredP2P = PendingCpuP2P;
  // Abort (CpuCommContext) marks the communicator broken, then this closes its connections
  // and its shared segment: the peers' ops fail at once. This rank's own op ends at once on
  // the shared segment, the exchange's connections and in point-to-point waits; inside one
  // of Gloo's algorithms it ends at the group's timeout (Gloo offers no way to wake it; the
  // engine's task is completed at once all the same). In gloo_p2p.cc.
  void WakeOnAbort(const std::string& why) override;
  // Collectives (gloo_comm_context.cc).
  // The all-reduce by the plan (allreduce_plan.h); the shared-memory, hierarchical, gathered
  // and two-rank paths divide AVG themselves, Gloo's algorithms leave it to the caller.
  bool AllReducePrepared(const void* send, void* recv, int64_t count, DataType dtype,
                         ReduceOp op) override;
  // The fused exchange of `bytes` from every rank, which must all send as many (else
  // InvalidArgument naming each rank's size: every rank took part, so the communicator stays
  // usable). Returns rank r's block at result + r * exchange_.Stride().
  const char* ExchangeEqual(const char* what, const void* mine, size_t bytes, size_t* stride);

  // Point to point (gloo_p2p.cc), on the endpoint p2p_. Every entry checks the peer.
  void CheckPeer(int peer, bool any_allowed, const char* what) const;
  // Posts and finishes a group's deferred sends and receives; raises the first error.
  void RunP2PBatch(const std::vector<DeferredP2P>& ops) override;
  void WaitSend(::gloo::transport::UnboundBuffer* buf, int peer);
  int WaitRecv(::gloo::transport::UnboundBuffer* buf, int peer);

  // Every Gloo call goes through here: raises at once when the communicator is already
  // broken, and marks it broken on a failure (Gloo's pairs are then closed or hold stale
  // bytes: a later op would misread them), naming the peer rank behind a failed
  // connection where it is known. `on_exchange`: f runs the fused exchange only (otherwise
  // the exchange's next receive does not spin: GlooFusedExchange::AfterGlooOp).
  template <typename F>
  void Call(const char* what, F&& f, bool on_exchange = false);
  // The same for an op over shared memory, except that InvalidArgument (calls that differ,
  // found at the op's first step on every rank alike) leaves the communicator usable.
  template <typename F>
  void ShmCall(F&& f);

  // The shared-memory path, decided by the first collective (the same answer on every rank:
  // ShmGroup::Create); nullptr when the group does not share a host. Only the comm stream's
  // thread calls it; Abort, on any thread, reaches the segment through shm_live_.
  ShmGroup* Shm();
  ShmGroup* NativeShm(const char* op);  // Shm() for an op that has no network path here
  enum class ShmState { kUndecided, kOn, kOff };
  ShmState shm_state_ = ShmState::kUndecided;
  std::unique_ptr<ShmGroup> shm_;
  std::atomic<ShmGroup*> shm_live_{nullptr};

  // The hierarchical path (gloo_hierarchical.cc), decided with Shm() when the group spans
  // hosts and at least one host has two or more of its ranks: an all-reduce reduces on each
  // host over shared memory to the host's lowest rank (its leader), all-reduces among the
  // leaders over the network, and broadcasts on each host again.
  struct Hierarchy {
    std::unique_ptr<ShmGroup> local;       // this host's ranks; null when alone on it
    std::unique_ptr<CommContext> leaders;  // one rank per host; null off the leaders
    void Abort(const std::string& why);
    void SetTimeout(std::chrono::milliseconds timeout);
  };
  // Collective (every rank, with Shm()'s decision): the hierarchy, or null (the same answer
  // on every rank).
  std::unique_ptr<Hierarchy> MakeHierarchy(const std::shared_ptr<Store>& store);
  Hierarchy* Hier() {
    Shm();
    return hier_.get();
  }
  void HierAllReduce(Hierarchy* h, const void* in, void* out, int64_t count, DataType dtype,
                     ReduceOp op);
  std::unique_ptr<Hierarchy> hier_;
  std::atomic<Hierarchy*> hier_live_{nullptr};

  std::unique_ptr<GlooMesh> mesh_;
  std::shared_ptr<Store> store_;
  std::shared_ptr<::gloo::Context> ctx_;
  std::atomic<std::chrono::milliseconds> timeout_;
  GlooOptions options_;  // what the group was created with
  int gid_;
  const ForcedAllReduce allreduce_forced_;  // FLAGS_gloo_allreduce_algo, read at creation
  // " [liveness: ...]" for the ranks of the group that are not alive and running.
  std::string LivenessTrouble() const;
  static constexpr size_t kMaxKeptScratch = size_t{256} << 20;
  std::vector<char> rs_acc_, rs_incoming_;  // ReduceScatter scratch
  std::vector<char> reduce_scratch_;        // non-root output of Reduce
  std::vector<size_t> lengths_;             // the fused exchange's block lengths
  std::unique_ptr<GlooFusedExchange> exchange_;
  std::unique_ptr<P2PEndpoint> p2p_;
  // The unbound buffers a reduce-scatter wait blocks on, so that Abort can
  // wake it (Gloo's abortWaitSend/abortWaitRecv). A wait registers and checks the broken
  // state under waiting_mu_; Abort marks it broken before it takes waiting_mu_, so a wait is
  // either refused or woken.
  std::mutex waiting_mu_;
  std::vector<std::pair<::gloo::transport::UnboundBuffer*, bool /*recv*/>> waiting_;
  // Waits for `buf`'s send or receive, within the timeout, unless Abort comes first.
  // False on a timeout; raises the abort (Unavailable).
  bool AbortableWait(::gloo::transport::UnboundBuffer* buf, bool recv, int* source);
};

// ------------------------------------------------------------------ inline templates
template <typename F>
void GlooCall(const char* what, F&& f, std::chrono::milliseconds timeout,
              bool* gloo_timed_out) {
  const auto start = std::chrono::steady_clock::now();
  try {
    f();
  } catch (const ::gloo::IoException& e) {
    std::string msg = e.what();
    const bool ran_out = timeout > std::chrono::milliseconds::zero() &&
                         std::chrono::steady_clock::now() - start >= timeout;
    if (ran_out || msg.find("imed out") != std::string::npos) {
      if (gloo_timed_out != nullptr) *gloo_timed_out = true;
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

template <typename F>
void GlooCommContext::Call(const char* what, F&& f, bool on_exchange) {
  ThrowIfBroken();
  bool gloo_timed_out = false;
  try {
    GlooCall(what, std::forward<F>(f), timeout_.load(), &gloo_timed_out);
    if (!on_exchange) exchange_->AfterGlooOp();
  } catch (const EnforceNotMet& e) {
    std::string msg = e.what();
    if (e.code() == ErrorCode::kUnavailable) {
      // Which peer's connection ended, then who of the group is really gone: a peer that
      // closed may be alive and only have aborted after another rank's death.
      msg += mesh_->NamePeersIn(msg) + exchange_->NamePeersIn(msg) + LivenessTrouble();
    }
    // A silent peer (partition, SIGSTOP) closes nothing: ask the store who is still there.
    // The exchange's peer connection raises its timeouts itself.
    const bool timed_out = gloo_timed_out || (on_exchange && e.code() == ErrorCode::kTimeout);
    if (timed_out) msg += mesh_->RollCall(kRollCallBudget);
    MarkBroken(msg);
    if (e.code() == ErrorCode::kUnavailable) throw UnavailableError(msg);
    if (timed_out) throw TimeoutError(msg);
    throw;
  }
}

template <typename F>
void GlooCommContext::ShmCall(F&& f) {
  ThrowIfBroken();
  try {
    f();
  } catch (const InvalidArgumentError&) {
    throw;
  } catch (const EnforceNotMet& e) {
    MarkBroken(e.what());
    throw;
  }
}

}  // namespace distributed
}  // namespace phi
