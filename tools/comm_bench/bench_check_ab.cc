// "ours, check off": the same all-reduce through our engine with the in-band agreement check
// off (FLAGS_collective_check=off around each op), timed in the rounds that time ours
// with the check on, so the check's cost is measured in one run (--check_ab).
#include <gflags/gflags.h>

#include "distributed/process_group.h"
#include "phi/core/flags.h"
#include "tools/comm_bench/bench_baseline.h"
#include "tools/comm_bench/bench_data.h"

namespace paddle_like {
namespace bench {
namespace {

class EngineWithoutCheck : public RawAllReduce {
 public:
  EngineWithoutCheck(distributed::ProcessGroup* pg, phi::DataType dtype,
                     phi::distributed::ReduceOp op)
      : pg_(pg), dtype_(dtype), op_(op) {}
  std::string Name() const override { return "ours, check off"; }
  bool IsOurEngine() const override { return true; }
  void Prepare(int64_t count, bool in_place) override {
    in_ = DenseTensor(phi::CPUPlace(), dtype_, phi::DDim({count}));
    FillInput(&in_, dtype_, true, op_, pg_->GetRank());
    in_place_ = in_place;
    if (!in_place) out_ = DenseTensor(phi::CPUPlace(), dtype_, phi::DDim({count}));
  }
  void Run(int iters) override {
    // Every rank flips the flag around the same ops, so they all run them unchecked.
    const std::string was = FLAGS_collective_check;
    FLAGS_collective_check = "off";
    const distributed::AllreduceOptions ar{op_, 1.0};
    for (int i = 0; i < iters; ++i) pg_->AllReduce(in_place_ ? &in_ : &out_, in_, ar, true);
    FLAGS_collective_check = was;
  }

 private:
  distributed::ProcessGroup* pg_;
  phi::DataType dtype_;
  phi::distributed::ReduceOp op_;
  DenseTensor in_, out_;
  bool in_place_ = false;
};

}  // namespace

std::unique_ptr<RawAllReduce> MakeEngineWithoutCheck(distributed::ProcessGroup* pg,
                                                     phi::DataType dtype,
                                                     phi::distributed::ReduceOp op) {
  return std::make_unique<EngineWithoutCheck>(pg, dtype, op);
}

}  // namespace bench
}  // namespace paddle_like
