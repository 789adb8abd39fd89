// The framework pieces on their own (one process): OpDesc's typed attributes, Scope, the
// kernel registry (a kernel registered from this file, unknown ops and dtypes), and the
// Executor (order, dtype dispatch, errors that name the op).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "paddle_like/framework/executor.h"
#include "paddle_like/framework/kernel_registry.h"
#include "phi/core/errors.h"
#include "tests/framework/framework_test_util.h"

namespace paddle_like {
namespace testing {
namespace {

using framework::ExecutionContext;
using framework::Executor;
using framework::KernelRegistry;
using framework::OpDesc;

// A user kernel, registered without touching the registry: Out = 2 * X + attr "add".
template <typename T>
void TwiceKernelImpl(const ExecutionContext& ctx) {
  const DenseTensor& x = ctx.Input("X");
  DenseTensor out(ctx.GetPlace(), x.dtype(), x.dims());
  const double add = ctx.AttrOr<double>("add", 0.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    out.data<T>()[i] = static_cast<T>(2 * x.data<T>()[i] + add);
  }
  *ctx.Output("Out") = out;
}
void TwiceKernel(const ExecutionContext& ctx) {
  if (ctx.Input("X").dtype() == phi::DataType::FLOAT64) {
    TwiceKernelImpl<double>(ctx);
  } else {
    TwiceKernelImpl<float>(ctx);
  }
}
PD_REGISTER_OP_KERNEL(test_twice, CPU, TwiceKernel, float, double);

template <typename E>
std::string MessageOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "raised another type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not raise";
  return "";
}

TEST(FrameworkOpDesc, TypedAttributesAndSlots) {
  OpDesc op("c_allreduce_sum");
  op.SetInput("X", {"h"}).SetOutput("Out", {"h"}).SetAttr("ring_id", 3);
  op.SetAttr("use_calc_stream", true).SetAttr("scale", 0.5f).SetAttr("name", "tp");
  op.SetAttr("shape", std::vector<int>{2, 3});
  EXPECT_EQ(op.GetAttr<int>("ring_id"), 3);
  op.SetAttr("root", 0);  // a literal 0 is an int, not a null string
  EXPECT_EQ(op.GetAttr<int>("root"), 0);
  EXPECT_EQ(op.GetAttr<int64_t>("ring_id"), 3);  // int widens to int64
  EXPECT_TRUE(op.GetAttr<bool>("use_calc_stream"));
  EXPECT_DOUBLE_EQ(op.GetAttr<double>("scale"), 0.5);  // float widens to double
  EXPECT_EQ(op.GetAttr<std::string>("name"), "tp");    // a literal is a string, not a bool
  EXPECT_EQ(op.GetAttr<std::vector<int64_t>>("shape"), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(op.GetAttrOr<int>("peer", 7), 7);
  EXPECT_EQ(op.Input("X"), std::vector<std::string>{"h"});

  std::string m = MessageOf<phi::InvalidArgumentError>([&] { op.GetAttr<std::string>("ring_id"); });
  EXPECT_NE(m.find("'ring_id'"), std::string::npos) << m;
  EXPECT_NE(m.find("must be string"), std::string::npos) << m;
  EXPECT_NE(m.find("holds int"), std::string::npos) << m;
  m = MessageOf<phi::NotFoundError>([&] { op.GetAttr<int>("peer"); });
  EXPECT_NE(m.find("'peer'"), std::string::npos) << m;
  EXPECT_NE(m.find("ring_id"), std::string::npos) << m;  // names what it has
  m = MessageOf<phi::NotFoundError>([&] { op.Input("Y"); });
  EXPECT_NE(m.find("'Y'"), std::string::npos) << m;
  EXPECT_NE(m.find("it has: X"), std::string::npos) << m;
}

TEST(FrameworkScope, VariablesByName) {
  Scope scope;
  EXPECT_EQ(scope.FindVar("a"), nullptr);
  DenseTensor* a = scope.Var("a");
  *a = Doubles({1, 2}, DDim({2}));
  EXPECT_EQ(scope.Var("a"), a);  // same variable, stable address
  EXPECT_EQ(scope.GetVar("a")->numel(), 2);
  scope.Var("b");
  EXPECT_EQ(scope.VarNames(), (std::vector<std::string>{"a", "b"}));
  std::string m = MessageOf<phi::NotFoundError>([&] { scope.GetVar("zz"); });
  EXPECT_NE(m.find("'zz'"), std::string::npos) << m;
  EXPECT_NE(m.find("a, b"), std::string::npos) << m;
  scope.EraseVar("a");
  EXPECT_FALSE(scope.HasVar("a"));
}

TEST(FrameworkRegistry, UserKernelRunsAndUnknownKeysRaise) {
  auto& reg = KernelRegistry::Instance();
  EXPECT_TRUE(reg.Has("test_twice"));
  EXPECT_TRUE(reg.Has("c_allreduce_sum"));  // the built-ins are there on first use
  Scope scope;
  *scope.Var("x") = Doubles({1, -2}, DDim({2}));
  ProgramDesc p;
  AddOp(&p, "test_twice", {{"X", {"x"}}}, {{"Out", {"y"}}}, {{"add", 1.0}});
  Executor exe;
  exe.Run(p, &scope);
  ExpectValues(*scope.GetVar("y"), {3, -3}, 0, "test_twice");

  // A dtype the op has no kernel for: names the kernels it has.
  *scope.Var("i") = Int64s({1}, DDim({1}));
  ProgramDesc q;
  AddOp(&q, "test_twice", {{"X", {"i"}}}, {{"Out", {"j"}}});
  std::string m = MessageOf<phi::NotFoundError>([&] { exe.Run(q, &scope); });
  EXPECT_NE(m.find("no kernel for CPU int64"), std::string::npos) << m;
  EXPECT_NE(m.find("CPU/float32"), std::string::npos) << m;
  EXPECT_NE(m.find("op #0 test_twice"), std::string::npos) << m;
  // An op nobody registered: lists the ones there are.
  ProgramDesc u;
  AddOp(&u, "no_such_op", {{"X", {"x"}}}, {{"Out", {"y"}}});
  m = MessageOf<phi::NotFoundError>([&] { exe.Run(u, &scope); });
  EXPECT_NE(m.find("no operator 'no_such_op'"), std::string::npos) << m;
  EXPECT_NE(m.find("c_allreduce_sum"), std::string::npos) << m;
  // Registering the same key twice.
  MessageOf<phi::PreconditionNotMetError>([&] {
    reg.Register("test_twice", phi::AllocationType::CPU, phi::DataType::FLOAT64, TwiceKernel);
  });
}

TEST(FrameworkExecutor, RunsOpsInOrderAndNamesTheFailingOp) {
  Scope scope;
  ProgramDesc p;
  AddOp(&p, "fill_constant", {}, {{"Out", {"a"}}},
        {{"shape", std::vector<int64_t>{2, 2}}, {"dtype", kFP64}, {"value", 1.5}});
  AddOp(&p, "scale", {{"X", {"a"}}}, {{"Out", {"b"}}}, {{"scale", 2.0}, {"bias", 1.0}});
  AddOp(&p, "elementwise_add", {{"X", {"b"}}, {"Y", {"a"}}}, {{"Out", {"c"}}});
  AddOp(&p, "test_twice", {{"X", {"c"}}}, {{"Out", {"c"}}});  // in place
  Executor exe;
  exe.Run(p, &scope);
  ExpectValues(*scope.GetVar("c"), {11, 11, 11, 11}, 0, "c");  // 2 * ((2*1.5+1) + 1.5)

  // Missing input: the error keeps its type and names the op and its index.
  ProgramDesc bad;
  AddOp(&bad, "scale", {{"X", {"a"}}}, {{"Out", {"d"}}});
  AddOp(&bad, "relu", {{"X", {"missing"}}}, {{"Out", {"e"}}});
  std::string m = MessageOf<phi::NotFoundError>([&] { exe.Run(bad, &scope); });
  EXPECT_NE(m.find("op #1 relu"), std::string::npos) << m;
  EXPECT_NE(m.find("'missing'"), std::string::npos) << m;
  // Wrong attribute type through the executor.
  ProgramDesc wrong;
  AddOp(&wrong, "scale", {{"X", {"a"}}}, {{"Out", {"d"}}}, {{"scale", std::string("2")}});
  m = MessageOf<phi::InvalidArgumentError>([&] { exe.Run(wrong, &scope); });
  EXPECT_NE(m.find("'scale'"), std::string::npos) << m;
}

// The math ops a program uses, through the executor, against naive loops.
TEST(FrameworkMathOps, MatmulAddGeluMeanAgainstLoops) {
  Scope scope;
  const int64_t m = 3, k = 4, n = 2;
  DenseTensor x = RandomTensor(DDim({k, m}), 1);  // used transposed
  DenseTensor w = RandomTensor(DDim({k, n}), 2);
  DenseTensor b = RandomTensor(DDim({n}), 3);
  *scope.Var("x") = x;
  *scope.Var("w") = w;
  *scope.Var("b") = b;
  ProgramDesc p;
  AddOp(&p, "matmul_v2", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"z"}}}, {{"trans_x", true}});
  AddOp(&p, "elementwise_add", {{"X", {"z"}}, {"Y", {"b"}}}, {{"Out", {"zb"}}});
  AddOp(&p, "gelu", {{"X", {"zb"}}}, {{"Out", {"g"}}});
  AddOp(&p, "mean", {{"X", {"g"}}}, {{"Out", {"l"}}});
  AddOp(&p, "fill_constant", {}, {{"Out", {"l@GRAD"}}},
        {{"shape", std::vector<int64_t>{1}}, {"dtype", kFP64}, {"value", 1.0}});
  AddOp(&p, "mean_grad", {{"X", {"g"}}, {"Out@GRAD", {"l@GRAD"}}}, {{"X@GRAD", {"g@GRAD"}}});
  AddOp(&p, "elementwise_add_grad", {{"Y", {"b"}}, {"Out@GRAD", {"g@GRAD"}}},
        {{"X@GRAD", {"z@GRAD"}}, {"Y@GRAD", {"b@GRAD"}}});
  Executor exe;
  exe.Run(p, &scope);
  const double* xp = x.data<double>();
  const double* wp = w.data<double>();
  std::vector<double> zb(m * n), g(m * n);
  double mean = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = b.data<double>()[j];
      for (int64_t t = 0; t < k; ++t) s += xp[t * m + i] * wp[t * n + j];
      zb[i * n + j] = s;
      g[i * n + j] = 0.5 * s * (1 + std::erf(s / std::sqrt(2.0)));
      mean += g[i * n + j] / (m * n);
    }
  }
  ExpectValues(*scope.GetVar("zb"), zb, 1e-14, "x^T w + b");
  ExpectValues(*scope.GetVar("g"), g, 1e-14, "gelu");
  ExpectValues(*scope.GetVar("l"), {mean}, 1e-14, "mean");
  ExpectValues(*scope.GetVar("b@GRAD"), std::vector<double>(n, 1.0 * m / (m * n)), 1e-14,
               "bias grad");
}

