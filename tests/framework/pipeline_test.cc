// A two-stage pipeline as Programs: activations go forward and their gradients come back
// with send_v2 / recv_v2 (fixed and dynamic shapes, on the comm stream), over several
// micro-batches in GPipe order (stage 0 runs every forward, then every backward). Gradients
// accumulate over micro-batches; on 4 ranks two pipelines ({0,1}, {2,3}) train on different
// data and average their gradients over data-parallel rings ({0,2}, {1,3}) with
// c_allreduce_avg. Every send and receive is on the comm stream, as in Paddle's pipeline
// (the consumer of a received tensor waits for it): a calc-stream receive is ordered after
// this rank's pending sends, and a Gloo send completes only when its receive is posted, so
// calc-stream receives in GPipe order would wait on each other. Loss and every parameter gradient
// must equal the dense model run in one process over the whole batch, within 1e-12 relative in
// float64. (One rank cannot hold a two-stage pipeline: the test runs on 2 and 4.)
//
//   stage 0: h = gelu(x W0 + b0)          stage 1: L = mean(CE(h W1 + b1, label))
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "paddle_like/framework/executor.h"
#include "paddle_like/operators/comm_ring.h"
#include "tests/framework/framework_test_util.h"
#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

using framework::Executor;

constexpr int64_t kIn = 5, kHidden = 4, kClasses = 3, kMicro = 3, kMicroBatches = 4;
constexpr int kPipeRing = 1, kDataRing = 2;
constexpr double kTol = 1e-12;

std::string Mb(const std::string& name, int m) { return name + "_" + std::to_string(m); }

// Micro-batch m of replica d: inputs and labels.
DenseTensor InputOf(int d, int m) { return RandomTensor(DDim({kMicro, kIn}), 1000 + 10 * d + m); }
DenseTensor LabelOf(int d, int m) {
  std::vector<int64_t> l;
  for (int64_t i = 0; i < kMicro; ++i) l.push_back((d * 7 + m * 3 + i) % kClasses);
  return Int64s(l, DDim({kMicro}));
}

void AddZeros(ProgramDesc* p, const std::string& name, std::vector<int64_t> shape) {
  AddOp(p, "fill_constant", {}, {{"Out", {name}}},
        {{"shape", shape}, {"dtype", kFP64}, {"value", 0.0}});
}
void AddAccumulate(ProgramDesc* p, const std::string& acc, const std::string& part) {
  AddOp(p, "sum", {{"X", {acc, part}}}, {{"Out", {acc}}});
}

// Stage 0's forward of micro-batch m: ends by sending h to stage 1.
void Stage0Forward(ProgramDesc* p, int m) {
  AddOp(p, "matmul_v2", {{"X", {Mb("x", m)}}, {"Y", {"w0"}}}, {{"Out", {Mb("z", m)}}});
  AddOp(p, "elementwise_add", {{"X", {Mb("z", m)}}, {"Y", {"b0"}}}, {{"Out", {Mb("zb", m)}}});
  AddOp(p, "gelu", {{"X", {Mb("zb", m)}}}, {{"Out", {Mb("h", m)}}});
  AddOp(p, "send_v2", {{"X", {Mb("h", m)}}}, {},
        {{"ring_id", kPipeRing},
         {"peer", 1},
         {"use_calc_stream", false},
         {"dynamic_shape", m % 2 == 1}});
}

