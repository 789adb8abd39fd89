// The collectives comm_bench measures: sizes in nccl-tests' conventions, bus factors, buffers
// for out-of-place and in-place runs, the call itself and what its output must hold.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "tools/comm_bench/bench_data.h"
#include "tools/comm_bench/bench_options.h"

namespace paddle_like {
namespace bench {

using distributed::ProcessGroup;

struct OpInfo {
  std::string name;
  bool reduces = false;      // takes -o
  bool rooted = false;       // takes -r
  bool has_in_place = false;
  bool blocked = false;      // sizes count n per-rank blocks (allgather, alltoall, ...)
  int min_ranks = 1;
  // nccl-tests' busbw = algbw x factor.
  double BusFactor(int n) const;
};

// nullptr for an unknown name.
const OpInfo* FindOp(const std::string& name);

// One row of the sweep: `bytes` is the size column (nccl-tests: the total of all blocks for
// the blocked ops), `block` the elements each rank contributes per block.
struct SizePlan {
  int64_t bytes = 0;
  int64_t count = 0;  // bytes / element size
  int64_t block = 0;
};
SizePlan PlanSize(const OpInfo& op, int64_t requested_bytes, size_t elem_size, int world);

// The tensors of one op at one size and mode. `input` is what the rank fills, `output` what
// is checked; for in-place runs they alias (a view of the same storage).
struct OpBuffers {
  DenseTensor in_storage, out_storage;
  DenseTensor input, output;
};

class BenchOp {
 public:
  BenchOp(const OpInfo& info, const BenchOptions& opts, ProcessGroup* pg, phi::Place place);

  const OpInfo& info() const { return info_; }
  int root() const { return info_.rooted ? opts_.root : -1; }

  OpBuffers MakeBuffers(const SizePlan& plan, bool in_place) const;
  // Writes this rank's input values.
  void Fill(OpBuffers* b, const SizePlan& plan) const;
  // The tasks of one issue: one, or two for isendrecv (its receive's and its send's); the
  // other is null. A fixed pair, not a vector: what is timed is the group's call, not an
  // allocation of the benchmark's.
  using Tasks = std::array<ProcessGroup::TaskPtr, 2>;
  // Issues the op once; sync_op as the options say. Every task it returns must be waited
  // before the buffers are touched again.
  Tasks Issue(OpBuffers* b, bool sync_op) const;
  // Wrong output elements on this rank (0 where this rank has no output to check).
  int64_t Check(const OpBuffers& b, const SizePlan& plan) const;

 private:
  ProcessGroup::TaskPtr IssueOne(OpBuffers* b, bool sync_op, int next, int prev) const;

  // The op, resolved from its name once (Issue runs in the timed loop).
  enum class Kind {
    kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kAllToAll, kGather, kScatter,
    kSendRecv, kISendRecv
  };
  static Kind KindOf(const std::string& name);

  const OpInfo& info_;
  Kind kind_;
  const BenchOptions& opts_;
  ProcessGroup* pg_;
  phi::Place place_;
  int rank_, world_;
};

}  // namespace bench
}  // namespace paddle_like
