// GlooFusedExchange: an all-gather of blocks whose sizes may differ across ranks, on buffers
// bound to the pairs once (see gloo_comm_context_internal.h for what it is for).
//
// Why bound buffers: Gloo's options-style collectives (gloo::allgather, gloo::allreduce) bind
// unbound buffers per call, and an unbound receive is announced to the sender before the data
// may flow; a bound buffer is registered with its pair once, and a send writes straight into
// the peer's memory at an offset. On loopback that is 2-5x faster for small and mid-size
// messages (docs/benchmarks.md, "Gloo latency").
//
// The protocol: a ring of n - 1 rounds. Each rank's block travels to the right, each block
// led by an 8-byte length. Round r sends the block received in round r - 1 (the rank's own in
// round 0) into the same position of the right neighbour's buffer. Two regions are used in
// turn, call by call, and they replace Gloo's "ready" notifications: the left neighbour can
// write into this call's region again only in the call after next, and it cannot finish the
// next call before this rank's block of the next call has gone round the ring to it, which
// this rank sends only after it has read this call's region. So a call is n - 1 sends and
// receives, nothing more.
//
// A peer may finish its call and close its connection (exit, destroy the group) while this
// rank has yet to wait for the peer's last block, which did arrive: Gloo's waitRecv then
// raises "connection closed" although the data is in the buffer. So every block carries the
// call's sequence number before and after its payload, and when a wait raises, a block whose
// two numbers both say "this call" has arrived whole (the transport writes it in order) and
// is used; only a block that is missing or cut short is an error.
//
// On the ring every send is waited for before the call returns, so nothing of this rank's is
// left in a Gloo queue when it ends (a rank that ended right after its call once dropped a
// queued tail with the pair, and its right neighbour missed the end of a block: 1
// DataParallel run in 30). A send that completed never raises in its wait, and the right
// neighbour cannot finish before it has read all of it, so a write or read that cannot
// complete within the timeout (a silent neighbour) is this call's failure and raises here.
//
// With two ranks the same blocks cross the peer connection both ways at once (one duplex
// stream per call: the header, then the payload the header announces). The two regions and
// the call numbers are kept, so the result has the ring's layout; a peer that closes right
// after its call has written everything first (a socket delivers what was sent before its
// end), so no salvage is needed there.
//
// Sizes may differ across ranks (up to the capacity, which every rank has the same: it
// depends on the group size only), so the agreement check can exchange records and payloads
// of any size here before the sizes are known to agree: nothing a peer sends can overflow
// this rank's buffer, and every rank sees every rank's length.
#include <algorithm>
#include <chrono>
#include <cstring>

#include <gloo/transport/buffer.h>

#include "phi/core/distributed/gloo_comm_context_internal.h"
#include "phi/core/errors.h"

