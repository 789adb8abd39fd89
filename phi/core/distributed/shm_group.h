// ShmGroup: the ranks of a CPU group that share a host, exchanging through one shared-memory
// segment instead of loopback TCP (internal to the CPU engine; the Gloo CommContext uses it
// for every collective when the whole group is on one host, docs/architecture.md, "CPU
// transports").
//
// The segment: a header, one control line per rank (its step counter, futex-waited), and two
// sets of one cell and one slot per rank. Every collective is a sequence of *steps*: a rank
// writes its own cell or slot, announces the step (in its cell, then in its counter), waits
// until every rank has announced it, then reads the others' cells and slots. A *use* is one or
// more steps on the same set; consecutive uses alternate sets, so a rank may write set s again
// only after every rank has announced the first step of the use in between, which they do
// after they finished reading set s. One step per small op, no acknowledgements.
//
// A cell is one cache line: the step it last announced, the op's signature, a length, and up
// to kInlineBytes of data. A rank spins on its peers' cells, so a small op (an in-band
// agreement record with its payload, a small all-reduce or broadcast) moves one line per
// peer: the peer's cell, announcement and data together.
//
// Waiting: the CPU transports' spin rule (spin_policy.h), then a futex wait in
// slices of kLivenessSlice, after each of which the missing ranks' processes are checked:
// a dead one ends the op at once (Unavailable, naming it), the group's timeout names the
// ranks that never announced the step. A failure on any rank is posted in the segment and
// wakes every rank, which then raises the same cause: the communicator is broken everywhere.
//
// Lifetime: rank 0 creates the segment (a random name, O_EXCL), every rank maps it, and
// once all have mapped it rank 0 unlinks it: nothing stays in /dev/shm after any exit from
// then on. A crash inside that window leaves a segment named after the creator's pid, which
// a later creation on the host removes once that pid is gone and a minute has passed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "phi/core/data_type.h"
#include "phi/core/distributed/reduce_op.h"
#include "phi/core/distributed/spin_policy.h"
#include "phi/core/distributed/store/store.h"

namespace phi {
namespace distributed {

// What makes two processes able to share a segment and to check each other's pid: the same
// boot, and the same network, mount and pid namespaces. Processes in different network
// namespaces (containers, tools/sim_cluster.sh's simulated nodes) count as different hosts
// even on one machine.
std::string ShmHostIdentity();

class ShmGroup {
 public:
  // The store key under which each rank publishes its host identity when its communicator is
  // created (before the Gloo mesh publishes its addresses, so that a rank whose address is in
  // the store has published this too).
  static std::string HostKey(int rank);
  static std::string HostValue();  // FLAGS_cpu_shm_transport and this process's identity
  // Whether two published HostValues allow sharing memory: the flag on in both, and the same
  // identity.
  static bool SharesMemory(const std::string& a, const std::string& b);

  // Collective: every rank of the group calls it, at the same point of its op sequence.
  // Returns the same answer on every rank: the group, when every rank is on this host,
  // has FLAGS_cpu_shm_transport on and mapped the segment; else nullptr (the caller keeps
  // its network path). Raises Timeout naming the ranks that never came, within `timeout`.
  // Slots are at least `min_slot_bytes` (what VariableAllGather must take).
  static std::unique_ptr<ShmGroup> Create(const std::shared_ptr<Store>& store, int rank, int size,
                                          size_t min_slot_bytes, std::chrono::milliseconds timeout,
                                          const std::string& describe);
  ~ShmGroup();
  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // The collectives (shm_collectives.cc). Inputs of reductions are prepared by the caller
  // (PrepareCpuReduce: complex as its real view, PREMUL_SUM scaled); AVG divides here.
  // Every slice is reduced once, by one rank, in rank order: the same bits on every rank.
  void AllReduce(const void* in, void* out, int64_t count, DataType dtype, ReduceOp op);
  void Reduce(const void* in, void* out, int64_t count, DataType dtype, ReduceOp op, int root);
  void Broadcast(const void* in, void* out, size_t bytes, int root);
  void AllGather(const void* in, void* out, size_t bytes);
  void ReduceScatter(const void* in, void* out, int64_t recv_count, DataType dtype, ReduceOp op);
  void Gather(const void* in, void* out, size_t bytes, int root);
  void Scatter(const void* in, void* out, size_t bytes, int root);
  // Block r of `in` (send_bytes[r] at send_offsets[r]) goes to rank r, whose block for this
  // rank lands at recv_offsets[this rank] of its `out`; sizes were checked by the engine.
  void AllToAllV(const char* in, const std::vector<size_t>& send_bytes,
                 const std::vector<size_t>& send_offsets, char* out,
                 const std::vector<size_t>& recv_bytes, const std::vector<size_t>& recv_offsets);
  // Blocks of up to a slot (>= the fused exchange's capacity, Create's min_slot_bytes); rank
  // r's at result + r * *stride, (*lengths)[r] bytes, valid until this rank's next call.
  const char* VariableAllGather(const void* in, size_t bytes, size_t* stride,
                                std::vector<size_t>* lengths);

