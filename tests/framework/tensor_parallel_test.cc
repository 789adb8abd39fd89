// A Megatron-style tensor-parallel block written as a Program, on 1, 2 and 4 ranks, against
// the same model run densely in one process (also a Program, with the non-parallel ops):
//
//   h = VocabParallelEmbedding(ids)       c_embedding + c_allreduce_sum
//   a = gelu(ColumnParallel(h) + b1)      c_identity, matmul_v2 on W1[:, shard]
//   y = RowParallel(a) + b2               matmul_v2 on W2[shard, :], c_allreduce_sum
//   logits = ColumnParallel(y)            c_identity, matmul_v2 on Wout[:, vocab shard]
//   L = mean(VocabParallelCE(logits))     c_softmax_with_cross_entropy (one ignored label)
//
// and the backward pass, written as grad ops: c_identity's gradient is c_allreduce_sum, the
// forward all-reduces' gradients are identities. The forward outputs (loss, y, the logits
// gathered with c_concat) and every parameter gradient (each rank's shard) must match the
// dense model within 1e-12 relative in float64.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "paddle_like/framework/executor.h"
#include "tests/framework/framework_test_util.h"
#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

using framework::Executor;

constexpr int64_t kVocab = 16, kHidden = 6, kFfn = 8, kTokens = 7;
constexpr double kTol = 1e-12;

struct Model {
  DenseTensor emb = RandomTensor(DDim({kVocab, kHidden}), 101);
  DenseTensor w1 = RandomTensor(DDim({kHidden, kFfn}), 102);
  DenseTensor b1 = RandomTensor(DDim({kFfn}), 103);
  DenseTensor w2 = RandomTensor(DDim({kFfn, kHidden}), 104);
  DenseTensor b2 = RandomTensor(DDim({kHidden}), 105);
  DenseTensor wout = RandomTensor(DDim({kHidden, kVocab}), 106);
  DenseTensor ids = Int64s({3, 0, 15, 8, 7, 3, 12}, DDim({kTokens}));
  DenseTensor label = Int64s({1, 15, -100, 8, 9, 0, 4}, DDim({kTokens, 1}));
};

// The loss tail shared by both programs: mean of the loss, then its gradient seed.
void AddMeanAndSeed(ProgramDesc* p) {
  AddOp(p, "mean", {{"X", {"loss"}}}, {{"Out", {"L"}}});
  AddOp(p, "fill_constant", {}, {{"Out", {"L@GRAD"}}},
        {{"shape", std::vector<int64_t>{1}}, {"dtype", kFP64}, {"value", 1.0}});
  AddOp(p, "mean_grad", {{"X", {"loss"}}, {"Out@GRAD", {"L@GRAD"}}}, {{"X@GRAD", {"loss@GRAD"}}});
}

ProgramDesc DenseProgram() {
  ProgramDesc p;
  AddOp(&p, "lookup_table_v2", {{"W", {"emb"}}, {"Ids", {"ids"}}}, {{"Out", {"h"}}});
  AddOp(&p, "matmul_v2", {{"X", {"h"}}, {"Y", {"w1"}}}, {{"Out", {"z1"}}});
  AddOp(&p, "elementwise_add", {{"X", {"z1"}}, {"Y", {"b1"}}}, {{"Out", {"z1b"}}});
  AddOp(&p, "gelu", {{"X", {"z1b"}}}, {{"Out", {"a"}}});
  AddOp(&p, "matmul_v2", {{"X", {"a"}}, {"Y", {"w2"}}}, {{"Out", {"y0"}}});
  AddOp(&p, "elementwise_add", {{"X", {"y0"}}, {"Y", {"b2"}}}, {{"Out", {"y"}}});
  AddOp(&p, "matmul_v2", {{"X", {"y"}}, {"Y", {"wout"}}}, {{"Out", {"logits"}}});
  AddOp(&p, "softmax_with_cross_entropy", {{"Logits", {"logits"}}, {"Label", {"label"}}},
        {{"Softmax", {"sm"}}, {"Loss", {"loss"}}});
  AddMeanAndSeed(&p);
  AddOp(&p, "softmax_with_cross_entropy_grad",
        {{"Label", {"label"}}, {"Softmax", {"sm"}}, {"Loss@GRAD", {"loss@GRAD"}}},
        {{"Logits@GRAD", {"logits@GRAD"}}});
  AddOp(&p, "matmul_v2_grad", {{"X", {"y"}}, {"Y", {"wout"}}, {"Out@GRAD", {"logits@GRAD"}}},
        {{"X@GRAD", {"y@GRAD"}}, {"Y@GRAD", {"wout@GRAD"}}});
  AddOp(&p, "elementwise_add_grad", {{"Y", {"b2"}}, {"Out@GRAD", {"y@GRAD"}}},
        {{"X@GRAD", {"y0@GRAD"}}, {"Y@GRAD", {"b2@GRAD"}}});
  AddOp(&p, "matmul_v2_grad", {{"X", {"a"}}, {"Y", {"w2"}}, {"Out@GRAD", {"y0@GRAD"}}},
        {{"X@GRAD", {"a@GRAD"}}, {"Y@GRAD", {"w2@GRAD"}}});
  AddOp(&p, "gelu_grad", {{"X", {"z1b"}}, {"Out@GRAD", {"a@GRAD"}}}, {{"X@GRAD", {"z1b@GRAD"}}});
  AddOp(&p, "elementwise_add_grad", {{"Y", {"b1"}}, {"Out@GRAD", {"z1b@GRAD"}}},
        {{"X@GRAD", {"z1@GRAD"}}, {"Y@GRAD", {"b1@GRAD"}}});
  AddOp(&p, "matmul_v2_grad", {{"X", {"h"}}, {"Y", {"w1"}}, {"Out@GRAD", {"z1@GRAD"}}},
        {{"X@GRAD", {"h@GRAD"}}, {"Y@GRAD", {"w1@GRAD"}}});
  AddOp(&p, "lookup_table_v2_grad", {{"W", {"emb"}}, {"Ids", {"ids"}}, {"Out@GRAD", {"h@GRAD"}}},
        {{"W@GRAD", {"emb@GRAD"}}});
  return p;
}

