// Timing: warm-up, barrier, N issues (sync or async), wait; per-op times (sync) or per-round
// means (async) give each rank's mean, median and p90, averaged over ranks; then one more run
// on fresh inputs, checked. The raw baselines and the coalescing benchmark.
#pragma once

#include <memory>
#include <vector>

#include "tools/comm_bench/bench_baseline.h"
#include "tools/comm_bench/bench_ops.h"
#include "tools/comm_bench/bench_report.h"

namespace paddle_like {
namespace bench {

// Barriers and sums over ranks outside the timed regions: through the process group, or
// through the store where there is none (--raw_only: nothing of ours beside the raw engine).
class RankSync {
 public:
  virtual ~RankSync() = default;
  virtual void Barrier() = 0;
  // Element-wise sums over ranks, in one exchange.
  virtual std::vector<double> SumEachOverRanks(std::vector<double> v) = 0;
  double SumOverRanks(double v) { return SumEachOverRanks({v})[0]; }
};
std::unique_ptr<RankSync> MakeGroupSync(ProcessGroup* pg, phi::Place place);
std::unique_ptr<RankSync> MakeStoreSync(std::shared_ptr<phi::distributed::Store> store,
                                        int rank, int world);

class Runner {
 public:
  // pg may be null (--raw_only); raws may be empty.
  Runner(const BenchOptions& opts, ProcessGroup* pg, phi::Place place,
         std::vector<RawAllReduce*> raws, RankSync* sync, int world);

  // One row of the table: out-of-place and (where the op has it) in-place.
  Row RunSize(const BenchOp* op, const OpInfo& info, const SizePlan& plan);
  CoalesceResult RunCoalesce();

 private:
  Half RunHalf(const BenchOp* op, const OpInfo& info, const SizePlan& plan, bool in_place);
  // Appends this rank's samples (us) for `iters` ops: one per op when sync, else one mean.
  void TimeOp(const BenchOp& op, OpBuffers* b, int iters, std::vector<double>* samples);
  void TimeRaw(RawAllReduce* raw, int iters, std::vector<double>* samples);
  Stats OverRanks(std::vector<double> samples);

  const BenchOptions& opts_;
  ProcessGroup* pg_;
  phi::Place place_;
  std::vector<RawAllReduce*> raws_;
  RankSync* sync_;
  int world_;
};

}  // namespace bench
}  // namespace paddle_like