  // Ends every rank's op in flight now, and every later one, with `why` (Unavailable). Any
  // thread; idempotent (the first cause wins).
  void Abort(const std::string& why);
  // The deadline of the ops that begin from now on (set_timeout). Any thread.
  void SetTimeout(std::chrono::milliseconds timeout) { timeout_.store(timeout); }

  // The collectives, as BeginOp and the signatures name them.
  enum class OpKind : uint8_t {
    kAllReduce, kReduce, kBroadcast, kAllGather, kReduceScatter, kGather, kScatter, kAllToAll,
    kVariableAllGather
  };
  // The op the following steps belong to, and its deadline (the group's timeout from the
  // op's first blocked wait):
  // named in every error. Its signature (`op`, `bytes`, `root`; pass 0 and -1 where ranks
  // legitimately differ) travels with the op's first step and is compared there: calls that
  // differ (possible with FLAGS_collective_check other than in_band) raise InvalidArgument on every
  // rank at the same step, leaving the group usable, instead of desynchronising it.
  void BeginOp(OpKind op, uint64_t bytes, int root);

  // The segment's header and per-rank control block (layouts in shm_group.cc).
  struct Header;
  struct Control;
  // Data a cell carries inline: an agreement record (32 bytes) with a 16-byte payload.
  static constexpr size_t kInlineBytes = 48;
  // A rank's cell of a set (shm_group.h's first comment). Its writer fills `bytes`, `data`
  // and `signature`, then announces with `seq`.
  struct alignas(64) Cell {
    std::atomic<uint32_t> seq;  // the last step this rank announced in this set
    uint32_t bytes;             // what the op puts here (VariableAllGather: its block's length)
    uint64_t signature;         // the op's, on its first step (BeginOp)
    char data[kInlineBytes];
  };

 private:
  Control* Controls() const;
  ShmGroup(int rank, int size, std::chrono::milliseconds timeout, std::string describe);
  void Map(int fd, size_t bytes);
  size_t LayoutBytes() const;

  // The step protocol.
  int NextSet();                          // the set of the next use (alternates)
  char* Slot(int set, int rank) const;    // a rank's slot of a set
  Cell* CellOf(int set, int rank) const;  // a rank's cell of a set
  // The words after its cell: one length per peer and one "more to come" (AllToAllV).
  uint64_t* Meta(int set, int rank) const;
  void Step();                            // announce the next step; wait for every rank
  void CheckSignatures() const;           // after an op's first step
  void WaitFor(int peer, uint32_t step);
  [[noreturn]] void FailStep(int kind, const std::string& cause);
  [[noreturn]] void RaisePosted();
  bool PeerGone(int peer, std::string* how) const;
  std::string MissingRanks(uint32_t step) const;
  void WakeAll();

  // AllReduce (`root` < 0: every rank gets the result) and Reduce.
  void ReduceTo(OpKind kind, const void* in, void* out, int64_t count, DataType dtype,
                ReduceOp op, int root);
  // The piece a large all-reduce or reduce of `bytes` is cut into (<= a slot).
  size_t ReducePieceBytes(size_t bytes) const;
  size_t CopyPieceBytes() const;  // broadcast, all-gather, gather
  // A large all-reduce's piece (a use of two steps); `root` as in ReduceTo.
  void ReducePiece(const char* in, char* out, int64_t count, DataType dtype, ReduceOp op,
                   int root);

  int rank_, size_;
  std::atomic<std::chrono::milliseconds> timeout_;
  std::string describe_;
  size_t slot_bytes_ = 0, cell_stride_ = 0;
  char* base_ = nullptr;
  char* cells_ = nullptr;  // the first cell and slot (every op computes addresses from them)
  char* slots_ = nullptr;
  size_t mapped_ = 0;
  Header* header_ = nullptr;
  uint32_t step_ = 0;  // steps this rank announced
  uint64_t uses_ = 0;  // uses so far (the set of the next: uses_ & 1)
  const char* what_ = "op";
  int set_ = 0;              // the set of the current use
  uint64_t signature_ = 0;   // the current op's (BeginOp)
  bool signature_pending_ = false;  // its first step has not run yet
  std::chrono::steady_clock::time_point deadline_;  // valid when deadline_set_
  bool deadline_set_ = false;  // taken at the op's first blocked wait (WaitFor)
  SpinPolicy spin_;  // the waits of the thread running this group's ops
  std::vector<char> mixed_;  // VariableAllGather's blocks when cells and slots both hold some
};

}  // namespace distributed
}  // namespace phi
