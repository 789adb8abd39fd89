// Every Gloo collective on world sizes 1-4, every dtype and valid reduce op, in-place and
// out-of-place, checked against an independent reference. Real processes, real TCPStore,
// on both CPU transports: the shared-memory segment (the default on one host) and real Gloo
// over loopback TCP (FLAGS_cpu_shm_transport off).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "distributed/process_group_gloo.h"
#include "phi/core/flags.h"
#include "tests/distributed/collective_test_util.h"
#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

using distributed::AllreduceOptions;
using distributed::ProcessGroupGloo;

std::shared_ptr<ProcessGroupGloo> MakeGroup(const RankContext& ctx, int gid = 0,
                                            std::chrono::milliseconds timeout =
                                                std::chrono::seconds(60)) {
  return std::make_shared<ProcessGroupGloo>(ctx.store, ctx.rank, ctx.world_size, gid, timeout);
}

std::string Tag(const char* op, DataType dt, ReduceOp rop, bool in_place, bool async) {
  return std::string(op) + "/" + phi::DataTypeToString(dt) + "/" +
         phi::distributed::ReduceOpToString(rop) + (in_place ? "/in-place" : "/out-of-place") +
         (async ? "/async" : "/sync");
}

// (world size, shared memory on): the ranks are forked, so they inherit the flag.
class GlooCollectives : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  void SetUp() override { FLAGS_cpu_shm_transport = std::get<1>(GetParam()); }
  void TearDown() override { FLAGS_cpu_shm_transport = true; }
  int World() const { return std::get<0>(GetParam()); }
};

TEST_P(GlooCollectives, AllReduceEveryDtypeAndOp) {
  RunRanks(World(), [](const RankContext& ctx) {
    auto pg = MakeGroup(ctx);
    // 37: the fused exchange. 140001 (odd: the halves differ) is above its capacity for
    // every dtype but bool: the two-rank all-reduce on two ranks, Gloo's algorithms
    // on more.
    for (const int64_t n : {int64_t{37}, int64_t{140001}}) {
      int variant = 0;
      for (DataType dt : AllDtypes()) {
        for (ReduceOp op : AllReduceOps()) {
          const double premul = phi::IsIntegral(dt) ? 3.0 : 0.5;
          AllreduceOptions opts{op, premul};
          DenseTensor in = MakeInput(dt, n, ctx.rank, op);
          if (!OpSupported(op, dt)) {
            DenseTensor out;
            EXPECT_THROW(pg->AllReduce(&out, in, opts, true), phi::InvalidArgumentError)
                << Tag("allreduce", dt, op, false, false);
            continue;
          }
          std::vector<Val> ref(n);
          for (int64_t i = 0; i < n; ++i) ref[i] = ReduceRef(dt, op, ctx.world_size, i, premul);
          // Alternate in-place/out-of-place, sync/async, comm/calc stream.
          bool in_place = variant % 2 == 0, async = (variant / 2) % 2 == 1;
          bool calc = variant % 3 == 2;
          ++variant;
          DenseTensor out = in_place ? in : DenseTensor();
          auto task = pg->AllReduce(&out, in, opts, !async, calc);
          if (async) task->Wait();
          EXPECT_TRUE(task->IsCompleted());
          ExpectClose(out, ref, Tag("allreduce", dt, op, in_place, async));
          if (!in_place) {  // the input is untouched
            std::vector<Val> orig(n);
            for (int64_t i = 0; i < n; ++i) orig[i] = InputVal(dt, ctx.rank, i, op);
            ExpectClose(in, orig, "allreduce input preserved");
          }
        }
      }
    }
  });
}

