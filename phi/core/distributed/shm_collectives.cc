// The collectives of ShmGroup, made of steps (shm_group.h): a rank writes its cell or slot,
// announces the step, waits for every rank, then reads the others' cells and slots straight
// from the segment. Small data (<= kInlineBytes) travels in the cells, with the announcement;
// larger data in the slots.
//
// Reductions: a small all-reduce (<= kShmGatheredAllReduceBytes, allreduce_plan.h) is one
// step: every rank copies its input in, then reduces all the cells or slots in rank order. A
// larger one goes in pieces of one slot per rank: rank r reduces slice r of the piece from
// every rank's slot, in rank order, into its own slot (step 1), and every rank copies all the
// slices out (step 2). Either way each element is reduced by one sequence
// (((x0 op x1) op x2) ...): the same bits on every rank, and the same as the network path's
// gathered reduction.
#include <algorithm>
#include <cstring>

#include "phi/core/distributed/allreduce_plan.h"
#include "phi/core/distributed/cpu_reduce.h"
#include "phi/core/distributed/shm_group.h"
#include "phi/core/errors.h"

namespace phi {
namespace distributed {
namespace {
void Copy(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) std::memcpy(dst, src, bytes);
}

// Where slice r of `count` elements split over `n` ranks begins.
int64_t SliceBegin(int64_t count, int n, int r) { return count * r / n; }
}  // namespace

void ShmGroup::ReducePiece(const char* in, char* out, int64_t count, DataType dtype, ReduceOp op,
                           int root) {
  const int set = NextSet(), n = size_, me = rank_;
  const size_t es = SizeOf(dtype);
  char* mine = Slot(set, me);
  const int64_t b = SliceBegin(count, n, me), e = SliceBegin(count, n, me + 1);
  // The others' slices of this rank's input (its own it reduces from `in` directly).
  Copy(mine, in, static_cast<size_t>(b) * es);
  Copy(mine + e * es, in + e * es, static_cast<size_t>(count - e) * es);
  Step();
  const size_t len = static_cast<size_t>(e - b);
  if (len > 0) {
    auto src = [&](int j) -> const char* { return (j == me ? in : Slot(set, j)) + b * es; };
    char* target = mine + b * es;
    CpuReduceFn fn = GetCpuReduceFn(dtype, op);
    fn(target, src(0), src(1), len);
    for (int j = 2; j < n; ++j) fn(target, target, src(j), len);
    if (op == ReduceOp::AVG) CpuDivide(dtype, target, static_cast<int64_t>(len), n);
  }
  Step();
  if (root >= 0 && root != me) return;
  for (int j = 0; j < n; ++j) {
    const int64_t jb = SliceBegin(count, n, j), je = SliceBegin(count, n, j + 1);
    Copy(out + jb * es, Slot(set, j) + jb * es, static_cast<size_t>(je - jb) * es);
  }
}

namespace {
// What a piece of data streaming from memory is cut into (ReducePieceBytes, CopyPieceBytes).
constexpr size_t kStreamingPieceBytes = size_t{256} << 10;
}  // namespace

// While the op's data (the message on every rank) fit in about 8 MiB they stay in the
// last-level cache, and the fewer the pieces the fewer the steps: a piece is a whole slot.
// Beyond, the data stream from memory, and 256 KiB pieces keep what a piece touches (the
// slots, this rank's slice of input and output) in cache. Measured on 2 and 4 ranks
// (docs/benchmarks.md, "Reduction kernels and slot size").
size_t ShmGroup::ReducePieceBytes(size_t bytes) const {
  constexpr size_t kCachedOpBytes = size_t{8} << 20;
  if (bytes * static_cast<size_t>(size_) <= kCachedOpBytes) return slot_bytes_;
  return CopyPieceBytes();  // the streaming piece
}

// A collective that only copies (broadcast, all-gather, gather) moves 256 KiB pieces at any
// size: the writer fills the next piece while the readers copy the last one out, and both
// stay in cache. Whole 1 MiB slots were 2-4x slower from 1 MiB up, on 2 and 4 ranks
// (docs/benchmarks.md, "Copy-only collectives: 256 KiB pieces").
size_t ShmGroup::CopyPieceBytes() const { return std::min(slot_bytes_, kStreamingPieceBytes); }

void ShmGroup::AllReduce(const void* in, void* out, int64_t count, DataType dtype, ReduceOp op) {
  ReduceTo(OpKind::kAllReduce, in, out, count, dtype, op, -1);
}

void ShmGroup::Reduce(const void* in, void* out, int64_t count, DataType dtype, ReduceOp op,
                      int root) {
  ReduceTo(OpKind::kReduce, in, out, count, dtype, op, root);
}

void ShmGroup::ReduceTo(OpKind kind, const void* in, void* out, int64_t count,
                        DataType dtype, ReduceOp op, int root) {
  const size_t es = SizeOf(dtype), bytes = static_cast<size_t>(count) * es;
  BeginOp(kind, bytes, root);
  if (bytes <= std::min(kShmGatheredAllReduceBytes, slot_bytes_)) {
    const int set = NextSet();
    const bool inline_data = bytes <= kInlineBytes;
    char* mine = inline_data ? CellOf(set, rank_)->data : Slot(set, rank_);
    Copy(mine, in, bytes);
    Step();
    if (root < 0 || rank_ == root) {
      CpuAllReduceGathered(dtype, op, inline_data ? CellOf(set, 0)->data : Slot(set, 0),
                           inline_data ? cell_stride_ : slot_bytes_, size_, count, out);
    }
    return;
  }
  const int64_t piece = static_cast<int64_t>(ReducePieceBytes(bytes) / es);
  for (int64_t off = 0; off < count; off += piece) {
    ReducePiece(static_cast<const char*>(in) + off * es, static_cast<char*>(out) + off * es,
                std::min(piece, count - off), dtype, op, root);
  }
}

void ShmGroup::Broadcast(const void* in, void* out, size_t bytes, int root) {
  BeginOp(OpKind::kBroadcast, bytes, root);
  if (rank_ == root) Copy(out, in, bytes);
  if (bytes > 0 && bytes <= kInlineBytes) {
    const int set = NextSet();
    if (rank_ == root) Copy(CellOf(set, root)->data, in, bytes);
    Step();
    if (rank_ != root) Copy(out, CellOf(set, root)->data, bytes);
    return;
  }
  const size_t piece = CopyPieceBytes();
  for (size_t off = 0; off < bytes; off += piece) {
    const size_t len = std::min(piece, bytes - off);
    const int set = NextSet();
    if (rank_ == root) Copy(Slot(set, root), static_cast<const char*>(in) + off, len);
    Step();
    if (rank_ != root) Copy(static_cast<char*>(out) + off, Slot(set, root), len);
  }
}

void ShmGroup::AllGather(const void* in, void* out, size_t bytes) {
  BeginOp(OpKind::kAllGather, bytes, -1);
  char* dst = static_cast<char*>(out);
  if (bytes > 0 && bytes <= kInlineBytes) {
    const int set = NextSet();
    Copy(CellOf(set, rank_)->data, in, bytes);
    Step();
    for (int j = 0; j < size_; ++j) {
      Copy(dst + j * bytes, j == rank_ ? in : CellOf(set, j)->data, bytes);
    }
    return;
  }
  const size_t piece = CopyPieceBytes();
  for (size_t off = 0; off < bytes; off += piece) {
    const size_t len = std::min(piece, bytes - off);
    const int set = NextSet();
    Copy(Slot(set, rank_), static_cast<const char*>(in) + off, len);
    Step();
    for (int j = 0; j < size_; ++j) {
      Copy(dst + j * bytes + off,
           j == rank_ ? static_cast<const char*>(in) + off : Slot(set, j), len);
    }
  }
}

void ShmGroup::ReduceScatter(const void* in, void* out, int64_t recv_count, DataType dtype,
                             ReduceOp op) {
  BeginOp(OpKind::kReduceScatter, static_cast<uint64_t>(recv_count) * SizeOf(dtype), -1);
  const int n = size_, me = rank_;
  const size_t es = SizeOf(dtype);
  const char* src_all = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  // Each piece: block j's elements [off, off + len) for every j, block j in chunk j of the slot.
  const int64_t piece = std::max<int64_t>(1, static_cast<int64_t>(slot_bytes_ / n / es));
  CpuReduceFn fn = GetCpuReduceFn(dtype, op);
  for (int64_t off = 0; off < recv_count; off += piece) {
    const int64_t len = std::min(piece, recv_count - off);
    const int set = NextSet();
    char* mine = Slot(set, me);
    // Block `me` too: the output may be that very block of the input (in place), which the
    // reduction below overwrites while it still reads it.
    for (int j = 0; j < n; ++j) {
      Copy(mine + j * piece * es, src_all + (j * recv_count + off) * es, len * es);
    }
    Step();
    auto src = [&](int j) -> const char* { return Slot(set, j) + me * piece * es; };
    char* target = dst + off * es;
    fn(target, src(0), src(1), static_cast<size_t>(len));
    for (int j = 2; j < n; ++j) fn(target, target, src(j), static_cast<size_t>(len));
    if (op == ReduceOp::AVG) CpuDivide(dtype, target, len, n);
  }
}

void ShmGroup::Gather(const void* in, void* out, size_t bytes, int root) {
  BeginOp(OpKind::kGather, bytes, root);
  const size_t piece = CopyPieceBytes();
  for (size_t off = 0; off < bytes; off += piece) {
    const size_t len = std::min(piece, bytes - off);
    const int set = NextSet();
    if (rank_ != root) Copy(Slot(set, rank_), static_cast<const char*>(in) + off, len);
    Step();
    if (rank_ != root) continue;
    for (int j = 0; j < size_; ++j) {
      Copy(static_cast<char*>(out) + j * bytes + off,
           j == root ? static_cast<const char*>(in) + off : Slot(set, j), len);
    }
  }
}

void ShmGroup::Scatter(const void* in, void* out, size_t bytes, int root) {
  BeginOp(OpKind::kScatter, bytes, root);
  const size_t chunk = std::max<size_t>(1, slot_bytes_ / size_);
  const char* src = static_cast<const char*>(in);
  if (rank_ == root) Copy(out, src + root * bytes, bytes);
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t len = std::min(chunk, bytes - off);
    const int set = NextSet();
    if (rank_ == root) {
      for (int j = 0; j < size_; ++j) {
        if (j != root) Copy(Slot(set, root) + j * chunk, src + j * bytes + off, len);
      }
    }
    Step();
    if (rank_ != root) Copy(static_cast<char*>(out) + off, Slot(set, root) + rank_ * chunk, len);
  }
}

