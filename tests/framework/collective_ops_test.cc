// Every collective operator through the Executor on real processes and real Gloo, on 1, 2,
// 3 and 4 ranks, against values computed here from what each rank holds. Each op runs on
// the calc stream and on the comm stream (then ordered by c_sync_comm_stream).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "paddle_like/framework/executor.h"
#include "tests/framework/framework_test_util.h"
#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

using framework::Executor;

class FrameworkCollectiveOps : public ::testing::TestWithParam<int> {};

// Rank r's input of `numel` values: distinct across ranks and positions, exact in float64.
std::vector<double> InputOf(int r, int64_t numel) {
  std::vector<double> v(static_cast<size_t>(numel));
  for (int64_t i = 0; i < numel; ++i) v[i] = (r + 1) * (i % 2 ? -1.0 : 1.0) + 0.25 * i;
  return v;
}

// Runs `ops` (built by fn with the stream flag) on a fresh scope holding X, once on the calc
// stream and once on the comm stream followed by c_sync_comm_stream.
template <typename Build, typename Check>
void BothStreams(const DenseTensor& x, Build build, Check check) {
  for (bool calc : {true, false}) {
    Scope scope;
    phi::Copy(x, phi::CPUPlace(), scope.Var("X"));  // in-place ops must not write x itself
    ProgramDesc p;
    build(&p, calc);
    if (!calc) AddOp(&p, "c_sync_comm_stream", {{"X", {"X"}}}, {{"Out", {"X"}}}, {{"ring_id", 0}});
    Executor exe;
    exe.Run(p, &scope);
    EXPECT_EQ(exe.NumPendingComm(), 0u);
    check(scope, calc);
  }
}

TEST_P(FrameworkCollectiveOps, AllReduceFamily) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    InitWorldRing();
    const int r = ctx.rank, n = ctx.world_size;
    const int64_t numel = 6;
    struct Case {
      const char* op;
      double (*fold)(double, double);
      bool avg;
    };
    const Case cases[] = {
        {"c_allreduce_sum", [](double a, double b) { return a + b; }, false},
        {"mp_allreduce_sum", [](double a, double b) { return a + b; }, false},
        {"c_allreduce_max", [](double a, double b) { return std::max(a, b); }, false},
        {"c_allreduce_min", [](double a, double b) { return std::min(a, b); }, false},
        {"c_allreduce_prod", [](double a, double b) { return a * b; }, false},
        {"c_allreduce_avg", [](double a, double b) { return a + b; }, true},
    };
    for (const Case& c : cases) {
      std::vector<double> want = InputOf(0, numel);
      for (int q = 1; q < n; ++q) {
        std::vector<double> in = InputOf(q, numel);
        for (int64_t i = 0; i < numel; ++i) want[i] = c.fold(want[i], in[i]);
      }
      if (c.avg)
        for (auto& w : want) w /= n;
      for (bool in_place : {true, false}) {
        BothStreams(
            Doubles(InputOf(r, numel), DDim({2, 3})),
            [&](ProgramDesc* p, bool calc) {
              AddOp(p, c.op, {{"X", {"X"}}}, {{"Out", {in_place ? "X" : "Out"}}},
                    {{"ring_id", 0}, {"use_calc_stream", calc}});
            },
            [&](Scope& s, bool calc) {
              const DenseTensor& out = *s.GetVar(in_place ? "X" : "Out");
              EXPECT_EQ(out.dims(), DDim({2, 3}));
              ExpectValues(
                  out, want, 1e-15,
                  std::string(c.op) + (calc ? " calc" : " comm") + (in_place ? " in place" : ""));
            });
      }
    }
    // An integer all-reduce.
    Scope scope;
    *scope.Var("i") = Int64s({r, 1}, DDim({2}));
    ProgramDesc p;
    AddOp(&p, "c_allreduce_sum", {{"X", {"i"}}}, {{"Out", {"i"}}}, {{"use_calc_stream", true}});
    Executor().Run(p, &scope);
    EXPECT_EQ(scope.GetVar("i")->ToVector<int64_t>(), (std::vector<int64_t>{n * (n - 1) / 2, n}));
  });
}