TEST_P(GlooCollectives, BroadcastReduceEveryRoot) {
  RunRanks(World(), [](const RankContext& ctx) {
    auto pg = MakeGroup(ctx);
    const int64_t n = 19;
    for (DataType dt : AllDtypes()) {
      for (int root = 0; root < ctx.world_size; ++root) {
        // Broadcast, out-of-place then in-place.
        DenseTensor in = MakeInput(dt, n, ctx.rank, ReduceOp::SUM);
        DenseTensor out;
        pg->Broadcast(&out, in, {root, 0}, true);
        std::vector<Val> ref(n);
        for (int64_t i = 0; i < n; ++i) ref[i] = InputVal(dt, root, i, ReduceOp::SUM);
        ExpectClose(out, ref, "broadcast out-of-place root " + std::to_string(root));
        DenseTensor inplace = MakeInput(dt, n, ctx.rank, ReduceOp::SUM);
        pg->Broadcast(&inplace, inplace, {root, 0}, false)->Wait();
        ExpectClose(inplace, ref, "broadcast in-place root " + std::to_string(root));

        // Reduce to this root with every valid op.
        for (ReduceOp op : AllReduceOps()) {
          if (!OpSupported(op, dt)) continue;
          const double premul = phi::IsIntegral(dt) ? 3.0 : 0.5;
          DenseTensor rin = MakeInput(dt, n, ctx.rank, op);
          DenseTensor rout;
          pg->Reduce(&rout, rin, {op, premul, root}, true);
          if (ctx.rank == root) {
            std::vector<Val> rref(n);
            for (int64_t i = 0; i < n; ++i) rref[i] = ReduceRef(dt, op, ctx.world_size, i, premul);
            ExpectClose(rout, rref, Tag("reduce", dt, op, false, false));
          }
        }
      }
    }
  });
}

TEST_P(GlooCollectives, AllGatherReduceScatterWholeAndPartial) {
  RunRanks(World(), [](const RankContext& ctx) {
    auto pg = MakeGroup(ctx);
    const int ws = ctx.world_size;
    for (DataType dt : AllDtypes()) {
      // Whole tensor.
      const int64_t n = 11;
      DenseTensor in = MakeInput(dt, n, ctx.rank, ReduceOp::SUM);
      DenseTensor out;
      pg->AllGather(&out, in, true);
      std::vector<Val> ref;
      for (int r = 0; r < ws; ++r)
        for (int64_t i = 0; i < n; ++i) ref.push_back(InputVal(dt, r, i, ReduceOp::SUM));
      ExpectClose(out, ref, std::string("allgather ") + phi::DataTypeToString(dt));

      // Partial input: elements [3, 3 + 5).
      DenseTensor pout;
      pg->AllGather(&pout, in, 3, 5, false)->Wait();
      std::vector<Val> pref;
      for (int r = 0; r < ws; ++r)
        for (int64_t i = 3; i < 8; ++i) pref.push_back(InputVal(dt, r, i, ReduceOp::SUM));
      ExpectClose(pout, pref, std::string("allgather partial ") + phi::DataTypeToString(dt));

      // ReduceScatter: block r of the reduction lands on rank r.
      for (ReduceOp op : AllReduceOps()) {
        if (!OpSupported(op, dt)) continue;
        const double premul = phi::IsIntegral(dt) ? 3.0 : 0.5;
        const int64_t block = 6;
        DenseTensor rin = MakeInput(dt, block * ws, ctx.rank, op);
        DenseTensor rout;
        pg->ReduceScatter(&rout, rin, {op, premul}, true);
        std::vector<Val> rref(block);
        for (int64_t i = 0; i < block; ++i)
          rref[i] = ReduceRef(dt, op, ws, ctx.rank * block + i, premul);
        ExpectClose(rout, rref, Tag("reducescatter", dt, op, false, false));
      }
    }
  });
}

TEST_P(GlooCollectives, ScatterGatherTensorAndList) {
  RunRanks(World(), [](const RankContext& ctx) {
    auto pg = MakeGroup(ctx);
    const int ws = ctx.world_size;
    const int64_t n = 7;
    for (DataType dt : AllDtypes()) {
      for (int root = 0; root < ws; ++root) {
        // Scatter: root holds ws blocks; rank r gets block r.
        DenseTensor in = MakeInput(dt, n * ws, ctx.rank, ReduceOp::SUM, root);
        DenseTensor out(phi::CPUPlace(), dt, phi::DDim({n}));
        pg->Scatter(&out, in, {root}, true);
        std::vector<Val> sref(n);
        for (int64_t i = 0; i < n; ++i)
          sref[i] = InputVal(dt, root, ctx.rank * n + i, ReduceOp::SUM, root);
        ExpectClose(out, sref, "scatter root " + std::to_string(root));

        // Gather into one tensor, then into a list.
        DenseTensor gin = MakeInput(dt, n, ctx.rank, ReduceOp::SUM, root);
        DenseTensor gout;
        pg->Gather(&gout, gin, {root}, false)->Wait();
        std::vector<DenseTensor> glist;
        pg->Gather(&glist, gin, {root}, true);
        if (ctx.rank == root) {
          std::vector<Val> gref;
          for (int r = 0; r < ws; ++r)
            for (int64_t i = 0; i < n; ++i) gref.push_back(InputVal(dt, r, i, ReduceOp::SUM, root));
          ExpectClose(gout, gref, "gather root " + std::to_string(root));
          ASSERT_EQ(static_cast<int>(glist.size()), ws);
          for (int r = 0; r < ws; ++r) {
            std::vector<Val> lref(gref.begin() + r * n, gref.begin() + (r + 1) * n);
            ExpectClose(glist[r], lref, "gather list entry " + std::to_string(r));
          }
        }
      }
    }
  });
}