// Rounds until no rank has anything left to send: each carries up to one chunk per pair, its
// length in the sender's meta words (word j: for rank j; word n: the sender has more).
void ShmGroup::AllToAllV(const char* in, const std::vector<size_t>& send_bytes,
                         const std::vector<size_t>& send_offsets, char* out,
                         const std::vector<size_t>& recv_bytes,
                         const std::vector<size_t>& recv_offsets) {
  BeginOp(OpKind::kAllToAll, 0, -1);
  const int n = size_, me = rank_;
  const size_t chunk = std::max<size_t>(1, slot_bytes_ / n);
  std::vector<size_t> sent(n, 0), got(n, 0);
  Copy(out + recv_offsets[me], in + send_offsets[me], std::min(send_bytes[me], recv_bytes[me]));
  sent[me] = send_bytes[me];
  got[me] = recv_bytes[me];
  bool overflow = false;
  for (bool more = true; more;) {
    const int set = NextSet();
    char* mine = Slot(set, me);
    uint64_t* meta = Meta(set, me);
    bool mine_more = false;
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      const size_t len = std::min(chunk, send_bytes[j] - sent[j]);
      Copy(mine + j * chunk, in + send_offsets[j] + sent[j], len);
      meta[j] = len;
      sent[j] += len;
      mine_more = mine_more || sent[j] < send_bytes[j];
    }
    meta[n] = mine_more ? 1 : 0;
    Step();
    more = mine_more;
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      const uint64_t* theirs = Meta(set, j);
      const size_t len = std::min<size_t>(theirs[me], chunk);
      const size_t room = recv_bytes[j] - got[j];
      overflow = overflow || len > room;
      Copy(out + recv_offsets[j] + got[j], Slot(set, j) + me * chunk, std::min(len, room));
      got[j] += std::min(len, room);
      more = more || theirs[n] != 0;
    }
  }
  for (int j = 0; j < n; ++j) overflow = overflow || got[j] != recv_bytes[j];
  PADDLE_ENFORCE(!overflow, errors::InvalidArgument(
                                "%s: alltoall: the bytes received differ from the sizes expected",
                                describe_.c_str()));
}