TEST_P(FrameworkCollectiveOps, ReduceFamily) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    InitWorldRing();
    const int r = ctx.rank, n = ctx.world_size, root = n - 1;
    const char* ops[] = {"c_reduce_sum", "c_reduce_max", "c_reduce_min", "c_reduce_prod"};
    for (int k = 0; k < 4; ++k) {
      std::vector<double> want = InputOf(0, 4);
      for (int q = 1; q < n; ++q) {
        std::vector<double> in = InputOf(q, 4);
        for (int i = 0; i < 4; ++i) {
          want[i] = k == 0   ? want[i] + in[i]
                    : k == 1 ? std::max(want[i], in[i])
                    : k == 2 ? std::min(want[i], in[i])
                             : want[i] * in[i];
        }
      }
      BothStreams(
          Doubles(InputOf(r, 4), DDim({4})),
          [&](ProgramDesc* p, bool calc) {
            AddOp(p, ops[k], {{"X", {"X"}}}, {{"Out", {"Out"}}},
                  {{"root_id", root}, {"use_calc_stream", calc}});
          },
          [&](Scope& s, bool) {
            ExpectValues(*s.GetVar("Out"), r == root ? want : InputOf(r, 4), 1e-15, ops[k]);
          });
    }
  });
}

TEST_P(FrameworkCollectiveOps, BroadcastAllGatherReduceScatterScatterAllToAll) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    InitWorldRing();
    const int r = ctx.rank, n = ctx.world_size;
    // c_broadcast from the last rank.
    BothStreams(
        Doubles(InputOf(r, 3), DDim({3})),
        [&](ProgramDesc* p, bool calc) {
          AddOp(p, "c_broadcast", {{"X", {"X"}}}, {{"Out", {"X"}}},
                {{"root", n - 1}, {"use_calc_stream", calc}});
        },
        [&](Scope& s, bool) { ExpectValues(*s.GetVar("X"), InputOf(n - 1, 3), 0, "c_broadcast"); });
    // c_allgather: [2, 3] -> [2n, 3], rank q's rows at 2q.
    std::vector<double> gathered;
    for (int q = 0; q < n; ++q) {
      auto v = InputOf(q, 6);
      gathered.insert(gathered.end(), v.begin(), v.end());
    }
    BothStreams(
        Doubles(InputOf(r, 6), DDim({2, 3})),
        [&](ProgramDesc* p, bool calc) {
          AddOp(p, "c_allgather", {{"X", {"X"}}}, {{"Out", {"Out"}}},
                {{"nranks", n}, {"use_calc_stream", calc}});
        },
        [&](Scope& s, bool) {
          EXPECT_EQ(s.GetVar("Out")->dims(), DDim({2 * n, 3}));
          ExpectValues(*s.GetVar("Out"), gathered, 0, "c_allgather");
        });
    // c_reducescatter: [2n, 2] -> [2, 2], the sum of every rank's block r.
    std::vector<double> rs(4, 0.0);
    for (int q = 0; q < n; ++q) {
      auto v = InputOf(q, 4 * n);
      for (int i = 0; i < 4; ++i) rs[i] += v[4 * r + i];
    }
    BothStreams(
        Doubles(InputOf(r, 4 * n), DDim({2 * n, 2})),
        [&](ProgramDesc* p, bool calc) {
          AddOp(p, "c_reducescatter", {{"X", {"X"}}}, {{"Out", {"X"}}},
                {{"nranks", n}, {"use_calc_stream", calc}});
        },
        [&](Scope& s, bool) {
          EXPECT_EQ(s.GetVar("X")->dims(), DDim({2, 2}));
          ExpectValues(*s.GetVar("X"), rs, 1e-15, "c_reducescatter");
        });
    // c_scatter from rank 0: block r of root's X.
    std::vector<double> root_in = InputOf(0, 4 * n);
    BothStreams(
        Doubles(InputOf(r, 4 * n), DDim({2 * n, 2})),
        [&](ProgramDesc* p, bool calc) {
          AddOp(p, "c_scatter", {{"X", {"X"}}}, {{"Out", {"Out"}}},
                {{"root", 0}, {"nranks", n}, {"use_calc_stream", calc}});
        },
        [&](Scope& s, bool) {
          EXPECT_EQ(s.GetVar("Out")->dims(), DDim({2, 2}));
          ExpectValues(*s.GetVar("Out"),
                       std::vector<double>(root_in.begin() + 4 * r, root_in.begin() + 4 * r + 4), 0,
                       "c_scatter");
        });
    // alltoall: Out's block q is rank q's block r (in place: the op keeps them apart).
    std::vector<double> a2a;
    for (int q = 0; q < n; ++q) {
      auto v = InputOf(q, 2 * n);
      a2a.push_back(v[2 * r]);
      a2a.push_back(v[2 * r + 1]);
    }
    BothStreams(
        Doubles(InputOf(r, 2 * n), DDim({n, 2})),
        [&](ProgramDesc* p, bool calc) {
          AddOp(p, "alltoall", {{"X", {"X"}}}, {{"Out", {"X"}}}, {{"use_calc_stream", calc}});
        },
        [&](Scope& s, bool) { ExpectValues(*s.GetVar("X"), a2a, 0, "alltoall"); });
  });
}

