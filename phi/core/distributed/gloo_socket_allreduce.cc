// GlooFusedExchange::SocketAllReduce: the two-rank all-reduce above the exchange's capacity,
// streamed over the synchronous pair's socket by this thread.
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
// The socket is this thread's alone: a synchronous Gloo pair is no longer watched by Gloo's
// loop thread, and nothing else sends on the exchange connections while the comm stream's
// thread runs here. Each call reads exactly what the peer's call writes, so the byte stream
// stays in step with the exchange's own messages before and after.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include <gloo/common/error.h>

#include "phi/core/distributed/gloo_comm_context_internal.h"
#include "phi/core/errors.h"

namespace phi {
namespace distributed {
namespace {
// The granule of reduction: small enough that the peer gets results early, large enough
// that a segment costs few system calls.
constexpr size_t kSegment = size_t{64} << 10;
// The most one send call takes. Sends of up to 32 KiB let the loop turn to its receives in
// between and keep both ranks' streams flowing; with 64 KiB and more, runs fell into a mode
// twice as slow as often as not (1 MiB: 250 against 480 us median).
constexpr size_t kMaxSend = size_t{32} << 10;
constexpr uint64_t kMagic = 0x5041444450415252ull;  // "PADDPARR"

struct Header {
  uint64_t magic;  // kMagic ^ the call's number: a stream out of step fails here
  uint64_t bytes;  // the tensor's size: the ranks must agree
};

[[noreturn]] void NetworkFailure(const std::string& what) { throw ::gloo::IoException(what); }

}  // namespace

void GlooFusedExchange::SocketAllReduce(const void* in, void* out, int64_t count,
                                        DataType dtype, CpuReduceFn reduce, bool average,
                                        std::chrono::milliseconds timeout) {
  if (!send_) Bind();
  ApplyTimeout();
  // Both ranks must take this path: no quiet fallback when the socket is unknown.
  PADDLE_ENFORCE(SyncSocket() >= 0 && count > 0,
                 errors::External("the two-rank all-reduce: %s",
                                  sync_ ? "the exchange connection's socket is unknown"
                                        : "the group has more than two ranks"));
  const int fd = SyncSocket(), me = ctx_->rank, peer = 1 - me;
  const size_t esize = SizeOf(dtype);
  const size_t split = static_cast<size_t>(count / 2) * esize;  // rank 1's half starts here
  const size_t total = static_cast<size_t>(count) * esize;
  const size_t my_off = me == 0 ? 0 : split, my_len = me == 0 ? split : total - split;
  const size_t peer_off = peer == 0 ? 0 : split, peer_len = total - my_len;
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  if (segment_.size() < kSegment) segment_.resize(kSegment);
  const uint64_t call = ++socket_calls_;
  const Header mine{kMagic ^ call, total};
  Header theirs{0, 0};
  constexpr size_t kH = sizeof(Header);
  const size_t send_total = kH + peer_len + my_len, recv_total = kH + my_len + peer_len;
  size_t sent = 0, received = 0, reduced = 0;  // reduced: bytes of my half done

  // What the send stream has ready at `sent`: the header, the peer's half of the input,
  // then the reduced prefix of my half.
  auto ready_to_send = [&](const char** from) -> size_t {
    if (sent < kH) {
      *from = reinterpret_cast<const char*>(&mine) + sent;
      return kH - sent;
    }
    const size_t k = sent - kH;
    if (k < peer_len) {
      *from = src + peer_off + k;
      return peer_len - k;
    }
    *from = dst + my_off + (k - peer_len);
    return reduced - (k - peer_len);
  };
  // Where the receive stream's next bytes go: the header, the segment buffer (my half, up
  // to the segment's end), then the peer's half of the output.
  auto room_to_receive = [&](char** to) -> size_t {
    if (received < kH) {
      *to = reinterpret_cast<char*>(&theirs) + received;
      return kH - received;
    }
    const size_t k = received - kH;
    if (k < my_len) {
      const size_t seg_start = k - k % kSegment;
      *to = segment_.data() + (k - seg_start);
      return std::min(seg_start + kSegment, my_len) - k;
    }
    *to = dst + peer_off + (k - my_len);
    return peer_len - (k - my_len);
  };
  auto check_header = [&] {
    if (theirs.magic != mine.magic) {
      NetworkFailure("the two-rank all-reduce's stream from rank " + std::to_string(peer) +
                     " is out of step (call " + std::to_string(call) +
                     "): a corrupted or foreign message");
    }
    PADDLE_ENFORCE(theirs.bytes == total,
                   errors::InvalidArgument("all-reduce: rank %d sends %llu bytes, rank %d "
                                           "%llu (the agreement check is off?)",
                                           peer, static_cast<unsigned long long>(theirs.bytes),
                                           me, static_cast<unsigned long long>(total)));
  };
  // A whole segment of my half arrived: reduce it in rank order into the output.
  auto reduce_segment = [&](size_t upto) {
    const size_t bytes = upto - reduced;
    const char* own = src + my_off + reduced;
    char* result = dst + my_off + reduced;
    const size_t n = bytes / esize;
    if (me == 0) {
      reduce(result, own, segment_.data(), n);
    } else {
      reduce(result, segment_.data(), own, n);
    }
    if (average) CpuDivide(dtype, result, static_cast<int64_t>(n), 2);
    reduced = upto;
  };
  // "sent S of T bytes, received R of T": where the stream stood, for the errors.
  auto where = [&] {
    return "sent " + std::to_string(sent) + " of " + std::to_string(send_total) +
           " bytes, received " + std::to_string(received) + " of " +
           std::to_string(recv_total);
  };
  auto failed = [&](const char* what, int err) {
    NetworkFailure(std::string("the two-rank all-reduce's ") + what + " with rank " +
                   std::to_string(peer) + " failed: " + std::strerror(err) + " (rank " +
                   std::to_string(peer) + " died or closed its connection; " + where() + ")");
  };

  // The CPU transports' spin rule (spin_policy.h), applied to a stream: spin for the peer's
  // arrival only while armed; once its bytes flow the gaps are short and spinning pays, until
  // a gap outlasts the bound. The next wait is armed only if every gap in this call was
  // shorter than the bound.
  const auto spin = SpinPolicy::Bound();
  const bool spin_for_arrival = spin_.armed();
  bool arrival_late = false, stream_late = false;
  auto idle_since = std::chrono::steady_clock::now();
  auto heard = idle_since;  // when the peer's bytes last arrived
  bool idle = false;
  while (sent < send_total || received < recv_total) {
    const bool awaiting_arrival = received == 0;  // the peer's first bytes are yet to come
    bool progress = false;
    const char* from = nullptr;
    const size_t can_send = std::min(kMaxSend, sent < send_total ? ready_to_send(&from) : 0);
    if (can_send > 0) {
      const ssize_t w = ::send(fd, from, can_send, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w > 0) {
        sent += static_cast<size_t>(w);
        progress = true;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        failed("send", errno);
      }
    }
    bool arrived = false;
    if (received < recv_total) {
      char* to = nullptr;
      const size_t room = room_to_receive(&to);
      const ssize_t r = ::recv(fd, to, room, MSG_DONTWAIT);
      if (r > 0) {
        const size_t before = received;
        received += static_cast<size_t>(r);
        progress = arrived = true;
        if (before < kH && received >= kH) check_header();
        const size_t k = received - kH;
        if (received > kH && k <= my_len && k > reduced && (k % kSegment == 0 || k == my_len)) {
          reduce_segment(k);
        }
      } else if (r == 0) {
        NetworkFailure("the two-rank all-reduce: rank " + std::to_string(peer) +
                       " closed the connection (" + where() + ")");
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        failed("receive", errno);
      }
    }
    // The timeout counts from the last bytes the peer sent, like a Gloo wait: a long op that
    // keeps moving does not time out, a peer silent for the timeout does. Not from this
    // rank's own sends: the kernel goes on taking a trickle of them for a stopped peer.
    const auto now = std::chrono::steady_clock::now();
    if (arrived) {
      heard = now;
    } else if (now - heard >= timeout) {
      NetworkFailure("Timed out in the two-rank all-reduce: rank " + std::to_string(peer) +
                     " sent nothing for " + std::to_string(timeout.count()) + " ms (" +
                     where() + ")");
    }
    if (progress) {
      if (idle && now - idle_since >= spin) {
        if (awaiting_arrival) {
          arrival_late = true;
        } else {
          stream_late = true;
        }
      }
      idle = false;
      continue;
    }
    // Nothing moved: spin (the peer is usually mid-write; a blocking wait costs a wake-up),
    // then wait in poll.
    if (!idle) {
      idle = true;
      idle_since = now;
    }
    const bool may_spin = awaiting_arrival ? spin_for_arrival : !stream_late;
    if (may_spin && now - idle_since < spin) continue;
    pollfd p{fd, 0, 0};
    if (received < recv_total) p.events |= POLLIN;
    if (sent < send_total && ready_to_send(&from) > 0) p.events |= POLLOUT;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(timeout -
                                                                             (now - heard));
    if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left.count()))) < 0 &&
        errno != EINTR) {
      failed("poll", errno);
    }
  }
  spin_.Set(!arrival_late && !stream_late);
}

}  // namespace distributed
}  // namespace phi
