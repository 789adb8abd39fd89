// Asynchronous behaviour: an async op hands control back before it finishes, and memory
// of a tensor dropped while its op is in flight is neither freed nor reused until then.
#include <gtest/gtest.h>

#include <thread>

#include "distributed/process_group_gloo.h"
#include "phi/core/stream_safe_allocator.h"
#include "tests/distributed/collective_test_util.h"
#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

using distributed::ProcessGroupGloo;
using Clock = std::chrono::steady_clock;

int64_t MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

TEST(GlooAsync, AsyncOpOverlapsHostWork) {
  RunRanks(2, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(30));
    pg.Barrier()->Wait();  // both connected
    DenseTensor t = MakeInput(DataType::FLOAT32, 1 << 16, ctx.rank, ReduceOp::SUM);
    if (ctx.rank == 1) {
      // Rank 1 joins late, so rank 0's op cannot finish before this.
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      pg.AllReduce(&t, t, {}, true);
      return;
    }
    auto start = Clock::now();
    auto task = pg.AllReduce(&t, t, {}, /*sync_op=*/false);
    int64_t returned_ms = MsSince(start);
    bool done_at_return = task->IsCompleted();
    // Host work while the op is in flight.
    volatile double acc = 0;
    for (int i = 0; i < 1000000; ++i) acc = acc + i * 0.5;
    bool done_after_work = task->IsCompleted();
    task->Wait();
    int64_t finished_ms = MsSince(start);
    EXPECT_LT(returned_ms, 200) << "the async call blocked";
    EXPECT_FALSE(done_at_return);
    EXPECT_FALSE(done_after_work);
    EXPECT_GE(finished_ms, 300) << "the op finished before the peer joined?";
    EXPECT_TRUE(task->IsCompleted());
    std::vector<Val> ref(t.numel());
    for (int64_t i = 0; i < t.numel(); ++i) ref[i] = ReduceRef(DataType::FLOAT32, ReduceOp::SUM, 2, i, 1.0);
    ExpectClose(t, ref, "async allreduce result");
  });
}

TEST(GlooAsync, DroppedTensorIsNotFreedOrReusedWhileInFlight) {
  RunRanks(2, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(30));
    pg.Barrier()->Wait();
    const int64_t n = 1 << 18;  // 1 MiB of float32: a size nothing else here uses
    if (ctx.rank == 1) {
      DenseTensor t = MakeInput(DataType::FLOAT32, n, ctx.rank, ReduceOp::SUM);
      ctx.store->wait({"rank0_dropped"});
      pg.AllReduce(&t, t, {}, true);
      return;
    }
    auto alloc = phi::memory::GetAllocator(phi::CPUPlace());
    void* block;
    {
      DenseTensor t = MakeInput(DataType::FLOAT32, n, ctx.rank, ReduceOp::SUM);
      block = t.data();
      auto before = alloc->stats();
      pg.AllReduce(&t, t, {}, /*sync_op=*/false);  // task dropped too
      // t goes out of scope here: its owner is gone while the op waits for rank 1.
      (void)before;
    }
    auto s = alloc->stats();
    EXPECT_EQ(s.pending_frees, 1) << "the block was released while its op is in flight";
    EXPECT_GE(s.frees_deferred, 1);
    EXPECT_GE(s.bytes_live, n * 4);
    DenseTensor other(phi::CPUPlace(), DataType::FLOAT32, phi::DDim({n}));
    EXPECT_NE(other.data(), block) << "in-flight memory was handed out again";
    int64_t completed_before = s.deferred_frees_completed;

    ctx.store->set("rank0_dropped", "1");
    pg.GetDeviceContext(phi::CPUPlace())->Wait();  // the comm stream passes the op
    auto after = alloc->stats();
    EXPECT_EQ(after.pending_frees, 0);
    EXPECT_EQ(after.deferred_frees_completed, completed_before + 1);
    DenseTensor reuse(phi::CPUPlace(), DataType::FLOAT32, phi::DDim({n}));
    EXPECT_EQ(reuse.data(), block) << "the block should be reusable once the op completed";
  });
}

TEST(GlooAsync, WaitErasesOnlyItsOwnRecords) {
  RunRanks(2, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(30));
    pg.Barrier()->Wait();
    auto alloc = phi::memory::GetAllocator(phi::CPUPlace());
    const int64_t n = 3 << 16;
    DenseTensor t = MakeInput(DataType::FLOAT32, n, ctx.rank, ReduceOp::SUM);
    void* block = t.data();
    // Task 1 completes; task 2 (same tensor, same stream) is held up by rank 1.
    auto t1 = pg.AllReduce(&t, t, {}, false);
    t1->Wait();
    if (ctx.rank == 1) {
      ctx.store->wait({"go"});
      pg.AllReduce(&t, t, {}, true);
      return;
    }
    auto t2 = pg.AllReduce(&t, t, {}, false);
    t1->Wait();  // waiting again on the finished task must not drop task 2's record
    t = DenseTensor();
    EXPECT_EQ(alloc->stats().pending_frees, 1) << "task 1's Wait erased task 2's record";
    ctx.store->set("go", "1");
    t2->Wait();
    EXPECT_EQ(alloc->stats().pending_frees, 0);
    DenseTensor reuse(phi::CPUPlace(), DataType::FLOAT32, phi::DDim({n}));
    EXPECT_EQ(reuse.data(), block);
  });
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