TEST_P(FrameworkCollectiveOps, ConcatSplitIdentity) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    InitWorldRing();
    const int r = ctx.rank, n = ctx.world_size;
    // c_concat: [2, 3] per rank -> [2, 3n]: row i is every rank's row i in rank order.
    std::vector<double> want;
    for (int i = 0; i < 2; ++i) {
      for (int q = 0; q < n; ++q) {
        auto v = InputOf(q, 6);
        want.insert(want.end(), v.begin() + 3 * i, v.begin() + 3 * i + 3);
      }
    }
    BothStreams(
        Doubles(InputOf(r, 6), DDim({2, 3})),
        [&](ProgramDesc* p, bool calc) {
          AddOp(p, "c_concat", {{"X", {"X"}}}, {{"Out", {"cat"}}},
                {{"rank", r}, {"nranks", n}, {"use_calc_stream", calc}});
          AddOp(p, "c_split", {{"X", {"cat"}}}, {{"Out", {"back"}}}, {{"rank", r}, {"nranks", n}});
          AddOp(p, "c_identity", {{"X", {"back"}}}, {{"Out", {"id"}}}, {{"use_calc_stream", calc}});
        },
        [&](Scope& s, bool) {
          EXPECT_EQ(s.GetVar("cat")->dims(), DDim({2, 3 * n}));
          ExpectValues(*s.GetVar("cat"), want, 0, "c_concat");
          ExpectValues(*s.GetVar("back"), InputOf(r, 6), 0, "c_split of c_concat");
          ExpectValues(*s.GetVar("id"), InputOf(r, 6), 0, "c_identity");
        });
  });
}