const char* ShmGroup::VariableAllGather(const void* in, size_t bytes, size_t* stride,
                                        std::vector<size_t>* lengths) {
  BeginOp(OpKind::kVariableAllGather, 0, -1);
  PADDLE_ENFORCE(bytes <= slot_bytes_,
                 errors::InvalidArgument("%s: %zu bytes exceed the variable all-gather's capacity "
                                         "of %zu", describe_.c_str(), bytes, slot_bytes_));
  const int set = NextSet();
  Cell* mine = CellOf(set, rank_);
  Copy(bytes <= kInlineBytes ? mine->data : Slot(set, rank_), in, bytes);
  mine->bytes = static_cast<uint32_t>(bytes);
  Step();
  lengths->resize(static_cast<size_t>(size_));
  size_t inline_blocks = 0, longest = 0;
  for (int j = 0; j < size_; ++j) {
    const size_t len = std::min<size_t>(CellOf(set, j)->bytes, slot_bytes_);
    (*lengths)[static_cast<size_t>(j)] = len;
    inline_blocks += len <= kInlineBytes ? 1 : 0;
    longest = std::max(longest, len);
  }
  auto block = [&](int j) -> const char* {
    return (*lengths)[static_cast<size_t>(j)] <= kInlineBytes ? CellOf(set, j)->data
                                                              : Slot(set, j);
  };
  if (inline_blocks == static_cast<size_t>(size_) || inline_blocks == 0) {
    *stride = inline_blocks > 0 ? cell_stride_ : slot_bytes_;
    return block(0);
  }
  // Some blocks in cells, some in slots (ranks that disagree on their sizes: the caller
  // raises on it): one stride over a copy.
  *stride = longest;
  mixed_.resize(longest * static_cast<size_t>(size_));
  for (int j = 0; j < size_; ++j) {
    Copy(mixed_.data() + static_cast<size_t>(j) * longest, block(j),
         (*lengths)[static_cast<size_t>(j)]);
  }
  return mixed_.data();
}

}  // namespace distributed
}  // namespace phi
