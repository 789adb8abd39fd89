// Fusing the all-reduces of one engine group into flat buffers, for CPU engines (Gloo,
// MPI): one exchange per (dtype, op, factor) instead of one per tensor.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "phi/core/data_type.h"
#include "phi/core/distributed/reduce_op.h"

namespace phi {
namespace distributed {

// An all-reduce recorded between GroupStart and GroupEnd, issued at the outermost GroupEnd.
struct PendingCpuAllReduce {
  const void* send;
  void* recv;
  int64_t count;
  DataType dtype;
  Reduction red;
};

// A send or receive recorded between GroupStart and GroupEnd, posted at the outermost
// GroupEnd (with the group's other sends and receives, so any order of a batch completes).
struct PendingCpuP2P {
  bool is_send;
  const void* src;  // a send's data
  void* dst;        // a receive's buffer
  int64_t count;
  DataType dtype;
  int peer;  // CommContext::kAnyPeer allowed for a receive
  int tag;
  int* source;  // a receive's sender is written here when not null
};

// Runs one all-reduce of `count` elements (send may equal recv): the engine's own.
using CpuAllReduceFn = std::function<void(const void* send, void* recv, int64_t count,
                                          DataType dtype, const Reduction& red)>;

// Runs `ops` through `all_reduce`: a single op as it is, several fused per (dtype, op,
// premul factor) into one flat buffer each, copied back after. Every rank builds the same
// buckets from the same call sequence, so the fused calls match across ranks.
void RunFusedCpuAllReduces(const std::vector<PendingCpuAllReduce>& ops,
                           const CpuAllReduceFn& all_reduce);

// The open engine group of a CPU CommContext (GroupStart/GroupEnd nest; only the outermost
// End issues): the all-reduces and the point-to-point records (`P2P`) called inside it,
// kept until then. The group belongs to the thread that opened it (the comm stream's): a
// send or receive that a point-to-point lane runs on another thread meanwhile is not part
// of it (open() is false there) and runs at once.
template <typename P2P = PendingCpuP2P>
class CpuGroupBatch {
 public:
  bool open() const {
    return depth_.load(std::memory_order_relaxed) > 0 &&
           owner_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }
  void Start() {
    if (depth_.load(std::memory_order_relaxed) == 0) {
      owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    }
    depth_.fetch_add(1, std::memory_order_relaxed);
  }
  void Add(const PendingCpuAllReduce& op) { allreduces_.push_back(op); }
  void Add(const P2P& op) { p2p_.push_back(op); }
  // Closes one level. At the outermost it moves the batch out (the context is clean even
  // when issuing it fails) and returns true; nested, false. `engine` names the caller in
  // the error for an End without Start.
  bool End(const char* engine, std::vector<PendingCpuAllReduce>* allreduces,
           std::vector<P2P>* p2p);
  // Closes one level after a failure without issuing: nothing of the group was posted yet.
  void Abort() {
    if (depth_.load(std::memory_order_relaxed) == 0) return;
    if (depth_.fetch_sub(1, std::memory_order_relaxed) > 1) return;
    allreduces_.clear();
    p2p_.clear();
  }

 private:
  std::atomic<int> depth_{0};
  std::atomic<std::thread::id> owner_{};
  std::vector<PendingCpuAllReduce> allreduces_;
  std::vector<P2P> p2p_;
};

// Raises PreconditionNotMet: `engine` GroupEnd without GroupStart.
[[noreturn]] void ThrowGroupEndWithoutStart(const char* engine);

template <typename P2P>
bool CpuGroupBatch<P2P>::End(const char* engine, std::vector<PendingCpuAllReduce>* allreduces,
                             std::vector<P2P>* p2p) {
  if (depth_.load(std::memory_order_relaxed) == 0) ThrowGroupEndWithoutStart(engine);
  if (depth_.fetch_sub(1, std::memory_order_relaxed) > 1) return false;
  *allreduces = std::move(allreduces_);
  *p2p = std::move(p2p_);
  allreduces_.clear();
  p2p_.clear();
  return true;
}

}  // namespace distributed
}  // namespace phi