// Stage 0's backward of micro-batch m: receives h's gradient, accumulates W0's and b0's.
void Stage0Backward(ProgramDesc* p, int m) {
  AddOp(p, "recv_v2", {}, {{"Out", {Mb("h@GRAD", m)}}},
        {{"ring_id", kPipeRing},
         {"peer", 1},
         {"dtype", kFP64},
         {"use_calc_stream", false},
         {"out_shape", std::vector<int64_t>{kMicro, kHidden}}});
  AddOp(p, "gelu_grad", {{"X", {Mb("zb", m)}}, {"Out@GRAD", {Mb("h@GRAD", m)}}},
        {{"X@GRAD", {Mb("zb@GRAD", m)}}});
  AddOp(p, "elementwise_add_grad", {{"Y", {"b0"}}, {"Out@GRAD", {Mb("zb@GRAD", m)}}},
        {{"X@GRAD", {Mb("z@GRAD", m)}}, {"Y@GRAD", {Mb("b0@GRAD", m)}}});
  AddOp(p, "matmul_v2_grad", {{"X", {Mb("x", m)}}, {"Y", {"w0"}}, {"Out@GRAD", {Mb("z@GRAD", m)}}},
        {{"Y@GRAD", {Mb("w0@GRAD", m)}}});
  AddAccumulate(p, "w0@GRAD", Mb("w0@GRAD", m));
  AddAccumulate(p, "b0@GRAD", Mb("b0@GRAD", m));
}

// Stage 1 for micro-batch m: receive, forward, loss / M, backward, send h's gradient back.
void Stage1Step(ProgramDesc* p, int m) {
  AttributeMap recv = {
      {"ring_id", kPipeRing}, {"peer", 0}, {"dtype", kFP64}, {"use_calc_stream", false}};
  if (m % 2 == 1) {
    recv["dynamic_shape"] = true;
  } else {
    recv["out_shape"] = std::vector<int64_t>{kMicro, kHidden};
  }
  AddOp(p, "recv_v2", {}, {{"Out", {Mb("h", m)}}}, recv);
  AddOp(p, "matmul_v2", {{"X", {Mb("h", m)}}, {"Y", {"w1"}}}, {{"Out", {Mb("o", m)}}});
  AddOp(p, "elementwise_add", {{"X", {Mb("o", m)}}, {"Y", {"b1"}}}, {{"Out", {Mb("logits", m)}}});
  AddOp(p, "softmax_with_cross_entropy",
        {{"Logits", {Mb("logits", m)}}, {"Label", {Mb("label", m)}}},
        {{"Softmax", {Mb("sm", m)}}, {"Loss", {Mb("loss", m)}}});
  AddOp(p, "mean", {{"X", {Mb("loss", m)}}}, {{"Out", {Mb("L", m)}}});
  AddOp(p, "scale", {{"X", {Mb("L", m)}}}, {{"Out", {Mb("Ls", m)}}},
        {{"scale", 1.0 / kMicroBatches}});
  AddAccumulate(p, "L", Mb("Ls", m));
  AddOp(p, "fill_constant", {}, {{"Out", {Mb("L@GRAD", m)}}},
        {{"shape", std::vector<int64_t>{1}}, {"dtype", kFP64}, {"value", 1.0 / kMicroBatches}});
  AddOp(p, "mean_grad", {{"X", {Mb("loss", m)}}, {"Out@GRAD", {Mb("L@GRAD", m)}}},
        {{"X@GRAD", {Mb("loss@GRAD", m)}}});
  AddOp(p, "softmax_with_cross_entropy_grad",
        {{"Label", {Mb("label", m)}},
         {"Softmax", {Mb("sm", m)}},
         {"Loss@GRAD", {Mb("loss@GRAD", m)}}},
        {{"Logits@GRAD", {Mb("logits@GRAD", m)}}});
  AddOp(p, "elementwise_add_grad", {{"Y", {"b1"}}, {"Out@GRAD", {Mb("logits@GRAD", m)}}},
        {{"X@GRAD", {Mb("o@GRAD", m)}}, {"Y@GRAD", {Mb("b1@GRAD", m)}}});
  AddOp(p, "matmul_v2_grad", {{"X", {Mb("h", m)}}, {"Y", {"w1"}}, {"Out@GRAD", {Mb("o@GRAD", m)}}},
        {{"X@GRAD", {Mb("h@GRAD", m)}}, {"Y@GRAD", {Mb("w1@GRAD", m)}}});
  AddOp(p, "send_v2", {{"X", {Mb("h@GRAD", m)}}}, {},
        {{"ring_id", kPipeRing}, {"peer", 0}, {"use_calc_stream", false}});
  AddAccumulate(p, "w1@GRAD", Mb("w1@GRAD", m));
  AddAccumulate(p, "b1@GRAD", Mb("b1@GRAD", m));
}

