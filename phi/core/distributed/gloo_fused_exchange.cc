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
// Every send is written before the call returns, so nothing of this rank's is left in a
// Gloo queue when it ends: with two ranks the pair is synchronous (see Bind) and this thread
// writes itself; on larger rings Gloo's loop thread writes and the call waits for each send.
// (Without that, a rank that ended right after its call dropped a queued tail with the pair,
// and its right neighbour missed the end of a block: 1 DataParallel run in 30.) A send that
// completed never raises in its wait, and the right neighbour cannot finish before it has
// read all of it, so a write or read that cannot complete within the timeout (a silent
// neighbour) is this call's failure and raises here, with the call's own timing.
//
// Sizes may differ across ranks (up to the capacity, which every rank has the same: it
// depends on the group size only), so the agreement check can exchange records and payloads
// of any size here before the sizes are known to agree: nothing a peer sends can overflow
// this rank's buffer, and every rank sees every rank's length.
#include <poll.h>
#include <sys/socket.h>

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
// The one bound-buffer slot of the context: nothing else here binds buffers.
constexpr int kExchangeSlot = 0x7b0000;  // bound-buffer slots are ints; AllgatherRing-style
                                         // algorithms take small ones from nextSlot()
}  // namespace

size_t GlooFusedExchange::CapacityFor(int size) {
  // Small groups: up to 256 KiB per rank; the buffer holds 2 x size blocks, and an
  // all-gather moves (n - 1) blocks per rank, so large groups get less.
  // The headroom lets an agreement record ride along with a payload of the full size.
  const size_t by_size = (size_t{1} << 20) / static_cast<size_t>(size > 0 ? size : 1);
  return std::max<size_t>(size_t{8} << 10, std::min<size_t>(size_t{256} << 10, by_size)) + 256;
}

GlooFusedExchange::GlooFusedExchange(const GlooMesh* mesh, bool sync_pair)
    : mesh_(mesh),
      ctx_(mesh->context()),
      capacity_(CapacityFor(ctx_->size)),
      stride_(kHeader + capacity_ + kTrailer),
      sync_pair_(sync_pair) {}

GlooFusedExchange::~GlooFusedExchange() = default;

void GlooFusedExchange::Bind() {
  const int n = ctx_->size, me = ctx_->rank;
  buffer_.assign(2 * static_cast<size_t>(n) * stride_, 0);
  const int left = (me + n - 1) % n, right = (me + 1) % n;
  // Two ranks: a synchronous pair. This thread writes and reads the socket itself (blocking,
  // with the pair's timeout as SO_SNDTIMEO / SO_RCVTIMEO) instead of Gloo's loop thread
  // reading and waking it through a condition variable: one wake-up per message instead of
  // two (8 B: 33 -> 8 us median; docs/benchmarks.md). Nothing else runs on these connections
  // (GlooCommContext's second mesh). Not on a ring of three or more: a blocking write to a
  // right neighbour that has gone silent would hold this rank's read from its left for up
  // to another timeout, so the ranks would time out one after another instead of together
  // and the roll call (gloo_roll_call.cc) could no longer tell the silent ranks apart.
  sync_ = n == 2 && sync_pair_;
  auto& pair = ctx_->getPair(right);
  if (sync_) pair->setSync(true, /*busyPoll=*/false);
  send_fd_ = sync_pair_ ? mesh_->SocketTo(right) : -1;
  send_ = pair->createSendBuffer(kExchangeSlot, buffer_.data(), buffer_.size());
  recv_ = ctx_->getPair(left)->createRecvBuffer(kExchangeSlot,
                                                buffer_.data(), buffer_.size());
  RaiseSendBuffer();
}

