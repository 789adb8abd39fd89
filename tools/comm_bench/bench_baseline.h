// The raw engine, driven directly in the same processes, for our/raw time ratios: Gloo's own
// gloo::allreduce (default algorithm) on a gloo::rendezvous::Context built through our store
// under a prefix of its own, or ncclAllReduce on a communicator of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "phi/core/data_type.h"
#include "phi/core/distributed/reduce_op.h"
#include "phi/core/distributed/store/store.h"

namespace paddle_like {
namespace bench {

class RawAllReduce {
 public:
  virtual ~RawAllReduce() = default;
  virtual std::string Name() const = 0;
  // Allocates and fills buffers of `count` elements; in place: one buffer.
  virtual void Prepare(int64_t count, bool in_place) = 0;
  // Runs `iters` all-reduces back to back and returns when the last has completed.
  virtual void Run(int iters) = 0;
};

// AVG runs as SUM here (Gloo has no average); the ratio then compares the communication.
// Each call builds its gloo::AllreduceOptions (binds its buffers), as a caller whose tensors
// change must; reuse_options builds them once (the best case, buffers never change).
std::unique_ptr<RawAllReduce> MakeRawGloo(const std::shared_ptr<phi::distributed::Store>& store,
                                          int rank, int size, phi::DataType dtype,
                                          phi::distributed::ReduceOp op, int timeout_s,
                                          bool reuse_options = false);

// nullptr when this build has no NCCL.
std::unique_ptr<RawAllReduce> MakeRawNccl(const std::shared_ptr<phi::distributed::Store>& store,
                                          int rank, int size, int device, phi::DataType dtype,
                                          phi::distributed::ReduceOp op);

// MPI_Allreduce on a duplicate of MPI_COMM_WORLD (builds with MPI only; AVG as SUM).
std::unique_ptr<RawAllReduce> MakeRawMpi(phi::DataType dtype, phi::distributed::ReduceOp op);

}  // namespace bench
}  // namespace paddle_like