// Averages `vars` over the data-parallel ring on the comm stream, then syncs it.
void AddDataParallelAverage(ProgramDesc* p, const std::vector<std::string>& vars) {
  for (const auto& v : vars) {
    AddOp(p, "c_allreduce_avg", {{"X", {v}}}, {{"Out", {v}}},
          {{"ring_id", kDataRing}, {"use_calc_stream", false}});
  }
  AddOp(p, "c_sync_comm_stream", {}, {}, {{"ring_id", kDataRing}});
}

// The dense model over `rows` rows: forward, mean loss, backward.
ProgramDesc DenseProgram() {
  ProgramDesc p;
  AddOp(&p, "matmul_v2", {{"X", {"x"}}, {"Y", {"w0"}}}, {{"Out", {"z"}}});
  AddOp(&p, "elementwise_add", {{"X", {"z"}}, {"Y", {"b0"}}}, {{"Out", {"zb"}}});
  AddOp(&p, "gelu", {{"X", {"zb"}}}, {{"Out", {"h"}}});
  AddOp(&p, "matmul_v2", {{"X", {"h"}}, {"Y", {"w1"}}}, {{"Out", {"o"}}});
  AddOp(&p, "elementwise_add", {{"X", {"o"}}, {"Y", {"b1"}}}, {{"Out", {"logits"}}});
  AddOp(&p, "softmax_with_cross_entropy", {{"Logits", {"logits"}}, {"Label", {"label"}}},
        {{"Softmax", {"sm"}}, {"Loss", {"loss"}}});
  AddOp(&p, "mean", {{"X", {"loss"}}}, {{"Out", {"L"}}});
  AddOp(&p, "fill_constant", {}, {{"Out", {"L@GRAD"}}},
        {{"shape", std::vector<int64_t>{1}}, {"dtype", kFP64}, {"value", 1.0}});
  AddOp(&p, "mean_grad", {{"X", {"loss"}}, {"Out@GRAD", {"L@GRAD"}}}, {{"X@GRAD", {"loss@GRAD"}}});
  AddOp(&p, "softmax_with_cross_entropy_grad",
        {{"Label", {"label"}}, {"Softmax", {"sm"}}, {"Loss@GRAD", {"loss@GRAD"}}},
        {{"Logits@GRAD", {"logits@GRAD"}}});
  AddOp(&p, "elementwise_add_grad", {{"Y", {"b1"}}, {"Out@GRAD", {"logits@GRAD"}}},
        {{"X@GRAD", {"o@GRAD"}}, {"Y@GRAD", {"b1@GRAD"}}});
  AddOp(&p, "matmul_v2_grad", {{"X", {"h"}}, {"Y", {"w1"}}, {"Out@GRAD", {"o@GRAD"}}},
        {{"X@GRAD", {"h@GRAD"}}, {"Y@GRAD", {"w1@GRAD"}}});
  AddOp(&p, "gelu_grad", {{"X", {"zb"}}, {"Out@GRAD", {"h@GRAD"}}}, {{"X@GRAD", {"zb@GRAD"}}});
  AddOp(&p, "elementwise_add_grad", {{"Y", {"b0"}}, {"Out@GRAD", {"zb@GRAD"}}},
        {{"X@GRAD", {"z@GRAD"}}, {"Y@GRAD", {"b0@GRAD"}}});
  AddOp(&p, "matmul_v2_grad", {{"X", {"x"}}, {"Y", {"w0"}}, {"Out@GRAD", {"z@GRAD"}}},
        {{"Y@GRAD", {"w0@GRAD"}}});
  return p;
}

void SetParams(Scope* s) {
  *s->Var("w0") = RandomTensor(DDim({kIn, kHidden}), 201);
  *s->Var("b0") = RandomTensor(DDim({kHidden}), 202);
  *s->Var("w1") = RandomTensor(DDim({kHidden, kClasses}), 203);
  *s->Var("b1") = RandomTensor(DDim({kClasses}), 204);
}

