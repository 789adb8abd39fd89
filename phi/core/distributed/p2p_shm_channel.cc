#include "phi/core/distributed/p2p_shm_channel.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "phi/core/distributed/shm_segment.h"

namespace phi {
namespace distributed {

// One direction. The writer owns `head` (bytes written so far) and `writer_waits`, the reader
// `tail` (bytes read so far) and `reader_polls`; each on its own cache line, so that the two
// sides do not write one line.
struct ShmChannel::Ring {
  alignas(64) std::atomic<uint64_t> head;
  alignas(64) std::atomic<uint32_t> writer_waits;
  alignas(64) std::atomic<uint64_t> tail;
  alignas(64) std::atomic<uint32_t> reader_polls;
};

namespace {
constexpr uint64_t kMagic = 0x706c703270636831;  // "plp2pch1"
struct Header {
  uint64_t magic;
  std::atomic<uint32_t> opened;  // the listener mapped the segment
};
constexpr size_t kHeaderBytes = 64;
constexpr size_t kRingHeadBytes = 256;
static_assert(sizeof(Header) <= kHeaderBytes, "the header fits");

size_t SegmentBytes() {
  return kHeaderBytes + 2 * kRingHeadBytes + 2 * ShmChannel::kRingBytes;
}
}  // namespace

std::unique_ptr<ShmChannel> ShmChannel::Create(std::string* name, std::string* error) {
  static_assert(sizeof(Ring) <= kRingHeadBytes, "a ring's head fits");
  static_assert((kRingBytes & (kRingBytes - 1)) == 0, "a power of two");
  RemoveStaleShmSegments();
  *name = NewShmSegmentName();
  if (name->size() + 1 > kNameBytes) {
    *error = "the segment's name is too long";
    return nullptr;
  }
  const int fd = CreateShmSegment(*name, SegmentBytes(), error);
  if (fd < 0) return nullptr;
  void* base = MapShmSegment(fd, SegmentBytes(), error);
  close(fd);
  if (base == nullptr) {
    shm_unlink(name->c_str());
    return nullptr;
  }
  std::unique_ptr<ShmChannel> ch(new ShmChannel());
  ch->base_ = base;
  ch->bytes_ = SegmentBytes();
  char* b = static_cast<char*>(base);
  auto* header = new (b) Header{kMagic, {0}};
  ch->opened_ = &header->opened;
  // Ring A: dialer -> listener; ring B: listener -> dialer.
  Ring* a = new (b + kHeaderBytes) Ring{{0}, {0}, {0}, {0}};
  Ring* r_b = new (b + kHeaderBytes + kRingHeadBytes) Ring{{0}, {0}, {0}, {0}};
  ch->out_ = a;
  ch->in_ = r_b;
  ch->out_data_ = b + kHeaderBytes + 2 * kRingHeadBytes;
  ch->in_data_ = ch->out_data_ + kRingBytes;
  ch->name_ = *name;
  return ch;
}

std::unique_ptr<ShmChannel> ShmChannel::Open(const std::string& name, std::string* error) {
  // The name comes from the wire: only a segment of ours, of the size a channel has (a
  // shorter file would raise SIGBUS where the mapping runs past its end).
  if (!IsShmSegmentName(name)) {
    *error = "'" + name + "' is not the name of a runtime's segment";
    return nullptr;
  }
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    *error = "opening " + name + ": " + std::strerror(errno);
    return nullptr;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != SegmentBytes()) {
    *error = name + " has the wrong size for a point-to-point channel";
    close(fd);
    return nullptr;
  }
  void* base = MapShmSegment(fd, SegmentBytes(), error);
  close(fd);
  shm_unlink(name.c_str());  // mapped on both sides: nothing is left behind from here on
  if (base == nullptr) return nullptr;
  char* b = static_cast<char*>(base);
  auto* header = reinterpret_cast<Header*>(b);
  if (header->magic != kMagic) {
    munmap(base, SegmentBytes());
    *error = name + " is not a point-to-point channel";
    return nullptr;
  }
  std::unique_ptr<ShmChannel> ch(new ShmChannel());
  ch->base_ = base;
  ch->bytes_ = SegmentBytes();
  ch->in_ = reinterpret_cast<Ring*>(b + kHeaderBytes);
  ch->out_ = reinterpret_cast<Ring*>(b + kHeaderBytes + kRingHeadBytes);
  ch->in_data_ = b + kHeaderBytes + 2 * kRingHeadBytes;
  ch->out_data_ = ch->in_data_ + kRingBytes;
  header->opened.store(1, std::memory_order_release);
  return ch;
}

namespace {
// How long an exiting dialer waits for its listeners to open the channels that still hold
// bytes they have not read: a listener that is alive opens one within milliseconds (its
// reactor reads the hello), and the bytes of a completed send must not be lost because their
// sender exited first (a socket's buffer outlives its writer too).
constexpr std::chrono::milliseconds kExitGrace{2000};

// Segments this process created that their listeners have not opened yet when the dialer let
// go of them: what the dialer wrote must stay readable (a send completes once written, as
// with a socket's buffer), so the name stays until the listener opens it (and unlinks it),
// or until this process exits, which first gives the listeners kExitGrace to open those
// with unread bytes. Each stays mapped until then, to see whether it was opened.
class UnopenedNames {
 public:
  static UnopenedNames& Get() {
    static UnopenedNames* names = new UnopenedNames();  // never destroyed: used at exit
    return *names;
  }
  // `head` and `tail`: the dialer's ring's (what it wrote, what the listener read).
  void Add(std::string name, void* base, size_t bytes, const std::atomic<uint64_t>* head,
           const std::atomic<uint64_t>* tail) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!registered_) {
      std::atexit([] { Get().UnlinkAll(); });
      registered_ = true;
    }
    // Those opened since were unlinked by their listeners: only the mapping is left.
    EraseIf([](const Entry& e) { return e.pid == getpid() && Opened(e); });
    entries_.push_back(Entry{getpid(), std::move(name), base, bytes, head, tail});
  }
  void UnlinkAll() {
    std::lock_guard<std::mutex> lk(mu_);
    const auto deadline = std::chrono::steady_clock::now() + kExitGrace;
    for (const Entry& e : entries_) {
      // Only this process's: a forked child inherits its parent's list.
      if (e.pid != getpid()) continue;
      while (!Opened(e) && Unread(e) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      shm_unlink(e.name.c_str());  // ENOENT: opened, and unlinked by the listener
    }
    entries_.clear();
  }

 private:
  struct Entry {
    pid_t pid;
    std::string name;
    void* base;
    size_t bytes;
    const std::atomic<uint64_t>* head;
    const std::atomic<uint64_t>* tail;
  };
  static const Header* HeaderOf(const Entry& e) { return static_cast<const Header*>(e.base); }
  static bool Opened(const Entry& e) {
    return HeaderOf(e)->opened.load(std::memory_order_acquire) != 0;
  }
  // The dialer's ring holds bytes the listener has not read.
  static bool Unread(const Entry& e) {
    return e.head->load(std::memory_order_acquire) != e.tail->load(std::memory_order_acquire);
  }
  template <typename Pred>
  void EraseIf(Pred pred) {
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (pred(*it)) {
        munmap(it->base, it->bytes);
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
  }

  std::mutex mu_;
  bool registered_ = false;
  std::vector<Entry> entries_;
};
}  // namespace

ShmChannel::~ShmChannel() {
  if (!name_.empty() && opened_->load(std::memory_order_acquire) == 0) {
    // It keeps the mapping, to see at exit whether the listener opened the segment.
    UnopenedNames::Get().Add(std::move(name_), base_, bytes_, &out_->head, &out_->tail);
    return;
  }
  if (base_ != nullptr) munmap(base_, bytes_);
}

size_t ShmChannel::Write(const iovec* iov, int n) {
  const uint64_t head = out_->head.load(std::memory_order_relaxed);
  auto room = [&] { return kRingBytes - (head - out_->tail.load(std::memory_order_acquire)); };
  size_t free = room();
  if (free == 0) {
    // Ask the reader for a doorbell when it makes room, then look again: either it sees the
    // request or this sees its room (the fences pair with WriterNeedsDoorbell's).
    out_->writer_waits.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    free = room();
    if (free == 0) return 0;
  }
  size_t written = 0;
  for (int i = 0; i < n && free > 0; ++i) {
    const char* src = static_cast<const char*>(iov[i].iov_base);
    size_t left = std::min(iov[i].iov_len, free);
    while (left > 0) {
      const size_t at = (head + written) & (kRingBytes - 1);
      const size_t chunk = std::min(left, kRingBytes - at);
      std::memcpy(out_data_ + at, src, chunk);
      src += chunk;
      left -= chunk;
      written += chunk;
      free -= chunk;
    }
  }
  out_->head.store(head + written, std::memory_order_release);
  return written;
}

size_t ShmChannel::Read(void* buf, size_t len) {
  const uint64_t tail = in_->tail.load(std::memory_order_relaxed);
  const size_t avail = in_->head.load(std::memory_order_acquire) - tail;
  const size_t take = std::min(avail, len);
  size_t done = 0;
  while (done < take) {
    const size_t at = (tail + done) & (kRingBytes - 1);
    const size_t chunk = std::min(take - done, kRingBytes - at);
    std::memcpy(static_cast<char*>(buf) + done, in_data_ + at, chunk);
    done += chunk;
  }
  if (take > 0) in_->tail.store(tail + take, std::memory_order_release);
  return take;
}

bool ShmChannel::Readable() const {
  return in_->head.load(std::memory_order_acquire) != in_->tail.load(std::memory_order_relaxed);
}

bool ShmChannel::Writable() const {
  return out_->head.load(std::memory_order_relaxed) -
             out_->tail.load(std::memory_order_acquire) < kRingBytes;
}

bool ShmChannel::ReaderNeedsDoorbell() const {
  // Pairs with the reader's fence after it unmarks itself (SetPolling): either it looks at
  // the ring after this write, or this sees that it stopped polling.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return out_->reader_polls.load(std::memory_order_relaxed) == 0;
}

bool ShmChannel::WriterNeedsDoorbell() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (in_->writer_waits.load(std::memory_order_relaxed) == 0) return false;
  return in_->writer_waits.exchange(0, std::memory_order_relaxed) != 0;
}

void ShmChannel::SetPolling(bool polling) {
  in_->reader_polls.store(polling ? 1 : 0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace distributed
}  // namespace phi
