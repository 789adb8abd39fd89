// The math operators a program needs for the models (Paddle's op and slot names), thin
// wrappers over phi/kernels/math_kernels.h. Gradient ops read `<slot>@GRAD` inputs and
// write `<slot>@GRAD` outputs; an output slot that is not set is not computed.
//
//   matmul_v2(X, Y; trans_x, trans_y) -> Out          matmul_v2_grad -> X@GRAD, Y@GRAD
//   elementwise_add(X, Y: same shape or bias) -> Out  elementwise_add_grad -> X@GRAD, Y@GRAD
//   scale(X; scale, bias, bias_after_scale) -> Out
//   relu(X) -> Out       relu_grad(Out, Out@GRAD) -> X@GRAD
//   gelu(X; approximate) -> Out  gelu_grad(X, Out@GRAD) -> X@GRAD
//   softmax_with_cross_entropy(Logits, Label; ignore_index) -> Softmax, Loss
//   softmax_with_cross_entropy_grad(Label, Softmax, Loss@GRAD) -> Logits@GRAD
//   lookup_table_v2(W, Ids; padding_idx) -> Out  lookup_table_v2_grad -> W@GRAD
//   concat(X...; axis) -> Out     split(X; sections or num, axis) -> Out...
//   fill_constant(; shape, dtype, value) -> Out    cast(X; out_dtype) -> Out
//   mean(X) -> Out [1]    mean_grad(X, Out@GRAD) -> X@GRAD
//   sum(X...) -> Out (elementwise)    assign(X) -> Out
#include <string>
#include <vector>

#include "paddle_like/framework/var_type.h"
#include "paddle_like/operators/comm_ring.h"
#include "paddle_like/operators/register_ops.h"
#include "phi/kernels/math_kernels.h"