// The same model, tensor-parallel over ring 0 (rank r of n).
ProgramDesc TensorParallelProgram(int r, int n) {
  const AttributeMap ring = {{"ring_id", 0}, {"use_calc_stream", true}};
  ProgramDesc p;
  AddOp(&p, "c_embedding", {{"W", {"emb"}}, {"Ids", {"ids"}}}, {{"Out", {"h_part"}}},
        {{"start_index", int64_t{r * (kVocab / n)}}, {"vocab_size", int64_t{kVocab}}});
  AddOp(&p, "c_allreduce_sum", {{"X", {"h_part"}}}, {{"Out", {"h"}}}, ring);
  // Column-parallel linear: each rank computes its columns of z1.
  AddOp(&p, "c_identity", {{"X", {"h"}}}, {{"Out", {"h_id"}}}, ring);
  AddOp(&p, "matmul_v2", {{"X", {"h_id"}}, {"Y", {"w1"}}}, {{"Out", {"z1"}}});
  AddOp(&p, "elementwise_add", {{"X", {"z1"}}, {"Y", {"b1"}}}, {{"Out", {"z1b"}}});
  AddOp(&p, "gelu", {{"X", {"z1b"}}}, {{"Out", {"a"}}});
  // Row-parallel linear: partial products summed across the ring, then the bias.
  AddOp(&p, "matmul_v2", {{"X", {"a"}}, {"Y", {"w2"}}}, {{"Out", {"y_part"}}});
  AddOp(&p, "mp_allreduce_sum", {{"X", {"y_part"}}}, {{"Out", {"y0"}}}, ring);
  AddOp(&p, "elementwise_add", {{"X", {"y0"}}, {"Y", {"b2"}}}, {{"Out", {"y"}}});
  // Vocab-parallel head and loss.
  AddOp(&p, "c_identity", {{"X", {"y"}}}, {{"Out", {"y_id"}}}, ring);
  AddOp(&p, "matmul_v2", {{"X", {"y_id"}}, {"Y", {"wout"}}}, {{"Out", {"logits"}}});
  AddOp(&p, "c_concat", {{"X", {"logits"}}}, {{"Out", {"logits_full"}}},
        {{"ring_id", 0}, {"rank", r}, {"nranks", n}, {"use_calc_stream", true}});
  AddOp(&p, "c_softmax_with_cross_entropy", {{"Logits", {"logits"}}, {"Label", {"label"}}},
        {{"Softmax", {"sm"}}, {"Loss", {"loss"}}}, {{"ring_id", 0}, {"rank", r}, {"nranks", n}});
  AddMeanAndSeed(&p);
  AddOp(&p, "c_softmax_with_cross_entropy_grad",
        {{"Label", {"label"}}, {"Softmax", {"sm"}}, {"Loss@GRAD", {"loss@GRAD"}}},
        {{"Logits@GRAD", {"logits@GRAD"}}}, {{"ring_id", 0}, {"rank", r}, {"nranks", n}});
  AddOp(&p, "matmul_v2_grad", {{"X", {"y_id"}}, {"Y", {"wout"}}, {"Out@GRAD", {"logits@GRAD"}}},
        {{"X@GRAD", {"y_id@GRAD"}}, {"Y@GRAD", {"wout@GRAD"}}});
  AddOp(&p, "c_allreduce_sum", {{"X", {"y_id@GRAD"}}}, {{"Out", {"y@GRAD"}}}, ring);
  AddOp(&p, "elementwise_add_grad", {{"Y", {"b2"}}, {"Out@GRAD", {"y@GRAD"}}},
        {{"X@GRAD", {"y0@GRAD"}}, {"Y@GRAD", {"b2@GRAD"}}});
  // The row-parallel all-reduce's gradient is the identity: y_part@GRAD = y0@GRAD.
  AddOp(&p, "matmul_v2_grad", {{"X", {"a"}}, {"Y", {"w2"}}, {"Out@GRAD", {"y0@GRAD"}}},
        {{"X@GRAD", {"a@GRAD"}}, {"Y@GRAD", {"w2@GRAD"}}});
  AddOp(&p, "gelu_grad", {{"X", {"z1b"}}, {"Out@GRAD", {"a@GRAD"}}}, {{"X@GRAD", {"z1b@GRAD"}}});
  AddOp(&p, "elementwise_add_grad", {{"Y", {"b1"}}, {"Out@GRAD", {"z1b@GRAD"}}},
        {{"X@GRAD", {"z1@GRAD"}}, {"Y@GRAD", {"b1@GRAD"}}});
  AddOp(&p, "matmul_v2_grad", {{"X", {"h_id"}}, {"Y", {"w1"}}, {"Out@GRAD", {"z1@GRAD"}}},
        {{"X@GRAD", {"h_id@GRAD"}}, {"Y@GRAD", {"w1@GRAD"}}});
  AddOp(&p, "c_allreduce_sum", {{"X", {"h_id@GRAD"}}}, {{"Out", {"h@GRAD"}}}, ring);
  // The embedding's all-reduce: identity backward, so h_part@GRAD = h@GRAD.
  AddOp(&p, "c_embedding_grad", {{"W", {"emb"}}, {"Ids", {"ids"}}, {"Out@GRAD", {"h@GRAD"}}},
        {{"W@GRAD", {"emb@GRAD"}}}, {{"start_index", int64_t{r * (kVocab / n)}}});
  return p;
}

