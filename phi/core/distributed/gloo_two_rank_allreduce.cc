// GlooFusedExchange::TwoRankAllReduce: the two-rank all-reduce above the exchange's capacity,
// streamed over the exchange's peer connection (peer_connection_internal.h).
//
// Why not Gloo's algorithms, or the exchange chunk by chunk: on one host a byte moved over
// loopback costs CPU on both sides (the sender's write copies it into the kernel, the
// receiver's read copies it out), so with two ranks on two cores the time is the CPU work
// per rank. Gathering both operands and reducing everything on both ranks (the chunked
// exchange) copies each chunk into the bound buffer first and reduces the whole tensor on
// each rank; Gloo's ring reduces half, but wakes its loop thread per message. Here each rank
// reduces its own half and nothing is copied that the socket does not need:
//
//   to the peer:   [header][the peer's half of my input][my half of the result, as reduced]
//   from the peer: [header][its copy of my half, 64 KiB at a time][its half of the result]
//
// Both streams run at once on the one socket in non-blocking calls, so neither rank waits
// for the other to read (no deadlock whatever the kernel buffers hold), and each segment of
// my half is reduced as it arrives and sent back on the next turn: the transfer of one half
// overlaps the reduction of the other. The peer's result lands in the output directly.
//
// In place is safe: the peer's result for a byte of its half exists only after this rank's
// input byte there was sent (send copies it into the kernel), so the receive that overwrites
// it comes later. Every rank's result is reduced by one rank in rank order (rank 0's operand
// first), so both ranks hold the same bits, as on every other path.
//
// The connection is the comm stream's thread's alone. Each call reads exactly what the peer's
// call writes, so the byte stream stays in step with the exchange's own messages before and
// after; the header's call number catches a stream out of step.
#include <algorithm>
#include <cstring>
#include <string>

#include "phi/core/distributed/gloo_comm_context_internal.h"
#include "phi/core/errors.h"

namespace phi {
namespace distributed {
namespace {
// The granule of reduction: small enough that the peer gets results early, large enough
// that a segment costs few system calls.
constexpr size_t kSegment = size_t{64} << 10;
// The most one send call takes. Sends of up to 32 KiB let the duplex loop turn to its
// receives in between and keep both ranks' streams flowing; with 64 KiB and more, the
// all-reduce fell into a mode twice as slow as often as not.
constexpr size_t kMaxSend = size_t{32} << 10;
constexpr uint64_t kMagic = 0x5041444450415252ull;  // "PADDPARR"

struct Header {
  uint64_t magic;  // kMagic ^ the call's number: a stream out of step fails here
  uint64_t bytes;  // the tensor's size: the ranks must agree
};
constexpr size_t kH = sizeof(Header);

//   to the peer:   [header][the peer's half of my input][my half of the result, as reduced]
//   from the peer: [header][its copy of my half, a segment at a time][its half of the result]
class AllReduceStreams : public DuplexStreams {
 public:
  AllReduceStreams(int me, const void* in, void* out, int64_t count, DataType dtype,
                   CpuReduceFn reduce, bool average, uint64_t call, std::vector<char>* segment)
      : me_(me), peer_(1 - me), src_(static_cast<const char*>(in)),
        dst_(static_cast<char*>(out)), dtype_(dtype), esize_(SizeOf(dtype)), reduce_(reduce),
        average_(average), segment_(segment) {
    total_ = static_cast<size_t>(count) * esize_;
    const size_t split = static_cast<size_t>(count / 2) * esize_;  // rank 1's half starts here
    my_off_ = me == 0 ? 0 : split;
    my_len_ = me == 0 ? split : total_ - split;
    peer_off_ = me == 0 ? split : 0;
    peer_len_ = total_ - my_len_;
    mine_ = Header{kMagic ^ call, total_};
  }
  size_t SendTotal() const override { return kH + peer_len_ + my_len_; }
  size_t RecvTotal() const override { return kH + my_len_ + peer_len_; }
  // The header, the peer's half of the input, then the reduced prefix of my half.
  size_t ReadyToSend(size_t sent, const char** from) override {
    if (sent < kH) {
      *from = reinterpret_cast<const char*>(&mine_) + sent;
      return kH - sent;
    }
    const size_t k = sent - kH;
    if (k < peer_len_) {
      *from = src_ + peer_off_ + k;
      return std::min(kMaxSend, peer_len_ - k);
    }
    *from = dst_ + my_off_ + (k - peer_len_);
    return std::min(kMaxSend, reduced_ - (k - peer_len_));
  }
  // The header, the segment buffer (my half, up to the segment's end), then the peer's half
  // of the output.
  size_t RoomToReceive(size_t received, char** to) override {
    if (received < kH) {
      *to = reinterpret_cast<char*>(&theirs_) + received;
      return kH - received;
    }
    const size_t k = received - kH;
    if (k < my_len_) {
      const size_t seg_start = k - k % kSegment;
      *to = segment_->data() + (k - seg_start);
      return std::min(seg_start + kSegment, my_len_) - k;
    }
    *to = dst_ + peer_off_ + (k - my_len_);
    return peer_len_ - (k - my_len_);
  }
  void Received(size_t before, size_t after) override {
    if (before < kH && after >= kH) CheckHeader();
    if (after <= kH) return;
    const size_t k = after - kH;
    if (k <= my_len_ && k > reduced_ && (k % kSegment == 0 || k == my_len_)) ReduceSegment(k);
  }

 private:
  void CheckHeader() const {
    PADDLE_ENFORCE(theirs_.magic == mine_.magic,
                   errors::Unavailable("the two-rank all-reduce's stream from rank %d is out "
                                       "of step: a corrupted or foreign message",
                                       peer_));
    PADDLE_ENFORCE(theirs_.bytes == total_,
                   errors::InvalidArgument("all-reduce: rank %d sends %llu bytes, rank %d "
                                           "%llu (the agreement check is off?)",
                                           peer_, static_cast<unsigned long long>(theirs_.bytes),
                                           me_, static_cast<unsigned long long>(total_)));
  }
  // A whole segment of my half arrived: reduce it in rank order into the output.
  void ReduceSegment(size_t upto) {
    const size_t n = (upto - reduced_) / esize_;
    const char* own = src_ + my_off_ + reduced_;
    char* result = dst_ + my_off_ + reduced_;
    if (me_ == 0) {
      reduce_(result, own, segment_->data(), n);
    } else {
      reduce_(result, segment_->data(), own, n);
    }
    if (average_) CpuDivide(dtype_, result, static_cast<int64_t>(n), 2);
    reduced_ = upto;
  }

  const int me_, peer_;
  const char* src_;
  char* dst_;
  const DataType dtype_;
  const size_t esize_;
  const CpuReduceFn reduce_;
  const bool average_;
  std::vector<char>* segment_;
  size_t total_, my_off_, my_len_, peer_off_, peer_len_;
  size_t reduced_ = 0;  // bytes of my half reduced so far
  Header mine_{}, theirs_{};
};
}  // namespace

void GlooFusedExchange::TwoRankAllReduce(const void* in, void* out, int64_t count,
                                         DataType dtype, CpuReduceFn reduce, bool average) {
  PADDLE_ENFORCE(peer_ != nullptr && count > 0,
                 errors::External("the two-rank all-reduce needs two ranks and elements"));
  if (segment_.size() < kSegment) segment_.resize(kSegment);
  AllReduceStreams streams(rank_, in, out, count, dtype, reduce, average, ++two_rank_calls_,
                           &segment_);
  peer_->Duplex("the two-rank all-reduce", &streams, timeout_.load(), &spin_);
}

}  // namespace distributed
}  // namespace phi