// send_v2 / recv_v2 around the ring (fixed and dynamic shapes), partial_send /
// partial_recv in two halves, partial_allgather, barrier and the stream syncs.
TEST_P(FrameworkCollectiveOps, PointToPointAndSync) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    InitWorldRing();
    const int r = ctx.rank, n = ctx.world_size;
    for (bool calc : {true, false}) {
      if (n > 1) {
        const int next = (r + 1) % n, prev = (r + n - 1) % n;
        Scope scope;
        *scope.Var("X") = Doubles(InputOf(r, 6), DDim({2, 3}));
        *scope.Var("Y") = Doubles(InputOf(r + 10, 4 + r), DDim({4 + r}));
        ProgramDesc send, recv;
        AddOp(&send, "send_v2", {{"X", {"X"}}}, {}, {{"peer", next}, {"use_calc_stream", calc}});
        AddOp(&send, "send_v2", {{"X", {"Y"}}}, {},
              {{"peer", next}, {"dynamic_shape", true}, {"use_calc_stream", calc}});
        AddOp(&send, "partial_send", {{"X", {"X"}}}, {},
              {{"peer", next}, {"num", 2}, {"id", 1}, {"use_calc_stream", calc}});
        AddOp(&send, "partial_send", {{"X", {"X"}}}, {},
              {{"peer", next}, {"num", 2}, {"id", 0}, {"use_calc_stream", calc}});
        AddOp(&recv, "recv_v2", {}, {{"Out", {"R"}}},
              {{"peer", prev},
               {"out_shape", std::vector<int>{2, 3}},
               {"dtype", kFP64},
               {"use_calc_stream", calc}});
        AddOp(
            &recv, "recv_v2", {}, {{"Out", {"D"}}},
            {{"peer", prev}, {"dynamic_shape", true}, {"dtype", kFP64}, {"use_calc_stream", calc}});
        for (int id : {1, 0}) {
          AddOp(&recv, "partial_recv", {}, {{"Out", {"P"}}},
                {{"peer", prev},
                 {"num", 2},
                 {"id", id},
                 {"out_shape", std::vector<int>{2, 3}},
                 {"dtype", kFP64},
                 {"use_calc_stream", calc}});
        }
        AddOp(&recv, "c_sync_comm_stream", {}, {}, {{"ring_id", 0}});
        Executor exe;
        // Even ranks send first, odd ranks receive first: no rank waits on itself.
        if (r % 2 == 0) {
          exe.Run(send, &scope);
          exe.Run(recv, &scope);
        } else {
          exe.Run(recv, &scope);
          exe.Run(send, &scope);
        }
        exe.WaitPendingComm();
        ExpectValues(*scope.GetVar("R"), InputOf(prev, 6), 0, "recv_v2");
        EXPECT_EQ(scope.GetVar("D")->dims(), DDim({4 + prev}));
        ExpectValues(*scope.GetVar("D"), InputOf(prev + 10, 4 + prev), 0, "recv_v2 dynamic");
        ExpectValues(*scope.GetVar("P"), InputOf(prev, 6), 0, "partial_recv both halves");
      }
      // partial_allgather: rank q's part q of every rank's X.
      Scope scope;
      std::vector<double> mine(2 * n, -1.0), want;
      for (int q = 0; q < n; ++q) {
        want.push_back(100.0 * q);
        want.push_back(100.0 * q + 1);
      }
      mine[2 * r] = 100.0 * r;
      mine[2 * r + 1] = 100.0 * r + 1;
      *scope.Var("X") = Doubles(mine, DDim({n, 2}));
      ProgramDesc p;
      AddOp(&p, "partial_allgather", {{"X", {"X"}}}, {{"Out", {"X"}}},
            {{"nranks", n}, {"rank", r}, {"use_calc_stream", calc}});
      AddOp(&p, "partial_allgather", {{"X", {"X"}}}, {{"Out", {"again"}}},
            {{"num", n}, {"id", r}, {"use_calc_stream", calc}});  // the num / id spelling
      AddOp(&p, "c_sync_comm_stream", {{"X", {"X"}}}, {{"Out", {"X"}}}, {{"ring_id", 0}});
      AddOp(&p, "barrier", {{"X", {"X"}}}, {{"Out", {"B"}}}, {{"ring_id", 0}});
      AddOp(&p, "c_sync_calc_stream", {{"X", {"X"}}}, {{"Out", {"C"}}});
      Executor().Run(p, &scope);
      ExpectValues(*scope.GetVar("X"), want, 0, "partial_allgather");
      ExpectValues(*scope.GetVar("again"), want, 0, "partial_allgather of a full tensor");
      ExpectValues(*scope.GetVar("C"), want, 0, "c_sync_calc_stream passes X through");
    }
  });
}