class FrameworkPipeline : public ::testing::TestWithParam<int> {};

TEST_P(FrameworkPipeline, TwoStagesOverMicroBatchesMatchTheDenseModel) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    dist::GroupPtr world = InitWorldRing();
    const int n = ctx.world_size, stage = ctx.rank % 2, replica = ctx.rank / 2;
    const int replicas = n / 2;
    if (n == 2) {
      operators::RegisterCommRing(world, kPipeRing);
    } else {
      // Every rank creates every group, in the same order; each registers its own.
      std::vector<dist::GroupPtr> pipes = {dist::new_group({0, 1}), dist::new_group({2, 3})};
      std::vector<dist::GroupPtr> dps = {dist::new_group({0, 2}), dist::new_group({1, 3})};
      operators::RegisterCommRing(pipes[replica], kPipeRing);
      operators::RegisterCommRing(dps[stage], kDataRing);
    }

    Scope scope;
    SetParams(&scope);
    ProgramDesc p;
    if (stage == 0) {
      AddZeros(&p, "w0@GRAD", {kIn, kHidden});
      AddZeros(&p, "b0@GRAD", {kHidden});
      for (int m = 0; m < kMicroBatches; ++m) {
        *scope.Var(Mb("x", m)) = InputOf(replica, m);
        Stage0Forward(&p, m);
      }
      for (int m = 0; m < kMicroBatches; ++m) Stage0Backward(&p, m);
    } else {
      AddZeros(&p, "w1@GRAD", {kHidden, kClasses});
      AddZeros(&p, "b1@GRAD", {kClasses});
      AddZeros(&p, "L", {1});
      for (int m = 0; m < kMicroBatches; ++m) {
        *scope.Var(Mb("label", m)) = LabelOf(replica, m);
        Stage1Step(&p, m);
      }
    }
    AddOp(&p, "c_sync_comm_stream", {}, {}, {{"ring_id", kPipeRing}});
    if (replicas > 1) {
      AddDataParallelAverage(&p, stage == 0 ? std::vector<std::string>{"w0@GRAD", "b0@GRAD"}
                                            : std::vector<std::string>{"w1@GRAD", "b1@GRAD", "L"});
    }
    Executor exe;
    exe.Run(p, &scope);
    EXPECT_EQ(exe.NumPendingComm(), 0u);

    // The dense model over every replica's micro-batches.
    Scope dense;
    SetParams(&dense);
    std::vector<double> x, l;
    std::vector<int64_t> labels;
    for (int d = 0; d < replicas; ++d) {
      for (int m = 0; m < kMicroBatches; ++m) {
        auto xv = InputOf(d, m).ToVector<double>();
        x.insert(x.end(), xv.begin(), xv.end());
        auto lv = LabelOf(d, m).ToVector<int64_t>();
        labels.insert(labels.end(), lv.begin(), lv.end());
      }
    }
    const int64_t rows = static_cast<int64_t>(labels.size());
    *dense.Var("x") = Doubles(x, DDim({rows, kIn}));
    *dense.Var("label") = Int64s(labels, DDim({rows}));
    exe.Run(DenseProgram(), &dense);

    if (stage == 0) {
      ExpectClose(*scope.GetVar("w0@GRAD"), *dense.GetVar("w0@GRAD"), kTol, "w0 grad");
      ExpectClose(*scope.GetVar("b0@GRAD"), *dense.GetVar("b0@GRAD"), kTol, "b0 grad");
    } else {
      ExpectClose(*scope.GetVar("L"), *dense.GetVar("L"), kTol, "loss");
      ExpectClose(*scope.GetVar("w1@GRAD"), *dense.GetVar("w1@GRAD"), kTol, "w1 grad");
      ExpectClose(*scope.GetVar("b1@GRAD"), *dense.GetVar("b1@GRAD"), kTol, "b1 grad");
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, FrameworkPipeline, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "ranks";
                         });

}  // namespace
}  // namespace testing
}  // namespace paddle_like