TEST_P(GlooCollectives, AllToAllEqualUnequalAndList) {
  RunRanks(World(), [](const RankContext& ctx) {
    auto pg = MakeGroup(ctx);
    const int ws = ctx.world_size, me = ctx.rank;
    for (DataType dt : {DataType::FLOAT32, DataType::INT64, DataType::FLOAT16, DataType::BOOL,
                        DataType::COMPLEX128, DataType::UINT8}) {
      // Equal split, 2 rows of 3 per peer. Element value encodes (sender, index).
      const int64_t cols = 3, rows = 2 * ws;
      DenseTensor in = MakeInput(dt, rows * cols, me, ReduceOp::SUM);
      in.Resize(phi::DDim({rows, cols}));
      DenseTensor out;
      pg->AllToAll(&out, in, {}, {}, true);
      std::vector<Val> ref;
      for (int r = 0; r < ws; ++r)
        for (int64_t i = 0; i < 2 * cols; ++i)
          ref.push_back(InputVal(dt, r, me * 2 * cols + i, ReduceOp::SUM));
      ExpectClose(out, ref, std::string("alltoall equal ") + phi::DataTypeToString(dt));

      // Unequal: rank s sends (s + d) % 3 rows to rank d (zero-size parts included).
      auto rows_from_to = [](int s, int d) { return static_cast<int64_t>((s + d) % 3); };
      std::vector<int64_t> in_splits(ws), out_splits(ws);
      int64_t in_rows = 0, out_rows = 0;
      for (int r = 0; r < ws; ++r) {
        in_splits[r] = rows_from_to(me, r);
        out_splits[r] = rows_from_to(r, me);
        in_rows += in_splits[r];
        out_rows += out_splits[r];
      }
      DenseTensor uin = MakeInput(dt, in_rows * cols, me, ReduceOp::SUM, 1);
      uin.Resize(phi::DDim({in_rows, cols}));
      DenseTensor uout(phi::CPUPlace(), dt, phi::DDim({out_rows, cols}));
      pg->AllToAll(&uout, uin, out_splits, in_splits, false)->Wait();
      std::vector<Val> uref;
      for (int s = 0; s < ws; ++s) {
        int64_t start = 0;
        for (int d = 0; d < me; ++d) start += rows_from_to(s, d);
        for (int64_t i = 0; i < rows_from_to(s, me) * cols; ++i)
          uref.push_back(InputVal(dt, s, start * cols + i, ReduceOp::SUM, 1));
      }
      ExpectClose(uout, uref, std::string("alltoall unequal ") + phi::DataTypeToString(dt));

      // List form: ins[d] has d + 1 elements.
      std::vector<DenseTensor> ins, outs;
      for (int d = 0; d < ws; ++d) ins.push_back(MakeInput(dt, d + 1, me, ReduceOp::SUM, d));
      for (int s = 0; s < ws; ++s) outs.emplace_back(phi::CPUPlace(), dt, phi::DDim({me + 1}));
      pg->AllToAll(&outs, ins, true, false);
      for (int s = 0; s < ws; ++s) {
        std::vector<Val> lref;
        for (int64_t i = 0; i <= me; ++i) lref.push_back(InputVal(dt, s, i, ReduceOp::SUM, me));
        ExpectClose(outs[s], lref, "alltoall list from " + std::to_string(s));
      }
    }
  });
}