namespace paddle_like {
namespace operators {

namespace {

using phi::DDim;

void MatmulKernel(const ExecutionContext& ctx) {
  phi::MatmulKernel(ctx.Input("X"), ctx.Input("Y"), ctx.AttrOr<bool>("trans_x", false),
                    ctx.AttrOr<bool>("trans_y", false), ctx.Output("Out"));
}

// An optional gradient output: the tensor, or nullptr when the op does not ask for it.
DenseTensor* GradOut(const ExecutionContext& ctx, const std::string& slot) {
  return ctx.HasOutput(slot) ? ctx.Output(slot) : nullptr;
}

void MatmulGradKernel(const ExecutionContext& ctx) {
  phi::MatmulGradKernel(ctx.Input("X"), ctx.Input("Y"), ctx.Input("Out@GRAD"),
                        ctx.AttrOr<bool>("trans_x", false), ctx.AttrOr<bool>("trans_y", false),
                        GradOut(ctx, "X@GRAD"), GradOut(ctx, "Y@GRAD"));
}

void AddKernel(const ExecutionContext& ctx) {
  CheckArg(ctx, ctx.AttrOr<int>("axis", -1) == -1,
           "only axis -1 is supported (Y is X's shape, a bias of X's last dim, or a scalar)");
  phi::AddKernel(ctx.Input("X"), ctx.Input("Y"), ctx.Output("Out"));
}

void AddGradKernel(const ExecutionContext& ctx) {
  phi::AddGradKernel(ctx.Input("Out@GRAD"), ctx.Input("Y").dims(), GradOut(ctx, "X@GRAD"),
                     GradOut(ctx, "Y@GRAD"));
}

void ScaleKernel(const ExecutionContext& ctx) {
  phi::ScaleKernel(ctx.Input("X"), ctx.AttrOr<double>("scale", 1.0),
                   ctx.AttrOr<double>("bias", 0.0), ctx.AttrOr<bool>("bias_after_scale", true),
                   ctx.Output("Out"));
}

void ReluKernel(const ExecutionContext& ctx) { phi::ReluKernel(ctx.Input("X"), ctx.Output("Out")); }
void ReluGradKernel(const ExecutionContext& ctx) {
  phi::ReluGradKernel(ctx.Input("Out"), ctx.Input("Out@GRAD"), ctx.Output("X@GRAD"));
}
void GeluKernel(const ExecutionContext& ctx) {
  phi::GeluKernel(ctx.Input("X"), ctx.AttrOr<bool>("approximate", false), ctx.Output("Out"));
}
void GeluGradKernel(const ExecutionContext& ctx) {
  phi::GeluGradKernel(ctx.Input("X"), ctx.Input("Out@GRAD"), ctx.AttrOr<bool>("approximate", false),
                      ctx.Output("X@GRAD"));
}

void SoftmaxCeKernel(const ExecutionContext& ctx) {
  CheckArg(ctx, !ctx.AttrOr<bool>("soft_label", false), "soft_label is not supported");
  CheckArg(ctx, ctx.AttrOr<int>("axis", -1) == -1, "only axis -1 is supported");
  phi::SoftmaxWithCrossEntropyKernel(ctx.Input("Logits"), ctx.Input("Label"),
                                     ctx.AttrOr<int64_t>("ignore_index", -100),
                                     ctx.Output("Softmax"), ctx.Output("Loss"));
}
void SoftmaxCeGradKernel(const ExecutionContext& ctx) {
  phi::SoftmaxWithCrossEntropyGradKernel(
      ctx.Input("Label"), ctx.Input("Softmax"), ctx.Input("Loss@GRAD"),
      ctx.AttrOr<int64_t>("ignore_index", -100), ctx.Output("Logits@GRAD"));
}

void LookupTableKernel(const ExecutionContext& ctx) {
  phi::EmbeddingKernel(ctx.Input("Ids"), ctx.Input("W"), 0, false,
                       ctx.AttrOr<int64_t>("padding_idx", -1), ctx.Output("Out"));
}
void LookupTableGradKernel(const ExecutionContext& ctx) {
  phi::EmbeddingGradKernel(ctx.Input("Ids"), ctx.Input("Out@GRAD"), ctx.Input("W").dims(), 0,
                           ctx.AttrOr<int64_t>("padding_idx", -1), ctx.Output("W@GRAD"));
}

void ConcatKernel(const ExecutionContext& ctx) {
  phi::ConcatKernel(ctx.MultiInput("X"), ctx.AttrOr<int>("axis", 0), ctx.Output("Out"));
}

void SplitKernel(const ExecutionContext& ctx) {
  const DenseTensor& x = ctx.Input("X");
  std::vector<DenseTensor*> outs = ctx.MultiOutput("Out");
  int axis = ctx.AttrOr<int>("axis", 0);
  std::vector<int64_t> sections = ctx.AttrOr<std::vector<int64_t>>("sections", {});
  if (sections.empty()) {
    const int num = ctx.AttrOr<int>("num", static_cast<int>(outs.size()));
    const int rank = x.dims().size();
    const int a = axis < 0 ? axis + rank : axis;
    CheckArg(ctx, a >= 0 && a < rank && num > 0 && x.dims()[a] % num == 0,
             "dimension " + std::to_string(axis) + " of shape " + x.dims().to_str() +
                 " does not split into num " + std::to_string(num) + " equal parts");
    sections.assign(num, x.dims()[a] / num);
  }
  CheckArg(ctx, sections.size() == outs.size(),
           std::to_string(sections.size()) + " sections for " + std::to_string(outs.size()) +
               " outputs");
  phi::SplitKernel(x, sections, axis, outs);
}

void FillConstantKernel(const ExecutionContext& ctx) {
  phi::FullKernel(DDim(ctx.Attr<std::vector<int64_t>>("shape")),
                  framework::FromVarType(ctx.Attr<int>("dtype")), ctx.AttrOr<double>("value", 0.0),
                  ctx.Output("Out"));
}

void CastKernel(const ExecutionContext& ctx) {
  phi::CastKernel(ctx.Input("X"), framework::FromVarType(ctx.Attr<int>("out_dtype")),
                  ctx.Output("Out"));
}

void MeanKernel(const ExecutionContext& ctx) {
  phi::MeanAllKernel(ctx.Input("X"), ctx.Output("Out"));
}

void MeanGradKernel(const ExecutionContext& ctx) {
  const DenseTensor& x = ctx.Input("X");
  const DenseTensor& dout = ctx.Input("Out@GRAD");
  CheckArg(ctx, dout.numel() == 1, "Out@GRAD must hold one element, got " + dout.dims().to_str());
  DenseTensor d64;
  phi::CastKernel(dout, phi::DataType::FLOAT64, &d64);
  phi::FullKernel(x.dims(), x.dtype(), d64.data<double>()[0] / static_cast<double>(x.numel()),
                  ctx.Output("X@GRAD"));
}

void SumKernel(const ExecutionContext& ctx) {
  std::vector<const DenseTensor*> xs = ctx.MultiInput("X");
  CheckArg(ctx, !xs.empty(), "needs at least one input");
  DenseTensor acc;
  phi::Copy(*xs[0], ctx.GetPlace(), &acc);
  for (size_t i = 1; i < xs.size(); ++i) phi::AccumulateKernel(*xs[i], &acc);
  *ctx.Output("Out") = std::move(acc);
}

void AssignKernel(const ExecutionContext& ctx) {
  const DenseTensor& x = ctx.Input("X");
  DenseTensor* out = ctx.Output("Out");
  if (out != &x) phi::Copy(x, ctx.GetPlace(), out);
}

}  // namespace

void RegisterMathOps(KernelRegistry* r) {
  const auto cpu = phi::AllocationType::CPU;
  using phi::dtype::bfloat16;
  using phi::dtype::float16;
  struct Entry {
    const char* op;
    framework::KernelFn fn;
    const char* key_input;
  };
  // Floating-point ops (the kernels compute float16 and bfloat16 in their own types).
  const Entry floating[] = {
      {"matmul_v2", MatmulKernel, "X"},
      {"matmul_v2_grad", MatmulGradKernel, "X"},
      {"elementwise_add", AddKernel, "X"},
      {"elementwise_add_grad", AddGradKernel, "Out@GRAD"},
      {"scale", ScaleKernel, "X"},
      {"relu", ReluKernel, "X"},
      {"relu_grad", ReluGradKernel, "Out"},
      {"gelu", GeluKernel, "X"},
      {"gelu_grad", GeluGradKernel, "X"},
      {"softmax_with_cross_entropy", SoftmaxCeKernel, "Logits"},
      {"softmax_with_cross_entropy_grad", SoftmaxCeGradKernel, "Softmax"},
      {"lookup_table_v2", LookupTableKernel, "W"},
      {"lookup_table_v2_grad", LookupTableGradKernel, "W"},
      {"mean", MeanKernel, "X"},
      {"mean_grad", MeanGradKernel, "X"},
      {"sum", SumKernel, "X"},
  };
  for (const auto& e : floating) {
    r->RegisterTypes<float16, bfloat16, float, double>(e.op, cpu, e.fn);
    r->SetKeyInput(e.op, e.key_input);
  }
  // Ops that move or make any dtype (fill_constant and cast dispatch on their attributes).
  r->Register("concat", cpu, phi::DataType::UNDEFINED, ConcatKernel);
  r->Register("split", cpu, phi::DataType::UNDEFINED, SplitKernel);
  r->Register("fill_constant", cpu, phi::DataType::UNDEFINED, FillConstantKernel);
  r->Register("cast", cpu, phi::DataType::UNDEFINED, CastKernel);
  r->Register("assign", cpu, phi::DataType::UNDEFINED, AssignKernel);
}

}  // namespace operators
}  // namespace paddle_like
