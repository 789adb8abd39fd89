// The raw engines, driven directly, for our/raw time ratios. Gloo: every all-reduce algorithm
// Gloo ships (ring, ring_chunked, halving_doubling, bcube, and the options-based
// gloo::allreduce), each set up at its standalone best (buffers bound once per size), on one
// gloo::rendezvous::Context built through our store under a prefix of its own. NCCL:
// ncclAllReduce on a communicator of its own.
//
// They run in comm_bench's processes (--baseline, next to our process group) or in processes
// that hold no group at all (--raw_only, see tools/gloo_latency_compare.sh): nothing of ours
// runs beside them there.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "phi/core/data_type.h"
#include "phi/core/distributed/reduce_op.h"
#include "phi/core/distributed/store/store.h"

namespace paddle_like {
namespace distributed {
class ProcessGroup;
}
namespace bench {

class RawAllReduce {
 public:
  virtual ~RawAllReduce() = default;
  virtual std::string Name() const = 0;
  // Allocates and fills buffers of `count` elements; in place: one buffer. Gloo's bound
  // algorithms are in place by nature: they reduce a buffer of zeros (no refill, no
  // overflow) whichever `in_place` says.
  virtual void Prepare(int64_t count, bool in_place) = 0;
  // Runs `iters` all-reduces back to back and returns when the last has completed.
  virtual void Run(int iters) = 0;
  // True for our own engine in another configuration (--check_ab): reported beside ours,
  // never counted as the best raw engine.
  virtual bool IsOurEngine() const { return false; }
};

// Gloo's all-reduce algorithms, in the order --baseline runs them.
enum class RawGlooAlgorithm { kRing, kRingChunked, kHalvingDoubling, kBcube, kAllreduce };
const std::vector<RawGlooAlgorithm>& AllRawGlooAlgorithms();
// "ring,bcube" -> those algorithms; empty -> all. Unknown names raise InvalidArgument.
std::vector<RawGlooAlgorithm> SelectedRawGlooAlgorithms(const std::string& names);

// One Gloo context (full mesh, through `store` under "comm_bench/raw_gloo/") shared by the
// algorithms made from it. AVG runs as SUM (Gloo has no average): the ratio then compares the
// communication. Float16/bfloat16/bool/complex have no raw baseline (Unimplemented at Prepare).
class RawGlooContext {
 public:
  RawGlooContext(const std::shared_ptr<phi::distributed::Store>& store, int rank, int size,
                 int timeout_s);
  ~RawGlooContext();
  std::unique_ptr<RawAllReduce> Make(RawGlooAlgorithm algo, phi::DataType dtype,
                                     phi::distributed::ReduceOp op);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// Our engine's all-reduce with the agreement check off (bench_check_ab.cc).
std::unique_ptr<RawAllReduce> MakeEngineWithoutCheck(distributed::ProcessGroup* pg,
                                                     phi::DataType dtype,
                                                     phi::distributed::ReduceOp op);

// nullptr when this build has no NCCL.
std::unique_ptr<RawAllReduce> MakeRawNccl(const std::shared_ptr<phi::distributed::Store>& store,
                                          int rank, int size, int device, phi::DataType dtype,
                                          phi::distributed::ReduceOp op);

// MPI_Allreduce on a duplicate of MPI_COMM_WORLD (builds with MPI only; AVG as SUM).
std::unique_ptr<RawAllReduce> MakeRawMpi(phi::DataType dtype, phi::distributed::ReduceOp op);

}  // namespace bench
}  // namespace paddle_like