// Gloo sets a pair's send buffer to the size of the largest message sent on it so far (the
// kernel allots twice that). For a small exchange that is two messages' worth, and with the
// truesize overhead the next call's message no longer fits while the last one is unacked;
// the receiver, in the ping-pong pattern, delays that ACK by up to 40 ms, the delayed-ACK
// timer: a 16 KiB all-reduce took 9 us at the median and tens of ms now and then (means of
// 230 us). A buffer of kSendBuffer never fills that way. Gloo only touches it again for a
// message larger than any before, so it is restored after each of those (few) sends (Run),
// and before the first. Best effort: it is speed only (the kernel caps it at wmem_max).
void GlooFusedExchange::ApplyTimeout() {
  const int64_t ms = timeout_ms_.load(std::memory_order_relaxed);
  if (ms == applied_timeout_ms_ || SyncSocket() < 0) return;
  applied_timeout_ms_ = ms;
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  setsockopt(SyncSocket(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(SyncSocket(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

void GlooFusedExchange::RaiseSendBuffer() const {
  constexpr int kSendBuffer = 1 << 20;
  if (send_fd_ < 0) return;
  int want = kSendBuffer;
  setsockopt(send_fd_, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want));
}

// With two ranks this thread reads the synchronous pair's socket itself: it polls it under
// the CPU transports' spin rule (spin_policy.h) before it blocks in Gloo's read.
void GlooFusedExchange::AwaitReadable() {
  const int fd = SyncSocket();
  if (fd < 0) return;
  spin_.Spin([fd] {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 0) != 0;  // readable (or an error: Gloo's read reports it)
  });
}

const char* GlooFusedExchange::Run(const void* mine, size_t bytes,
                                   std::vector<size_t>* lengths) {
  const int n = ctx_->size, me = ctx_->rank;
  if (!send_) Bind();
  ApplyTimeout();
  char* region = buffer_.data() + static_cast<size_t>(region_) * n * stride_;
  region_ = 1 - region_;
  const uint64_t call = ++calls_;
  auto block = [&](int r) { return region + static_cast<size_t>(r) * stride_; };
  auto field = [](const char* at) {
    uint64_t v = 0;
    std::memcpy(&v, at, sizeof(v));
    return v;
  };
  // Whether block r of this call arrived whole (see the top of the file).
  auto whole = [&](int r) {
    const char* b = block(r);
    const uint64_t len = field(b);
    return field(b + sizeof(uint64_t)) == call && len <= capacity_ &&
           field(b + kHeader + len) == call;
  };
  const uint64_t len = bytes;
  std::memcpy(block(me), &len, sizeof(len));
  std::memcpy(block(me) + sizeof(len), &call, sizeof(call));
  if (bytes > 0) std::memcpy(block(me) + kHeader, mine, bytes);
  std::memcpy(block(me) + kHeader + bytes, &call, sizeof(call));
  const size_t region_offset = static_cast<size_t>(region - buffer_.data());
  int carried = me;  // the block sent this round
  for (int round = 0; round < n - 1; ++round) {
    const size_t offset = region_offset + static_cast<size_t>(carried) * stride_;
    const uint64_t carried_len = field(block(carried));
    PADDLE_ENFORCE(carried_len <= capacity_,
                   errors::External("fused exchange: rank %d's block says %llu bytes, more than "
                                    "the capacity of %zu (a corrupted message)",
                                    carried, static_cast<unsigned long long>(carried_len),
                                    capacity_));
    const size_t message = kHeader + carried_len + kTrailer;
    send_->send(offset, message, offset);
    if (message > largest_send_) {  // Gloo may have just set the send buffer to this size
      largest_send_ = message;
      RaiseSendBuffer();
    }
    if (sync_) send_->waitSend();  // written already; a synchronous pair counts one at a time
    carried = (carried + n - 1) % n;  // the left neighbour's block, arriving now
    AwaitReadable();
    try {
      recv_->waitRecv();
    } catch (...) {
      if (!whole(carried)) throw;
    }
    if (sync_) spin_.Ended();
  }
  if (!sync_) {
    for (int round = 0; round < n - 1; ++round) send_->waitSend();
  }
  lengths->resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) (*lengths)[static_cast<size_t>(r)] = field(block(r));
  return region + kHeader;
}

}  // namespace distributed
}  // namespace phi
