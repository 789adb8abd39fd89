// Timing: warm-up, barrier, N issues (sync or async), wait, time per op averaged over ranks;
// then one more run on fresh inputs, checked. The raw baseline and the coalescing benchmark.
#pragma once

#include <memory>

#include "tools/comm_bench/bench_baseline.h"
#include "tools/comm_bench/bench_ops.h"
#include "tools/comm_bench/bench_report.h"

namespace paddle_like {
namespace bench {

class Runner {
 public:
  Runner(const BenchOptions& opts, ProcessGroup* pg, phi::Place place, RawAllReduce* raw);

  // One row of the table: out-of-place and (where the op has it) in-place.
  Row RunSize(const BenchOp& op, const SizePlan& plan);
  CoalesceResult RunCoalesce();

  double SumOverRanks(double v);

 private:
  Half RunHalf(const BenchOp& op, const SizePlan& plan, bool in_place);
  double TimeOp(const BenchOp& op, OpBuffers* b, int iters);
  double TimeRaw(int iters);
  void Barrier();

  const BenchOptions& opts_;
  ProcessGroup* pg_;
  phi::Place place_;
  RawAllReduce* raw_;
  int world_;
};

}  // namespace bench
}  // namespace paddle_like