TEST_P(GlooCollectives, SendRecvPartialTagsAnySourceAndCrossedBatches) {
  RunRanks(World(), [](const RankContext& ctx) {
    auto pg = MakeGroup(ctx);
    const int ws = ctx.world_size, me = ctx.rank;
    if (ws == 1) {
      pg->Barrier()->Wait();
      return;
    }
    const int next = (me + 1) % ws, prev = (me + ws - 1) % ws;
    for (DataType dt : AllDtypes()) {
      // Ring with partial tensors: send elements [2, 7) into the peer's [4, 9).
      DenseTensor src = MakeInput(dt, 10, me, ReduceOp::SUM);
      DenseTensor dst = MakeInput(dt, 12, 100, ReduceOp::SUM);
      pg->StartCoalescing();
      pg->Send(src, next, 2, 5, false, false);
      pg->Recv(&dst, prev, 4, 5, false, false);
      pg->EndCoalescing()->Wait();
      std::vector<Val> ref;
      for (int64_t i = 0; i < 12; ++i) {
        bool mine = i >= 4 && i < 9;
        ref.push_back(mine ? InputVal(dt, prev, i - 2, ReduceOp::SUM)
                           : InputVal(dt, 100, i, ReduceOp::SUM));
      }
      ExpectClose(dst, ref, std::string("ring partial ") + phi::DataTypeToString(dt));
    }
    // Crossed order in one batch: every rank sends to all others first, then receives, with
    // two tags each; receives are posted in reverse order of the sends.
    std::vector<DenseTensor> outs, ins;
    pg->GroupStart();
    for (int r = 0; r < ws; ++r) {
      if (r == me) continue;
      for (int tag = 0; tag < 2; ++tag) {
        outs.push_back(MakeInput(DataType::FLOAT32, 64, me, ReduceOp::SUM, tag * 10 + r));
        pg->Send(outs.back(), r, 0, -1, false, false, {tag});
      }
    }
    std::vector<std::pair<int, int>> recv_from;
    for (int r = ws - 1; r >= 0; --r) {
      if (r == me) continue;
      for (int tag = 1; tag >= 0; --tag) {
        ins.emplace_back(phi::CPUPlace(), DataType::FLOAT32, phi::DDim({64}));
        recv_from.emplace_back(r, tag);
      }
    }
    for (size_t k = 0; k < ins.size(); ++k)
      pg->Recv(&ins[k], recv_from[k].first, 0, -1, false, false, {recv_from[k].second});
    pg->GroupEnd()->Wait();
    for (size_t k = 0; k < ins.size(); ++k) {
      auto [r, tag] = recv_from[k];
      std::vector<Val> ref;
      for (int64_t i = 0; i < 64; ++i)
        ref.push_back(InputVal(DataType::FLOAT32, r, i, ReduceOp::SUM, tag * 10 + me));
      ExpectClose(ins[k], ref, "crossed batch from " + std::to_string(r) + " tag " +
                                   std::to_string(tag));
    }
    // Receive from any source: rank 0 collects one message from each other rank.
    if (me == 0) {
      std::vector<bool> seen(ws, false);
      for (int k = 1; k < ws; ++k) {
        DenseTensor t(phi::CPUPlace(), DataType::INT32, phi::DDim({1}));
        auto task = pg->Recv(&t, distributed::kAnySource, true);
        int from = task->source_rank();
        ASSERT_GT(from, 0);
        EXPECT_EQ(t.data<int32_t>()[0], 1000 + from);
        seen[from] = true;
      }
      for (int r = 1; r < ws; ++r) EXPECT_TRUE(seen[r]) << "nothing from rank " << r;
    } else {
      auto t = DenseTensor::FromVector<int32_t>({1000 + me});
      pg->Send(t, 0, true);
    }
    pg->Barrier()->Wait();
  });
}