TEST(FrameworkMathOps, SplitConcatSumCastAssign) {
  Scope scope;
  *scope.Var("x") = Doubles({1, 2, 3, 4, 5, 6}, DDim({2, 3}));
  ProgramDesc p;
  AddOp(&p, "split", {{"X", {"x"}}}, {{"Out", {"a", "b"}}},
        {{"sections", std::vector<int64_t>{1, 2}}, {"axis", 1}});
  AddOp(&p, "concat", {{"X", {"b", "a"}}}, {{"Out", {"c"}}}, {{"axis", 1}});
  AddOp(&p, "sum", {{"X", {"c", "c", "x"}}}, {{"Out", {"s"}}});
  AddOp(&p, "cast", {{"X", {"s"}}}, {{"Out", {"i"}}}, {{"out_dtype", kINT64}});
  AddOp(&p, "assign", {{"X", {"i"}}}, {{"Out", {"j"}}});
  Executor exe;
  exe.Run(p, &scope);
  ExpectValues(*scope.GetVar("c"), {2, 3, 1, 5, 6, 4}, 0, "concat of split");
  ExpectValues(*scope.GetVar("s"), {5, 8, 5, 14, 17, 14}, 0, "sum");
  EXPECT_EQ(scope.GetVar("j")->dtype(), phi::DataType::INT64);
  EXPECT_EQ(scope.GetVar("j")->ToVector<int64_t>(), (std::vector<int64_t>{5, 8, 5, 14, 17, 14}));
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