namespace phi {
namespace distributed {
namespace {
// [u64 length][u64 call][payload][u64 call]
constexpr size_t kHeader = 2 * sizeof(uint64_t);
constexpr size_t kTrailer = sizeof(uint64_t);
// The context's bound-buffer slots: nothing else here binds buffers.
constexpr int kExchangeSlot = 0x7b0000;  // bound-buffer slots are ints; AllgatherRing-style
                                         // algorithms take small ones from nextSlot()
constexpr int kWarmUpSlot = 0x7b0001;    // BindRing's first message

uint64_t Field(const char* at) {
  uint64_t v = 0;
  std::memcpy(&v, at, sizeof(v));
  return v;
}
}  // namespace

size_t GlooFusedExchange::CapacityFor(int size) {
  // Small groups: up to 256 KiB per rank; the buffer holds 2 x size blocks, and an
  // all-gather moves (n - 1) blocks per rank, so large groups get less.
  // The headroom lets an agreement record ride along with a payload of the full size.
  const size_t by_size = (size_t{1} << 20) / static_cast<size_t>(size > 0 ? size : 1);
  return std::max<size_t>(size_t{8} << 10, std::min<size_t>(size_t{256} << 10, by_size)) + 256;
}

GlooFusedExchange::GlooFusedExchange(int rank, int size, std::unique_ptr<GlooMesh> ring,
                                     std::unique_ptr<PeerConnection> peer)
    : rank_(rank),
      size_(size),
      ring_(std::move(ring)),
      peer_(std::move(peer)),
      capacity_(CapacityFor(size)),
      stride_(kHeader + capacity_ + kTrailer) {}

GlooFusedExchange::~GlooFusedExchange() = default;

void GlooFusedExchange::SetTimeout(std::chrono::milliseconds timeout) {
  timeout_.store(timeout);
  if (ring_) ring_->SetTimeout(timeout);
}

void GlooFusedExchange::Connect() {
  if (peer_) peer_->Connect(timeout_.load());
  if (ring_) ring_->EnsureAll();
}

void GlooFusedExchange::Abort() {
  if (peer_) peer_->Shutdown();
  if (ring_) ring_->CloseConnected();
}

// The ring's buffers, bound once. Gloo sizes a pair's send buffer to the largest message sent
// on it so far (the kernel allots twice that); sized by a small exchange, the next call's
// message would not fit while the last one is unacked, and the receiver, in this ping-pong
// pattern, delays that ACK by up to 40 ms: a 16 KiB all-reduce took 9 us at the median and
// tens of ms now and then. So the first message on the pair is one whole region, which
// leaves a send buffer that two messages of any size fit. It moves between scratch buffers of
// its own: in the exchange's buffer, this rank's send would read a region while the left
// neighbour's warm-up writes it.
void GlooFusedExchange::BindRing() {
  const int n = size_, me = rank_;
  const auto& ctx = ring_->context();
  const int left = (me + n - 1) % n, right = (me + 1) % n;
  send_ = ctx->getPair(right)->createSendBuffer(kExchangeSlot, buffer_.data(), buffer_.size());
  recv_ = ctx->getPair(left)->createRecvBuffer(kExchangeSlot, buffer_.data(), buffer_.size());
  const size_t region = static_cast<size_t>(n) * stride_;
  std::vector<char> out(region, 0), in(region);
  auto warm_send = ctx->getPair(right)->createSendBuffer(kWarmUpSlot, out.data(), region);
  auto warm_recv = ctx->getPair(left)->createRecvBuffer(kWarmUpSlot, in.data(), region);
  warm_send->send(0, region, 0);
  warm_send->waitSend();
  warm_recv->waitRecv();
}

const char* GlooFusedExchange::Run(const void* mine, size_t bytes,
                                   std::vector<size_t>* lengths) {
  const int n = size_;
  if (buffer_.empty()) {
    buffer_.assign(2 * static_cast<size_t>(n) * stride_, 0);
    if (ring_) BindRing();
  }
  char* region = buffer_.data() + static_cast<size_t>(region_) * n * stride_;
  region_ = 1 - region_;
  const uint64_t call = ++calls_;
  char* own = region + static_cast<size_t>(rank_) * stride_;
  const uint64_t len = bytes;
  std::memcpy(own, &len, sizeof(len));
  std::memcpy(own + sizeof(len), &call, sizeof(call));
  if (bytes > 0) std::memcpy(own + kHeader, mine, bytes);
  std::memcpy(own + kHeader + bytes, &call, sizeof(call));
  const char* out = peer_ ? RunOnPeer(region, call, bytes) : RunRing(region, call);
  lengths->resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    (*lengths)[static_cast<size_t>(r)] = Field(region + static_cast<size_t>(r) * stride_);
  }
  return out;
}

namespace {
// This rank's block out and the peer's block in, at once: [u64 length][u64 call][payload].
class BlockStreams : public DuplexStreams {
 public:
  BlockStreams(const char* mine, size_t mine_len, char* theirs, size_t capacity, uint64_t call,
               int peer)
      : mine_(mine), theirs_(theirs), send_total_(kHeader + mine_len), capacity_(capacity),
        call_(call), peer_(peer) {}
  size_t SendTotal() const override { return send_total_; }
  size_t RecvTotal() const override { return recv_total_; }
  size_t ReadyToSend(size_t sent, const char** from) override {
    *from = mine_ + sent;
    return send_total_ - sent;
  }
  size_t RoomToReceive(size_t received, char** to) override {
    *to = theirs_ + received;
    return recv_total_ - received;
  }
  void Received(size_t before, size_t after) override {
    if (before >= kHeader || after < kHeader) return;
    const uint64_t len = Field(theirs_), call = Field(theirs_ + sizeof(uint64_t));
    PADDLE_ENFORCE(call == call_ && len <= capacity_,
                   errors::External("fused exchange: rank %d's block is out of step (call %llu "
                                    "of %llu bytes, expected call %llu of at most %zu): a "
                                    "corrupted or foreign message",
                                    peer_, static_cast<unsigned long long>(call),
                                    static_cast<unsigned long long>(len),
                                    static_cast<unsigned long long>(call_), capacity_));
    recv_total_ = kHeader + len;
  }

 private:
  const char* mine_;
  char* theirs_;
  const size_t send_total_, capacity_;
  size_t recv_total_ = kHeader;  // until the header says how much follows
  const uint64_t call_;
  const int peer_;
};
}  // namespace

const char* GlooFusedExchange::RunOnPeer(char* region, uint64_t call, size_t bytes) {
  const int peer = 1 - rank_;
  char* theirs = region + static_cast<size_t>(peer) * stride_;
  BlockStreams streams(region + static_cast<size_t>(rank_) * stride_, bytes, theirs, capacity_,
                       call, peer);
  peer_->Duplex("the fused exchange", &streams, timeout_.load(), &spin_);
  std::memcpy(theirs + streams.RecvTotal(), &call, sizeof(call));  // the ring's layout
  return region + kHeader;
}

const char* GlooFusedExchange::RunRing(char* region, uint64_t call) {
  const int n = size_, me = rank_;
  auto block = [&](int r) { return region + static_cast<size_t>(r) * stride_; };
  // Whether block r of this call arrived whole (see the top of the file).
  auto whole = [&](int r) {
    const char* b = block(r);
    const uint64_t len = Field(b);
    return Field(b + sizeof(uint64_t)) == call && len <= capacity_ &&
           Field(b + kHeader + len) == call;
  };
  const size_t region_offset = static_cast<size_t>(region - buffer_.data());
  int carried = me;  // the block sent this round
  for (int round = 0; round < n - 1; ++round) {
    const size_t offset = region_offset + static_cast<size_t>(carried) * stride_;
    const uint64_t carried_len = Field(block(carried));
    PADDLE_ENFORCE(carried_len <= capacity_,
                   errors::External("fused exchange: rank %d's block says %llu bytes, more than "
                                    "the capacity of %zu (a corrupted message)",
                                    carried, static_cast<unsigned long long>(carried_len),
                                    capacity_));
    send_->send(offset, kHeader + carried_len + kTrailer, offset);
    carried = (carried + n - 1) % n;  // the left neighbour's block, arriving now
    try {
      recv_->waitRecv();
    } catch (...) {
      if (!whole(carried)) throw;
    }
  }
  for (int round = 0; round < n - 1; ++round) send_->waitSend();
  return region + kHeader;
}

}  // namespace distributed
}  // namespace phi
