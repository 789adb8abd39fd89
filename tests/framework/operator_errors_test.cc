// Bad input to a collective operator raises a typed error that says what was expected and
// what came, on every rank, before anything is issued: the ring's sequence number does not
// move, and the ring works normally afterwards. On 1, 2 and 4 ranks.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "distributed/process_group_with_stream.h"
#include "paddle_like/framework/executor.h"
#include "paddle_like/operators/comm_ring.h"
#include "phi/core/errors.h"
#include "tests/framework/framework_test_util.h"
#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

using framework::Executor;

// Runs one op on `scope`; EXPECTs an error of type E whose message holds every `parts`.
template <typename E>
void ExpectOpError(Scope* scope, const std::string& type, VariableNameMap ins, VariableNameMap outs,
                   AttributeMap attrs, const std::vector<std::string>& parts) {
  ProgramDesc p;
  AddOp(&p, type, std::move(ins), std::move(outs), std::move(attrs));
  try {
    Executor().Run(p, scope);
    ADD_FAILURE() << type << " did not raise";
  } catch (const E& e) {
    const std::string m = e.what();
    for (const auto& part : parts) {
      EXPECT_NE(m.find(part), std::string::npos) << type << ": '" << part << "' not in: " << m;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << type << " raised another type: " << e.what();
  }
}

uint64_t SeqOf(int ring) {
  auto pg = distributed::ProcessGroupIdMap::GetInstance().Get(ring);
  return dynamic_cast<distributed::ProcessGroupWithStream&>(*pg).seq();
}

class FrameworkOperatorErrors : public ::testing::TestWithParam<int> {};

TEST_P(FrameworkOperatorErrors, BadInputRaisesBeforeAnythingIsIssued) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    InitWorldRing();
    operators::RegisterCommRing(dist::new_group(), 1);
    const int r = ctx.rank, n = ctx.world_size;
    Scope s;
    *s.Var("X") = Doubles({1, 2, 3, 4}, DDim({2, 2}));
    *s.Var("odd") = Doubles(std::vector<double>(2 * n + 1, 1.0), DDim({2 * n + 1, 1}));
    *s.Var("B") = DenseTensor(phi::CPUPlace(), phi::DataType::BOOL, DDim({2}));
    phi::Fill(s.Var("B"), 1);
    *s.Var("I32") = DenseTensor::FromVector<int32_t>({1, 2}, DDim({1, 2}));
    *s.Var("label") = Int64s({0}, DDim({1}));
    const uint64_t seq0 = SeqOf(0), seq1 = SeqOf(1);
    const VariableNameMap x = {{"X", {"X"}}}, out = {{"Out", {"Out"}}};

    // Unknown ring: names the rings there are.
    ExpectOpError<phi::NotFoundError>(&s, "c_allreduce_sum", x, out, {{"ring_id", 7}},
                                      {"ring_id 7", "ring ids that exist are: 0, 1"});
    // Unsupported dtypes: the kernels there are.
    ExpectOpError<phi::NotFoundError>(&s, "c_allreduce_sum", {{"X", {"B"}}}, out, {},
                                      {"no kernel for CPU bool", "CPU/float32"});
    ExpectOpError<phi::NotFoundError>(
        &s, "c_softmax_with_cross_entropy", {{"Logits", {"I32"}}, {"Label", {"label"}}},
        {{"Softmax", {"S"}}, {"Loss", {"L"}}}, {}, {"no kernel for CPU int32"});
    // Unsupported attributes.
    ExpectOpError<phi::InvalidArgumentError>(&s, "c_allreduce_sum", x, out,
                                             {{"ring_id", std::string("0")}},
                                             {"'ring_id'", "must be int", "holds string"});
    ExpectOpError<phi::InvalidArgumentError>(&s, "c_reduce_sum", x, out, {{"root_id", n}},
                                             {"root_id " + std::to_string(n), "-rank ring 0"});
    ExpectOpError<phi::InvalidArgumentError>(&s, "c_broadcast", x, out, {{"root", -1}},
                                             {"root -1"});
    ExpectOpError<phi::InvalidArgumentError>(&s, "send_v2", x, {}, {{"peer", r}},
                                             {"peer " + std::to_string(r), "another rank"});
    ExpectOpError<phi::InvalidArgumentError>(
        &s, "recv_v2", {}, out, {{"peer", (r + 1) % n}, {"dtype", 99}}, {"dtype attribute 99"});
    if (n > 1) {
      ExpectOpError<phi::InvalidArgumentError>(&s, "recv_v2", {}, out,
                                               {{"peer", (r + 1) % n}, {"dtype", kFP64}},
                                               {"out_shape must be given"});
      ExpectOpError<phi::InvalidArgumentError>(&s, "partial_send", x, {},
                                               {{"peer", (r + 1) % n}, {"num", 2}, {"id", 2}},
                                               {"0 <= id < num", "id 2"});
    }
    ExpectOpError<phi::InvalidArgumentError>(&s, "c_embedding", {{"W", {"X"}}, {"Ids", {"label"}}},
                                             out, {{"vocab_size", int64_t{0}}},
                                             {"outside the vocabulary [0, 0)"});
    *s.Var("far") = Int64s({0, 2 * n}, DDim({2}));  // X holds 2 classes per rank
    ExpectOpError<phi::InvalidArgumentError>(
        &s, "c_softmax_with_cross_entropy", {{"Logits", {"X"}}, {"Label", {"far"}}},
        {{"Softmax", {"S"}}, {"Loss", {"L"}}}, {},
        {"label " + std::to_string(2 * n), std::to_string(2 * n) + " classes"});
    // Shapes that do not agree with nranks.
    ExpectOpError<phi::InvalidArgumentError>(
        &s, "c_allgather", x, out, {{"nranks", n + 1}},
        {"nranks is " + std::to_string(n + 1), "has " + std::to_string(n) + " ranks"});
    ExpectOpError<phi::InvalidArgumentError>(&s, "partial_allgather", x, out, {{"num", n + 1}},
                                             {"num is " + std::to_string(n + 1)});
    ExpectOpError<phi::InvalidArgumentError>(&s, "c_concat", x, out,
                                             {{"rank", r + 1}, {"nranks", n}},
                                             {"rank is " + std::to_string(r + 1)});
    if (n > 1) {
      ExpectOpError<phi::InvalidArgumentError>(&s, "c_reducescatter", {{"X", {"odd"}}}, out, {},
                                               {"multiple of nranks " + std::to_string(n)});
      ExpectOpError<phi::InvalidArgumentError>(&s, "alltoall", {{"X", {"odd"}}}, out, {},
                                               {"multiple of nranks"});
      ExpectOpError<phi::InvalidArgumentError>(&s, "c_scatter", {{"X", {"odd"}}}, out, {},
                                               {"multiple of nranks"});
      ExpectOpError<phi::InvalidArgumentError>(&s, "partial_allgather", {{"X", {"odd"}}}, out, {},
                                               {"equal parts"});
      *s.Var("W3") = Doubles(std::vector<double>(2 * (2 * n + 1), 1.0), DDim({2, 2 * n + 1}));
      ExpectOpError<phi::InvalidArgumentError>(&s, "c_split", {{"X", {"W3"}}}, out, {},
                                               {"last dimension", "multiple of nranks"});
      *s.Var("cnt") = Int64s(std::vector<int64_t>(n + 1, 0), DDim({n + 1}));
      ExpectOpError<phi::InvalidArgumentError>(
          &s, "global_scatter", {{"X", {"X"}}, {"local_count", {"cnt"}}, {"global_count", {"cnt"}}},
          out, {}, {"multiple of nranks " + std::to_string(n)});
    }
    *s.Var("cnt1") = Int64s(std::vector<int64_t>(n, 0), DDim({n}));
    ExpectOpError<phi::InvalidArgumentError>(
        &s, "global_scatter", {{"X", {"X"}}, {"local_count", {"cnt1"}}, {"global_count", {"cnt1"}}},
        out, {}, {"local_count sums to 0 rows", "[2, 2]"});

    // Nothing was issued, and the rings work.
    EXPECT_EQ(SeqOf(0), seq0);
    EXPECT_EQ(SeqOf(1), seq1);
    ProgramDesc ok;
    AddOp(&ok, "c_allreduce_sum", x, {{"Out", {"sum"}}},
          {{"ring_id", 1}, {"use_calc_stream", true}});
    Executor().Run(ok, &s);
    ExpectValues(*s.GetVar("sum"), {1.0 * n, 2.0 * n, 3.0 * n, 4.0 * n}, 0, "after the errors");
    EXPECT_EQ(SeqOf(1), seq1 + 1);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, FrameworkOperatorErrors, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "ranks";
                         });

}  // namespace
}  // namespace testing
}  // namespace paddle_like
