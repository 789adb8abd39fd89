// use_calc_stream=false: the all-reduce runs on the comm stream while compute that does not
// touch its tensors runs on the calc stream; c_sync_comm_stream (or the first op that reads
// the result) orders later compute after it, and the result is then correct.
//
// The overlap is shown with a late peer: every rank but 0 enters the program kLateMs after
// rank 0, so rank 0's all-reduce cannot finish before then. On the comm stream, rank 0's
// compute op (a registered test kernel doing kBusyMs of matmuls) starts at once, while the
// all-reduce is still pending; on the calc stream it starts only after the late ranks came.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "paddle_like/framework/executor.h"
#include "paddle_like/framework/kernel_registry.h"
#include "phi/kernels/math_kernels.h"
#include "tests/framework/framework_test_util.h"
#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;
using framework::ExecutionContext;
using framework::Executor;

constexpr int kLateMs = 600, kBusyMs = 300;

struct BusyRecord {
  Clock::time_point start, end;
  size_t pending_at_start = 0;
};
BusyRecord g_busy;

// Out = X @ X, repeated for `ms` milliseconds of real compute on the calc stream.
void BusyKernel(const ExecutionContext& ctx) {
  g_busy.start = Clock::now();
  g_busy.pending_at_start = ctx.pending_comm()->size();
  const auto until = g_busy.start + std::chrono::milliseconds(ctx.Attr<int>("ms"));
  DenseTensor out;
  do {
    phi::MatmulKernel(ctx.Input("X"), ctx.Input("X"), false, false, &out);
  } while (Clock::now() < until);
  *ctx.Output("Out") = out;
  g_busy.end = Clock::now();
}
PD_REGISTER_OP_KERNEL(test_busy_compute, CPU, BusyKernel, double);

double MsSince(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(t - t0).count();
}

class FrameworkCommStream : public ::testing::TestWithParam<int> {};

TEST_P(FrameworkCommStream, ComputeOverlapsTheAllReduceAndSyncOrdersTheResult) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    InitWorldRing();
    const int r = ctx.rank, n = ctx.world_size;
    const DenseTensor y = RandomTensor(DDim({32, 32}), 5);
    DenseTensor want_z;
    phi::MatmulKernel(y, y, false, false, &want_z);
    for (bool calc : {false, true}) {
      Scope scope;
      *scope.Var("X") = Doubles({1.0 * r, 2.0}, DDim({2}));
      *scope.Var("Y") = y;
      ProgramDesc p;
      AddOp(&p, "c_allreduce_sum", {{"X", {"X"}}}, {{"Out", {"X"}}},
            {{"ring_id", 0}, {"use_calc_stream", calc}});
      AddOp(&p, "test_busy_compute", {{"X", {"Y"}}}, {{"Out", {"Z"}}}, {{"ms", kBusyMs}});
      AddOp(&p, "c_sync_comm_stream", {{"X", {"X"}}}, {{"Out", {"X"}}}, {{"ring_id", 0}});
      Executor exe;
      dist::barrier();
      if (r != 0) std::this_thread::sleep_for(std::chrono::milliseconds(kLateMs));
      const auto t0 = Clock::now();
      exe.Run(p, &scope);
      const double total = MsSince(t0, Clock::now());
      ExpectValues(*scope.GetVar("X"), {n * (n - 1) / 2.0, 2.0 * n}, 0, "all-reduce result");
      ExpectClose(*scope.GetVar("Z"), want_z, 1e-14, "independent compute");
      if (r != 0 || n == 1) continue;
      const double busy_start = MsSince(t0, g_busy.start);
      if (!calc) {
        // Compute began while the all-reduce waited for the late ranks ...
        EXPECT_EQ(g_busy.pending_at_start, 1u);
        EXPECT_LT(busy_start, kLateMs / 3.0) << "compute did not start while the comm ran";
        // ... and the program took the longer of the two, not their sum.
        EXPECT_GE(total, kLateMs * 0.9);
        EXPECT_LT(total, kLateMs + kBusyMs * 0.7) << "no overlap: " << total << " ms";
      } else {
        EXPECT_EQ(g_busy.pending_at_start, 0u);
        EXPECT_GE(busy_start, kLateMs * 0.9) << "a calc-stream all-reduce returned early";
        EXPECT_GE(total, (kLateMs + kBusyMs) * 0.9);
      }
      std::printf("%s stream: compute started at %.1f ms, program took %.1f ms\n",
                  calc ? "calc" : "comm", busy_start, total);
    }
  });
}

// Without c_sync_comm_stream the consumer of the result waits for it (the consumer's event).
TEST_P(FrameworkCommStream, TheConsumerOfAPendingResultWaitsForIt) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    InitWorldRing();
    const int r = ctx.rank, n = ctx.world_size;
    Scope scope;
    *scope.Var("X") = Doubles({1.0 + r}, DDim({1}));
    ProgramDesc p;
    AddOp(&p, "c_allreduce_max", {{"X", {"X"}}}, {{"Out", {"M"}}}, {{"use_calc_stream", false}});
    AddOp(&p, "scale", {{"X", {"M"}}}, {{"Out", {"S"}}}, {{"scale", 10.0}});
    Executor exe;
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    exe.Run(p, &scope);
    EXPECT_EQ(exe.NumPendingComm(), 0u);  // scale waited for it
    ExpectValues(*scope.GetVar("S"), {10.0 * n}, 0, "scale of the pending max");
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, FrameworkCommStream, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "ranks";
                         });

}  // namespace
}  // namespace testing
}  // namespace paddle_like