// c_embedding + c_allreduce_sum against lookup_table_v2 on the whole table, and
// c_softmax_with_cross_entropy against softmax_with_cross_entropy on the whole logits (one
// ignored label), forward and gradient.
TEST_P(FrameworkCollectiveOps, VocabParallelEmbeddingAndSoftmaxCrossEntropy) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    InitWorldRing();
    const int r = ctx.rank, n = ctx.world_size;
    const int64_t vocab = 12, d = 3, rows = 5, shard = vocab / n;
    if (vocab % n != 0) return;  // 12 splits over 1, 2, 3 and 4 ranks
    DenseTensor table = RandomTensor(DDim({vocab, d}), 7);
    DenseTensor logits = RandomTensor(DDim({rows, vocab}), 8);
    DenseTensor ids = Int64s({0, 11, 5, 6, 3}, DDim({rows}));
    DenseTensor label = Int64s({11, 0, -100, 6, 4}, DDim({rows, 1}));
    DenseTensor dout = RandomTensor(DDim({rows, d}), 9);
    DenseTensor dloss = RandomTensor(DDim({rows, 1}), 10);

    Scope dense;
    *dense.Var("W") = table;
    *dense.Var("Ids") = ids;
    *dense.Var("L") = logits;
    *dense.Var("Label") = label;
    *dense.Var("dOut") = dout;
    *dense.Var("dLoss") = dloss;
    ProgramDesc dp;
    AddOp(&dp, "lookup_table_v2", {{"W", {"W"}}, {"Ids", {"Ids"}}}, {{"Out", {"E"}}});
    AddOp(&dp, "lookup_table_v2_grad", {{"W", {"W"}}, {"Ids", {"Ids"}}, {"Out@GRAD", {"dOut"}}},
          {{"W@GRAD", {"dW"}}});
    AddOp(&dp, "softmax_with_cross_entropy", {{"Logits", {"L"}}, {"Label", {"Label"}}},
          {{"Softmax", {"S"}}, {"Loss", {"Loss"}}});
    AddOp(&dp, "softmax_with_cross_entropy_grad",
          {{"Label", {"Label"}}, {"Softmax", {"S"}}, {"Loss@GRAD", {"dLoss"}}},
          {{"Logits@GRAD", {"dL"}}});
    Executor exe;
    exe.Run(dp, &dense);

    Scope tp;
    *tp.Var("W") = Rows(table, r * shard, (r + 1) * shard);
    *tp.Var("Ids") = ids;
    *tp.Var("L") = Cols(logits, r * shard, (r + 1) * shard);
    *tp.Var("Label") = label;
    *tp.Var("dOut") = dout;
    *tp.Var("dLoss") = dloss;
    ProgramDesc p;
    AddOp(&p, "c_embedding", {{"W", {"W"}}, {"Ids", {"Ids"}}}, {{"Out", {"Epart"}}},
          {{"start_index", int64_t{r * shard}}, {"vocab_size", int64_t{vocab}}});
    AddOp(&p, "c_allreduce_sum", {{"X", {"Epart"}}}, {{"Out", {"E"}}}, {{"use_calc_stream", true}});
    AddOp(&p, "c_embedding_grad", {{"W", {"W"}}, {"Ids", {"Ids"}}, {"Out@GRAD", {"dOut"}}},
          {{"W@GRAD", {"dW"}}}, {{"start_index", int64_t{r * shard}}});
    AddOp(&p, "c_softmax_with_cross_entropy", {{"Logits", {"L"}}, {"Label", {"Label"}}},
          {{"Softmax", {"S"}}, {"Loss", {"Loss"}}}, {{"rank", r}, {"nranks", n}});
    AddOp(&p, "c_softmax_with_cross_entropy_grad",
          {{"Label", {"Label"}}, {"Softmax", {"S"}}, {"Loss@GRAD", {"dLoss"}}},
          {{"Logits@GRAD", {"dL"}}}, {{"rank", r}, {"nranks", n}});
    exe.Run(p, &tp);
    const double tol = 1e-13;
    ExpectClose(*tp.GetVar("E"), *dense.GetVar("E"), tol, "vocab-parallel embedding");
    ExpectClose(*tp.GetVar("dW"), Rows(*dense.GetVar("dW"), r * shard, (r + 1) * shard), tol,
                "embedding grad shard");
    ExpectClose(*tp.GetVar("Loss"), *dense.GetVar("Loss"), tol, "vocab-parallel loss");
    ExpectClose(*tp.GetVar("S"), Cols(*dense.GetVar("S"), r * shard, (r + 1) * shard), tol,
                "softmax shard");
    ExpectClose(*tp.GetVar("dL"), Cols(*dense.GetVar("dL"), r * shard, (r + 1) * shard), tol,
                "logits grad shard");
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, FrameworkCollectiveOps, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "ranks";
                         });

}  // namespace
}  // namespace testing
}  // namespace paddle_like