TEST_P(GlooCollectives, CoalescedFiftyMixedSizeAllReduces) {
  RunRanks(World(), [](const RankContext& ctx) {
    auto pg = MakeGroup(ctx);
    std::vector<DenseTensor> ins, outs;
    std::vector<DataType> dts;
    std::vector<ReduceOp> ops;
    std::vector<ProcessGroupGloo::TaskPtr> tasks;
    pg->StartCoalescing();
    for (int k = 0; k < 50; ++k) {
      DataType dt = k % 3 == 0 ? DataType::FLOAT32 : (k % 3 == 1 ? DataType::INT64 : DataType::FLOAT64);
      ReduceOp op = k % 4 == 0 ? ReduceOp::MAX : (k % 4 == 1 ? ReduceOp::AVG : ReduceOp::SUM);
      int64_t n = 1 + (k * 37) % 300;
      ins.push_back(MakeInput(dt, n, ctx.rank, op, k));
      outs.emplace_back();
      dts.push_back(dt);
      ops.push_back(op);
    }
    for (int k = 0; k < 50; ++k) {
      tasks.push_back(pg->AllReduce(k % 2 ? &ins[k] : &outs[k], ins[k], {ops[k], 1.0}, false));
    }
    auto group = pg->EndCoalescing();
    group->Wait();
    for (int k = 0; k < 50; ++k) {
      EXPECT_TRUE(tasks[k]->IsCompleted());
      const DenseTensor& res = k % 2 ? ins[k] : outs[k];
      std::vector<Val> ref(res.numel());
      for (int64_t i = 0; i < res.numel(); ++i)
        ref[i] = ReduceRef(dts[k], ops[k], ctx.world_size, i, 1.0, k);
      ExpectClose(res, ref, "coalesced op " + std::to_string(k));
    }
  });
}

// Every path of the all-reduce: the fused exchange (small), and above it, by default, the
// chunked exchange on two ranks, Gloo's halving-doubling (1.2 MB) and its ring (from 4 MiB)
// on more; and Gloo's ring and halving-doubling on every world size when
// FLAGS_gloo_allreduce_algo fixes one. Each against the reference, and with the same bits on
// every rank (each element must be reduced once, in one order, whatever the path). The paths
// chosen by size run once more with spinning off (FLAGS_gloo_spin_us=0: every wait blocks).
TEST_P(GlooCollectives, AllReduceEveryPathSameBitsOnEveryRank) {
  RunRanks(World(), [](const RankContext& ctx) {
    int gid = 0;
    const std::pair<const char*, int> passes[] = {
        {"auto", 1000}, {"auto", 0}, {"ring", 1000}, {"halving_doubling", 1000}};
    for (const auto& [algo, spin_us] : passes) {
      FLAGS_gloo_allreduce_algo = algo;  // read when the communicator is made
      FLAGS_gloo_spin_us = spin_us;      // read by every wait
      auto pg = MakeGroup(ctx, gid++);
      for (int64_t bytes : {int64_t{148}, int64_t{300} << 12, (int64_t{4} << 20) + 4096}) {
        for (DataType dt : {DataType::FLOAT32, DataType::INT64}) {
          for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MAX}) {
            const int64_t n = bytes / static_cast<int64_t>(phi::SizeOf(dt));
            const std::string what = std::string(algo) + "/spin " + std::to_string(spin_us) +
                                     "/" +
                                     Tag("allreduce", dt, op, true, false) + "/" +
                                     std::to_string(bytes) + " bytes";
            DenseTensor t = MakeInput(dt, n, ctx.rank, op, 7);
            pg->AllReduce(&t, t, {op, 1.0}, true);
            std::vector<Val> ref(n);
            for (int64_t i = 0; i < n; ++i) ref[i] = ReduceRef(dt, op, ctx.world_size, i, 1.0, 7);
            ExpectClose(t, ref, what);
            // The bits: rank 0's result against everyone's, through a broadcast of it.
            DenseTensor zeros = MakeInput(dt, n, ctx.rank, op, 7);
            DenseTensor root = ctx.rank == 0 ? t : zeros;
            pg->Broadcast(&root, root, {0}, true);
            EXPECT_EQ(std::memcmp(root.data(), t.data(), static_cast<size_t>(bytes)), 0)
                << what << ": rank " << ctx.rank << " has other bits than rank 0";
          }
        }
      }
    }
    FLAGS_gloo_allreduce_algo = "auto";
    FLAGS_gloo_spin_us = 1000;
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, GlooCollectives,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<int, bool>>& i) {
                           return "world" + std::to_string(std::get<0>(i.param)) +
                                  (std::get<1>(i.param) ? "_shm" : "_tcp");
                         });

}  // namespace
}  // namespace testing
}  // namespace paddle_like
