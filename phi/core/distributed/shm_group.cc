// ShmGroup's segment (creation, mapping, unlinking) and its step protocol (shm_group.h
// explains both). The collectives are in shm_collectives.cc.
#include "phi/core/distributed/shm_group.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <glog/logging.h>

#include "phi/core/errors.h"
#include "phi/core/flags.h"
#include "phi/core/distributed/rank_list.h"
#include "phi/core/distributed/shm_segment.h"

namespace phi {
namespace distributed {

// ------------------------------------------------------------------ the segment's layout
constexpr uint64_t kMagic = 0x706c73686d763032;  // "plshmv02"
constexpr size_t kPage = 4096;
constexpr size_t kLine = 64;
// How often a rank blocked on a step checks that the ranks it waits for are alive: a rank
// killed mid-op is named within about this long.
constexpr std::chrono::milliseconds kLivenessSlice{10};

enum FailKind : int32_t { kNone = 0, kTimedOut = 1, kGone = 2 };

struct ShmGroup::Header {
  uint64_t magic;
  uint64_t size;
  uint64_t slot_bytes;
  // 0: usable; 1: a failure is being posted; 2: posted (kind, rank and cause are set).
  std::atomic<uint32_t> failed;
  int32_t fail_kind;
  int32_t fail_rank;
  char cause[2048];
};
static_assert(sizeof(ShmGroup::Header) <= kPage, "the header fits its page");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words are plain words");

struct alignas(kLine) ShmGroup::Control {
  std::atomic<uint32_t> step;     // the last step this rank announced
  std::atomic<uint32_t> waiters;  // ranks blocked in a futex wait on `step`
  int32_t pid;
};
static_assert(sizeof(ShmGroup::Control) == kLine, "one cache line per rank");
static_assert(sizeof(ShmGroup::Cell) == kLine, "a cell is one cache line");

namespace {
size_t RoundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

size_t ControlOffset() { return kPage; }
size_t CellOffset(int n) { return ControlOffset() + RoundUp(n * kLine, kPage); }
// Per rank and set: the cell's line, then a word per peer (lengths) and one for "more to
// come". Two lines at least: the adjacent-line prefetcher fetches lines in aligned pairs, and
// a pair shared by two ranks' cells would bounce between their cores.
size_t CellStride(int n) {
  return RoundUp(kLine + (static_cast<size_t>(n) + 1) * sizeof(uint64_t), 2 * kLine);
}
size_t SlotOffset(int n) { return CellOffset(n) + RoundUp(2 * n * CellStride(n), kPage); }

// 1 MiB per rank and set up to 8 ranks, less beyond (the segment stays <= 16 MiB), never
// below `min_bytes`. FLAGS_cpu_shm_slot_kb overrides it (flags.h).
size_t SlotBytesFor(int n, size_t min_bytes) {
  // Why 1 MiB: an all-reduce whose data stay in cache runs in as few pieces (steps) as the
  // slots allow; one that streams from memory uses smaller pieces of them (ReducePieceBytes,
  // docs/benchmarks.md, "Reduction kernels and slot size"), and the copy-only collectives
  // always do (CopyPieceBytes).
  size_t s = std::min<size_t>(size_t{1} << 20, (size_t{8} << 20) / static_cast<size_t>(n));
  if (FLAGS_cpu_shm_slot_kb > 0) s = static_cast<size_t>(FLAGS_cpu_shm_slot_kb) << 10;
  return RoundUp(std::max(s, min_bytes), kPage);
}

long Futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

std::string ReadFirstLine(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

std::string NamespaceOf(const char* kind) {
  char buf[128] = {0};
  std::string path = std::string("/proc/self/ns/") + kind;
  ssize_t n = readlink(path.c_str(), buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
}

// Waits for `keys` within `timeout`; on a timeout raises naming the ranks whose key is missing.
void WaitRankKeys(Store* store, const std::vector<std::string>& keys,
                  std::chrono::milliseconds timeout, const std::string& describe,
                  const char* what) {
  try {
    store->wait(keys, timeout);
  } catch (const TimeoutError&) {
    std::vector<int> missing_ranks;
    for (size_t r = 0; r < keys.size(); ++r) {
      if (!store->check({keys[r]})) missing_ranks.push_back(static_cast<int>(r));
    }
    const std::string missing = JoinRanks(missing_ranks);
    PADDLE_THROW(errors::Timeout("%s: rank(s) %s did not %s within the group's timeout of %lld ms "
                                 "(they died, hang, or run other ops).",
                                 describe.c_str(), missing.c_str(), what,
                                 static_cast<long long>(timeout.count())));
  }
}

std::vector<std::string> RankKeys(const char* prefix, int size) {
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(prefix + std::to_string(r));
  return keys;
}
}  // namespace

// ------------------------------------------------------------------ identity and creation
std::string ShmHostIdentity() {
  return ReadFirstLine("/proc/sys/kernel/random/boot_id") + " " + NamespaceOf("net") + " " +
         NamespaceOf("mnt") + " " + NamespaceOf("pid");
}

std::string ShmGroup::HostKey(int rank) { return "shm/host/" + std::to_string(rank); }

std::string ShmGroup::HostValue() {
  return std::string(FLAGS_cpu_shm_transport ? "1" : "0") + " " + ShmHostIdentity();
}

bool ShmGroup::SharesMemory(const std::string& a, const std::string& b) {
  return a == b && a.rfind("1 ", 0) == 0;  // "<flag> <identity>"
}

ShmGroup::ShmGroup(int rank, int size, std::chrono::milliseconds timeout, std::string describe)
    : rank_(rank), size_(size), timeout_(timeout), describe_(std::move(describe)) {}

ShmGroup::~ShmGroup() {
  if (base_ != nullptr) munmap(base_, mapped_);
}

size_t ShmGroup::LayoutBytes() const {
  return SlotOffset(size_) + 2 * static_cast<size_t>(size_) * slot_bytes_;
}

void ShmGroup::Map(int fd, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  PADDLE_ENFORCE(p != MAP_FAILED, errors::External("mmap of %zu bytes: %s", bytes,
                                                   std::strerror(errno)));
  base_ = static_cast<char*>(p);
  mapped_ = bytes;
  header_ = reinterpret_cast<Header*>(base_);
  cell_stride_ = CellStride(size_);
  cells_ = base_ + CellOffset(size_);
  slots_ = base_ + SlotOffset(size_);
}

std::unique_ptr<ShmGroup> ShmGroup::Create(const std::shared_ptr<Store>& store, int rank,
                                           int size, size_t min_slot_bytes,
                                           std::chrono::milliseconds timeout,
                                           const std::string& describe) {
  if (size < 2) return nullptr;
  // 1. Is every rank on this host, with the transport on?
  std::vector<std::string> host_keys;
  for (int r = 0; r < size; ++r) host_keys.push_back(HostKey(r));
  WaitRankKeys(store.get(), host_keys, timeout, describe, "create this group");
  const auto hosts = store->multi_get(host_keys);
  const std::vector<uint8_t>& mine_bytes = hosts[static_cast<size_t>(rank)];
  const std::string mine(mine_bytes.begin(), mine_bytes.end());
  for (const auto& h : hosts) {
    if (!SharesMemory(std::string(h.begin(), h.end()), mine)) {
      VLOG(1) << describe << ": not every rank shares this host (or FLAGS_cpu_shm_transport is "
              << "off on one): collectives go over the network";
      return nullptr;
    }
  }
  // 2. Rank 0 creates the segment and writes its header before it publishes the name; every
  // other rank then maps it, checks the header, and says whether it could.
  std::unique_ptr<ShmGroup> g(new ShmGroup(rank, size, timeout, describe));
  std::string name, error;
  int fd = -1;
  auto map = [&](const char* doing) {
    struct stat st {};
    try {
      if (fstat(fd, &st) != 0) throw std::runtime_error(std::strerror(errno));
      g->Map(fd, static_cast<size_t>(st.st_size));
      if (rank == 0) {
        g->header_->magic = kMagic;
        g->header_->size = static_cast<uint64_t>(size);
        g->header_->slot_bytes = g->slot_bytes_;
      } else if (g->mapped_ < kPage || g->header_->magic != kMagic ||
                 g->header_->size != static_cast<uint64_t>(size)) {
        throw std::runtime_error("the segment is not this group's");
      } else {
        g->slot_bytes_ = g->header_->slot_bytes;
        if (g->LayoutBytes() != g->mapped_) throw std::runtime_error("the segment's size is wrong");
      }
      g->Controls()[rank].pid = getpid();
    } catch (const std::exception& e) {
      error = std::string(doing) + " " + name + ": " + e.what();
    }
  };
  if (rank == 0) {
    RemoveStaleShmSegments();
    name = NewShmSegmentName();
    g->slot_bytes_ = SlotBytesFor(size, min_slot_bytes);
    // A full /dev/shm (a container's 64 MiB) fails here, and the group stays on TCP.
    fd = CreateShmSegment(name, g->LayoutBytes(), &error);
    if (error.empty()) map("initialising");
    store->set("shm/name", error.empty() ? name : "");
  } else {
    WaitRankKeys(store.get(), {"shm/name"}, timeout, describe, "reach the group's first op");
    name = store->get_string("shm/name");
    if (name.empty()) {
      error = "rank 0 could not create the segment";
    } else if ((fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0)) < 0) {
      error = std::string("opening ") + name + ": " + std::strerror(errno);
    } else {
      map("mapping");
    }
  }
  if (fd >= 0) close(fd);
  store->set("shm/mapped/" + std::to_string(rank), error.empty() ? "1" : "0" + error);
  // 3. Once every rank has mapped it, the name goes: no exit leaves it behind from here on.
  struct Unlink {
    int rank;
    const std::string& name;
    ~Unlink() {
      if (rank == 0 && !name.empty()) shm_unlink(name.c_str());
    }
  } unlink{rank, name};
  const auto mapped_keys = RankKeys("shm/mapped/", size);
  WaitRankKeys(store.get(), mapped_keys, timeout, describe, "reach the group's first op");
  std::string failures;
  const auto mapped = store->multi_get(mapped_keys);
  for (int r = 0; r < size; ++r) {
    const auto& v = mapped[static_cast<size_t>(r)];
    if (v.empty() || v[0] != '1') {
      failures += " rank " + std::to_string(r) + ": " + std::string(v.begin() + 1, v.end()) + ";";
    }
  }
  if (!failures.empty()) {
    LOG(WARNING) << describe << ": shared memory unusable, collectives go over the network:"
                 << failures;
    return nullptr;
  }
  SpinPolicy::NoteRanksOnHost(size);
  VLOG(1) << describe << ": collectives over shared memory (" << g->slot_bytes_ / 1024
          << " KiB slots)";
  return g;
}

// ------------------------------------------------------------------ the step protocol
int ShmGroup::NextSet() {
  set_ = static_cast<int>(uses_++ & 1);
  return set_;
}

char* ShmGroup::Slot(int set, int rank) const {
  return slots_ + (static_cast<size_t>(set) * size_ + static_cast<size_t>(rank)) * slot_bytes_;
}

ShmGroup::Cell* ShmGroup::CellOf(int set, int rank) const {
  return reinterpret_cast<Cell*>(
      cells_ + (static_cast<size_t>(set) * size_ + static_cast<size_t>(rank)) * cell_stride_);
}

uint64_t* ShmGroup::Meta(int set, int rank) const {
  return reinterpret_cast<uint64_t*>(CellOf(set, rank) + 1);
}

ShmGroup::Control* ShmGroup::Controls() const {
  return reinterpret_cast<Control*>(base_ + ControlOffset());
}

namespace {
bool Reached(uint32_t announced, uint32_t step) {
  return static_cast<int32_t>(announced - step) >= 0;
}
}  // namespace

namespace {
// An op's signature: its kind (8 bits), root + 1 (16 bits) and size in bytes (40 bits).
constexpr const char* kOpKinds[] = {"allreduce", "reduce",  "broadcast", "allgather",
                                    "reducescatter", "gather", "scatter", "alltoall",
                                    "allgather (variable sizes)"};

static_assert(sizeof(kOpKinds) / sizeof(kOpKinds[0]) ==
                  static_cast<size_t>(ShmGroup::OpKind::kVariableAllGather) + 1,
              "a name per kind");

uint64_t Signature(ShmGroup::OpKind op, uint64_t bytes, int root) {
  const uint64_t kind = static_cast<uint64_t>(op) + 1;
  return kind << 56 | (static_cast<uint64_t>(root + 1) & 0xffff) << 40 |
         (bytes & ((uint64_t{1} << 40) - 1));
}

std::string DescribeSignature(uint64_t sig) {
  const uint64_t kind = sig >> 56, root = (sig >> 40) & 0xffff, bytes = sig & ((uint64_t{1} << 40) - 1);
  std::string s = kind >= 1 && kind <= sizeof(kOpKinds) / sizeof(kOpKinds[0]) ? kOpKinds[kind - 1]
                                                                               : "an unknown op";
  if (root != 0) s += " (root " + std::to_string(root - 1) + ")";
  return s + " of " + std::to_string(bytes) + " bytes";
}
}  // namespace

void ShmGroup::BeginOp(OpKind op, uint64_t bytes, int root) {
  what_ = kOpKinds[static_cast<size_t>(op)];
  signature_ = Signature(op, bytes, root);
  signature_pending_ = true;
  // The deadline is taken when the op first blocks (WaitFor): a small op that never blocks
  // reads no clock. It is then later than the op's start by the spins before, a few
  // milliseconds at most against a timeout of seconds.
  deadline_set_ = false;
  if (header_->failed.load(std::memory_order_acquire) != 0) RaisePosted();
}

void ShmGroup::Step() {
  Control& me = Controls()[rank_];
  Cell* cell = CellOf(set_, rank_);
  if (signature_pending_) cell->signature = signature_;
  ++step_;
  // The cell first: peers spin on it, and read its data with the announcement. The counter
  // after it serves the futex waits and the liveness checks.
  cell->seq.store(step_, std::memory_order_release);
  me.step.store(step_, std::memory_order_seq_cst);
  if (me.waiters.load(std::memory_order_seq_cst) != 0) Futex(&me.step, FUTEX_WAKE, INT_MAX, nullptr);
  for (int k = 1; k < size_; ++k) WaitFor((rank_ + k) % size_, step_);
  if (signature_pending_) {
    signature_pending_ = false;
    CheckSignatures();
  }
}

// Every rank reads the same words, so every rank raises, at the same step: the group stays in
// step (no rank went on to a second step) and the next op runs normally.
void ShmGroup::CheckSignatures() const {
  for (int j = 0; j < size_; ++j) {
    if (j == rank_) continue;
    const uint64_t theirs = CellOf(set_, j)->signature;
    if (theirs == signature_) continue;
    std::string detail;
    if ((theirs >> 40) == (signature_ >> 40)) {  // the same op and root: only the sizes differ
      detail = "rank " + std::to_string(j) + " sends " +
               std::to_string(theirs & ((uint64_t{1} << 40) - 1)) + " bytes, rank " +
               std::to_string(rank_) + " " +
               std::to_string(signature_ & ((uint64_t{1} << 40) - 1));
    } else {
      detail = "rank " + std::to_string(j) + " runs " + DescribeSignature(theirs) + ", rank " +
               std::to_string(rank_) + " " + DescribeSignature(signature_);
    }
    PADDLE_THROW(errors::InvalidArgument(
        "%s: the ranks' calls of a shared-memory collective differ: %s (with "
        "FLAGS_collective_check other than in_band only this cheaper check compares them)",
        describe_.c_str(), detail.c_str()));
  }
}

void ShmGroup::WaitFor(int peer, uint32_t step) {
  Control& c = Controls()[peer];
  const Cell& cell = *CellOf(set_, peer);
  using Clock = std::chrono::steady_clock;
  // The peer announces in its cell before its counter: a step its counter shows is in the
  // cell too.
  auto announced = [&] { return Reached(cell.seq.load(std::memory_order_acquire), step); };
  // The CPU transports' spin rule (spin_policy.h), then a futex wait.
  if (spin_.Spin([&] {
        return announced() || header_->failed.load(std::memory_order_relaxed) != 0;
      }) &&
      announced()) {
    return;
  }
  auto last_check = Clock::now();
  if (!deadline_set_) {
    deadline_ = last_check + timeout_.load();
    deadline_set_ = true;
  }
  for (;;) {
    if (header_->failed.load(std::memory_order_acquire) != 0) RaisePosted();
    const auto now = Clock::now();
    c.waiters.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = c.step.load(std::memory_order_seq_cst);
    if (!Reached(seen, step) && now < deadline_) {
      const auto slice = std::min<Clock::duration>(deadline_ - now, kLivenessSlice);
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(slice).count();
      timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
      Futex(&c.step, FUTEX_WAIT, seen, &ts);
    }
    c.waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (announced()) {
      spin_.Ended();
      return;
    }
    const auto after = Clock::now();
    if (after - last_check >= kLivenessSlice || after >= deadline_) {
      last_check = after;
      for (int r = 0; r < size_; ++r) {
        std::string how;
        if (r != rank_ && !Reached(Controls()[r].step.load(std::memory_order_acquire), step) &&
            PeerGone(r, &how)) {
          FailStep(kGone, "rank " + std::to_string(r) + " " + how + " during the shared-memory " +
                              what_ + " (it never joined step " + std::to_string(step) + ")");
        }
      }
    }
    if (after >= deadline_) {
      FailStep(kTimedOut,
               "the shared-memory " + std::string(what_) + " did not complete within the "
               "group's timeout of " + std::to_string(timeout_.load().count()) + " ms: " +
                   MissingRanks(step));
    }
  }
}

bool ShmGroup::PeerGone(int peer, std::string* how) const {
  const pid_t pid = Controls()[peer].pid;
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) {
    *how = "(pid " + std::to_string(pid) + ") exited";
    return true;
  }
  // A killed child its parent has not reaped yet is a zombie: gone too.
  std::string stat = ReadFirstLine(("/proc/" + std::to_string(pid) + "/stat").c_str());
  size_t paren = stat.rfind(')');
  if (paren != std::string::npos && paren + 2 < stat.size() &&
      (stat[paren + 2] == 'Z' || stat[paren + 2] == 'X')) {
    *how = "(pid " + std::to_string(pid) + ") exited";
    return true;
  }
  return false;
}

std::string ShmGroup::MissingRanks(uint32_t step) const {
  std::vector<int> behind;
  std::string detail;
  for (int r = 0; r < size_; ++r) {
    const uint32_t at = Controls()[r].step.load(std::memory_order_acquire);
    if (r == rank_ || Reached(at, step)) continue;
    behind.push_back(r);
    detail += "; rank " + std::to_string(r) + " (pid " + std::to_string(Controls()[r].pid) +
              ", alive) is " + std::to_string(step - at) + " step(s) behind";
  }
  return "rank(s) " + JoinRanks(behind) + " did not join it" + detail +
         " (stuck in other work, stopped, or running another op)";
}

void ShmGroup::WakeAll() {
  for (int r = 0; r < size_; ++r) Futex(&Controls()[r].step, FUTEX_WAKE, INT_MAX, nullptr);
}

void ShmGroup::Abort(const std::string& why) {
  uint32_t expected = 0;
  if (!header_->failed.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return;
  header_->fail_kind = kGone;
  header_->fail_rank = rank_;
  std::snprintf(header_->cause, sizeof(header_->cause), "aborted: %s", why.c_str());
  header_->failed.store(2, std::memory_order_release);
  WakeAll();
}

void ShmGroup::FailStep(int kind, const std::string& cause) {
  uint32_t expected = 0;
  if (header_->failed.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    header_->fail_kind = kind;
    header_->fail_rank = rank_;
    std::snprintf(header_->cause, sizeof(header_->cause), "%s", cause.c_str());
    header_->failed.store(2, std::memory_order_release);
    WakeAll();
  }
  RaisePosted();
}

void ShmGroup::RaisePosted() {
  // The poster writes a few hundred bytes between 1 and 2; if it died in between, say so.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  while (header_->failed.load(std::memory_order_acquire) != 2) {
    if (std::chrono::steady_clock::now() >= until) {
      PADDLE_THROW(errors::Unavailable("%s: %s failed: a rank died while reporting a failure",
                                       describe_.c_str(), what_));
    }
    sched_yield();
  }
  std::string msg = describe_ + ": ";
  if (header_->fail_rank != rank_) {
    msg += "the shared-memory " + std::string(what_) + " ended because rank " +
           std::to_string(header_->fail_rank) + " reported: ";
  }
  msg += header_->cause;
  if (header_->fail_kind == kTimedOut) throw TimeoutError(msg);
  throw UnavailableError(msg);
}

}  // namespace distributed
}  // namespace phi