class FrameworkTensorParallel : public ::testing::TestWithParam<int> {};

TEST_P(FrameworkTensorParallel, MegatronBlockMatchesTheDenseModel) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    InitWorldRing();
    const int r = ctx.rank, n = ctx.world_size;
    const Model m;
    Executor exe;

    Scope dense;
    *dense.Var("emb") = m.emb;
    *dense.Var("w1") = m.w1;
    *dense.Var("b1") = m.b1;
    *dense.Var("w2") = m.w2;
    *dense.Var("b2") = m.b2;
    *dense.Var("wout") = m.wout;
    *dense.Var("ids") = m.ids;
    *dense.Var("label") = m.label;
    exe.Run(DenseProgram(), &dense);

    const int64_t vs = kVocab / n, fs = kFfn / n;
    Scope tp;
    *tp.Var("emb") = Rows(m.emb, r * vs, (r + 1) * vs);
    *tp.Var("w1") = Cols(m.w1, r * fs, (r + 1) * fs);
    *tp.Var("b1") = Rows(m.b1, r * fs, (r + 1) * fs);
    *tp.Var("w2") = Rows(m.w2, r * fs, (r + 1) * fs);
    *tp.Var("b2") = m.b2;
    *tp.Var("wout") = Cols(m.wout, r * vs, (r + 1) * vs);
    *tp.Var("ids") = m.ids;
    *tp.Var("label") = m.label;
    exe.Run(TensorParallelProgram(r, n), &tp);

    auto dv = [&](const char* name) { return *dense.GetVar(name); };
    auto tv = [&](const char* name) { return *tp.GetVar(name); };
    // Forward.
    ExpectClose(tv("h"), dv("h"), kTol, "embedding output");
    ExpectClose(tv("y"), dv("y"), kTol, "block output y");
    ExpectClose(tv("logits_full"), dv("logits"), kTol, "logits (c_concat of the shards)");
    ExpectClose(tv("loss"), dv("loss"), kTol, "per-token loss");
    ExpectClose(tv("L"), dv("L"), kTol, "mean loss");
    // Every parameter gradient, as this rank's shard of the dense one.
    ExpectClose(tv("emb@GRAD"), Rows(dv("emb@GRAD"), r * vs, (r + 1) * vs), kTol, "emb grad");
    ExpectClose(tv("w1@GRAD"), Cols(dv("w1@GRAD"), r * fs, (r + 1) * fs), kTol, "w1 grad");
    ExpectClose(tv("b1@GRAD"), Rows(dv("b1@GRAD"), r * fs, (r + 1) * fs), kTol, "b1 grad");
    ExpectClose(tv("w2@GRAD"), Rows(dv("w2@GRAD"), r * fs, (r + 1) * fs), kTol, "w2 grad");
    ExpectClose(tv("b2@GRAD"), dv("b2@GRAD"), kTol, "b2 grad");
    ExpectClose(tv("wout@GRAD"), Cols(dv("wout@GRAD"), r * vs, (r + 1) * vs), kTol, "wout grad");
    // The dense gradients are not trivially zero (the comparison means something).
    double norm = 0;
    for (double v : ValuesOf(dv("w1@GRAD"))) norm += v * v;
    EXPECT_GT(norm, 1e-6);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, FrameworkTensorParallel, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "ranks";
                         });

}  // namespace
}  // namespace testing
}  // namespace paddle_like
