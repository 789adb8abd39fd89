// Fusing the all-reduces of one engine group into flat buffers, for CPU engines (Gloo,
// MPI): one exchange per (dtype, op, factor) instead of one per tensor.
#pragma once

#include <cstdint>
#include <functional>
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

// Runs one all-reduce of `count` elements (send may equal recv): the engine's own.
using CpuAllReduceFn = std::function<void(const void* send, void* recv, int64_t count,
                                          DataType dtype, const Reduction& red)>;

// Runs `ops` through `all_reduce`: a single op as it is, several fused per (dtype, op,
// premul factor) into one flat buffer each, copied back after. Every rank builds the same
// buckets from the same call sequence, so the fused calls match across ranks.
void RunFusedCpuAllReduces(const std::vector<PendingCpuAllReduce>& ops,
                           const CpuAllReduceFn& all_reduce);

}  // namespace distributed
}  // namespace phi
