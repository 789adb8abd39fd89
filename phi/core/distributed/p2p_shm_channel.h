// ShmChannel: the bytes of one point-to-point connection between two ranks of one host, in
// a shared-memory segment instead of the loopback socket (internal to the point-to-point
// transport, p2p_transport_internal.h).
//
// Two byte rings, one per direction, each written by one process and read by the other
// (single producer, single consumer: the reactor's work of each side). A byte stream like
// the socket's, so that the protocol above is unchanged: frames and payloads go in as they
// would go to the socket, and come out in order.
//
// The socket stays. It carries the dialer's hello (with the segment's name), and from then
// on only *doorbells*: one byte that wakes the other side's reactor thread from epoll_wait.
// A doorbell is needed only when the other side does not look at the ring on its own:
// - after a write, unless the reader's process is polling (a thread spinning on its ops, or
//   the reactor thread lingering off the sockets: the reader marks its rings then, and
//   looks at them once more after unmarking them, before it sleeps);
// - after a read that made room for a writer that found the ring full.
// The socket also says when the peer is gone (EOF, as before): the ring is read to its end
// first, so nothing written before the peer closed is lost.
//
// Lifetime: the dialer creates the segment (shm_segment.h) and maps it; the listener maps
// it when it reads the hello and unlinks the name at once. A dialer that lets go before then
// leaves the name (what it wrote must stay readable, as a socket's buffer would) and unlinks
// it when its process exits, if the listener never opened it; a crash leaves it to the next
// creation's sweep of dead creators' segments.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace phi {
namespace distributed {

class ShmChannel {
 public:
  // The name the hello carries is at most this long (with its terminating zero).
  static constexpr size_t kNameBytes = 64;
  // Bytes of each ring (a power of two): eager messages (up to 64 KiB) and frames.
  static constexpr size_t kRingBytes = size_t{1} << 18;

  // The dialer's side: a new segment; its name in `*name`. Null with `*error` set.
  static std::unique_ptr<ShmChannel> Create(std::string* name, std::string* error);
  // The listener's side: maps `name` and unlinks it. Null with `*error` set.
  static std::unique_ptr<ShmChannel> Open(const std::string& name, std::string* error);
  ~ShmChannel();
  ShmChannel(const ShmChannel&) = delete;
  ShmChannel& operator=(const ShmChannel&) = delete;

  // Writes what fits of `iov` (a prefix; 0 when the ring is full, after which the reader's
  // next read rings the doorbell). Returns the bytes written.
  size_t Write(const iovec* iov, int n);
  // Reads up to `len` bytes; 0 when there are none.
  size_t Read(void* buf, size_t len);
  bool Readable() const;
  // Whether a write would take at least one byte.
  bool Writable() const;
  // After a Write: whether the reader needs a doorbell (it is not polling).
  bool ReaderNeedsDoorbell() const;
  // After a Read: whether the writer waits for room (and so needs a doorbell); clears it.
  bool WriterNeedsDoorbell();
  // Marks this side as looking at its incoming ring on its own (no doorbell needed) or not.
  // After unmarking, the caller must look at the ring once more before it sleeps.
  void SetPolling(bool polling);

 private:
  struct Ring;
  ShmChannel() = default;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  Ring* in_ = nullptr;   // the peer writes, this side reads
  Ring* out_ = nullptr;  // this side writes, the peer reads
  char* in_data_ = nullptr;
  char* out_data_ = nullptr;
  std::string name_;     // the dialer's
  std::atomic<uint32_t>* opened_ = nullptr;  // set by the listener once it mapped the segment
};

}  // namespace distributed
}  // namespace phi
