// The op builders: forward through a kernel, backward as a FunctionNode that captures what
// the gradient kernel needs.
#include "paddle_like/eager/functional.h"

#include <initializer_list>

#include "paddle_like/eager/autograd.h"
#include "phi/core/errors.h"
#include "phi/kernels/math_kernels.h"

namespace paddle_like {
namespace functional {

using phi::DenseTensor;
using Grads = std::vector<DenseTensor>;
using Edges = std::vector<std::shared_ptr<GradNode>>;
using autograd::FunctionNode;

namespace {

// The result of an op named `name` with `backward` (grad_out -> one gradient per input).
Tensor Record(const char* name, DenseTensor value, const std::vector<Tensor>& inputs,
              FunctionNode::Backward backward) {
  return autograd::MakeResult(std::move(value), inputs, [&](Edges edges) {
    return std::make_shared<FunctionNode>(name, std::move(edges), std::move(backward));
  });
}

Tensor Record(const char* name, DenseTensor value, const std::vector<Tensor>& inputs,
              FunctionNode::BackwardInto backward) {
  return autograd::MakeResult(std::move(value), inputs, [&](Edges edges) {
    return std::make_shared<FunctionNode>(name, std::move(edges), std::move(backward));
  });
}

// The sink the engine offered for an input (GradNode::ApplyInto) when the matmul gradient
// may go there: it must not share storage with a tensor the gradient reads.
DenseTensor* UsableSink(DenseTensor* sink, std::initializer_list<const DenseTensor*> read) {
  if (sink == nullptr) return nullptr;
  for (const DenseTensor* t : read) {
    if (t->Holder() == sink->Holder()) return nullptr;
  }
  return sink;
}

// The gradients of out = op(x) op(y): those with a usable sink are added into it in place
// (marked in `accumulated`), the others returned.
Grads MatmulBackward(const DenseTensor& xv, const DenseTensor& yv, const DenseTensor& dout,
                     bool tx, bool ty, bool need_dx, bool need_dy,
                     const std::vector<DenseTensor*>& sinks, std::vector<bool>* accumulated) {
  DenseTensor* into_x = need_dx ? UsableSink(sinks[0], {&xv, &yv, &dout}) : nullptr;
  DenseTensor* into_y = need_dy ? UsableSink(sinks[1], {&xv, &yv, &dout}) : nullptr;
  if (into_x != nullptr && into_x == into_y) into_y = nullptr;  // matmul(w, w): one at a time
  if (into_x != nullptr || into_y != nullptr) {
    phi::MatmulGradAddKernel(xv, yv, dout, tx, ty, into_x, into_y);
    (*accumulated)[0] = into_x != nullptr;
    (*accumulated)[1] = into_y != nullptr;
  }
  DenseTensor dx, dy;
  bool rest_x = need_dx && into_x == nullptr, rest_y = need_dy && into_y == nullptr;
  if (rest_x || rest_y) {
    phi::MatmulGradKernel(xv, yv, dout, tx, ty, rest_x ? &dx : nullptr, rest_y ? &dy : nullptr);
  }
  return Grads{dx, dy};
}

// A one-element tensor's value as a double.
double ScalarOf(const DenseTensor& t) {
  DenseTensor d;
  phi::CastKernel(t, phi::DataType::FLOAT64, &d);
  return d.data<double>()[0];
}

}  // namespace

Tensor matmul(const Tensor& x, const Tensor& y, bool transpose_x, bool transpose_y) {
  DenseTensor out;
  phi::MatmulKernel(x.value(), y.value(), transpose_x, transpose_y, &out);
  DenseTensor xv = x.value(), yv = y.value();
  bool need_dx = x.requires_grad(), need_dy = y.requires_grad();
  return Record("matmul", std::move(out), {x, y},
                [=](const DenseTensor& dout, const std::vector<DenseTensor*>& sinks,
                    std::vector<bool>* accumulated) {
                  return MatmulBackward(xv, yv, dout, transpose_x, transpose_y, need_dx,
                                        need_dy, sinks, accumulated);
                });
}

Tensor add(const Tensor& x, const Tensor& y) {
  DenseTensor out;
  phi::AddKernel(x.value(), y.value(), &out);
  phi::DDim y_dims = y.dims();
  return Record("add", std::move(out), {x, y}, [=](const DenseTensor& dout) {
    // dx is dout itself, shared: the engine never writes a gradient it was handed.
    DenseTensor dy;
    phi::AddGradKernel(dout, y_dims, nullptr, &dy);
    return Grads{dout, dy};
  });
}

Tensor subtract(const Tensor& x, const Tensor& y) {
  DenseTensor out;
  phi::SubtractKernel(x.value(), y.value(), &out);
  return Record("subtract", std::move(out), {x, y}, [](const DenseTensor& dout) {
    DenseTensor neg;
    phi::ScaleKernel(dout, -1.0, 0.0, true, &neg);
    return Grads{dout, neg};
  });
}

Tensor multiply(const Tensor& x, const Tensor& y) {
  DenseTensor out;
  phi::MultiplyKernel(x.value(), y.value(), &out);
  DenseTensor xv = x.value(), yv = y.value();
  return Record("multiply", std::move(out), {x, y}, [=](const DenseTensor& dout) {
    DenseTensor dx, dy;
    phi::MultiplyKernel(dout, yv, &dx);
    phi::MultiplyKernel(dout, xv, &dy);
    return Grads{dx, dy};
  });
}

Tensor scale(const Tensor& x, double s, double bias) {
  DenseTensor out;
  phi::ScaleKernel(x.value(), s, bias, true, &out);
  return Record("scale", std::move(out), {x}, [=](const DenseTensor& dout) {
    DenseTensor dx;
    phi::ScaleKernel(dout, s, 0.0, true, &dx);
    return Grads{dx};
  });
}

Tensor sum(const Tensor& x) {
  DenseTensor out;
  phi::SumAllKernel(x.value(), &out);
  phi::DDim dims = x.dims();
  phi::DataType dtype = x.dtype();
  return Record("sum", std::move(out), {x}, [=](const DenseTensor& dout) {
    DenseTensor dx;
    phi::FullKernel(dims, dtype, ScalarOf(dout), &dx);
    return Grads{dx};
  });
}

Tensor mean(const Tensor& x) {
  DenseTensor out;
  phi::MeanAllKernel(x.value(), &out);
  phi::DDim dims = x.dims();
  phi::DataType dtype = x.dtype();
  double n = static_cast<double>(x.numel());
  return Record("mean", std::move(out), {x}, [=](const DenseTensor& dout) {
    DenseTensor dx;
    phi::FullKernel(dims, dtype, ScalarOf(dout) / n, &dx);
    return Grads{dx};
  });
}

Tensor reshape(const Tensor& x, const phi::DDim& dims) {
  PADDLE_ENFORCE_EQ(dims.numel(), x.numel(),
                    phi::errors::InvalidArgument("reshape: %s has %ld elements, %s has %ld.",
                                                 x.dims().to_str().c_str(), long(x.numel()),
                                                 dims.to_str().c_str(), long(dims.numel())));
  DenseTensor out;
  phi::Copy(x.value(), phi::CPUPlace(), &out);
  out.Resize(dims);
  phi::DDim in_dims = x.dims();
  return Record("reshape", std::move(out), {x}, [=](const DenseTensor& dout) {
    DenseTensor dx;
    phi::Copy(dout, phi::CPUPlace(), &dx);
    dx.Resize(in_dims);
    return Grads{dx};
  });
}

Tensor cast(const Tensor& x, phi::DataType dtype) {
  DenseTensor out;
  phi::CastKernel(x.value(), dtype, &out);
  phi::DataType in_dtype = x.dtype();
  if (!phi::IsFloating(dtype)) return Tensor(std::move(out));
  return Record("cast", std::move(out), {x}, [=](const DenseTensor& dout) {
    DenseTensor dx;
    phi::CastKernel(dout, in_dtype, &dx);
    return Grads{dx};
  });
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (!bias.defined()) return matmul(x, weight);
  // One node for x @ weight + bias (what matmul then add computes, value for value): one
  // output and one graph node per layer, no gradient copy between them.
  DenseTensor out;
  phi::MatmulKernel(x.value(), weight.value(), false, false, &out);
  phi::AddKernel(out, bias.value(), &out);
  DenseTensor xv = x.value(), wv = weight.value();
  phi::DDim bias_dims = bias.dims();
  bool need_dx = x.requires_grad(), need_dw = weight.requires_grad();
  bool need_db = bias.requires_grad();
  return Record("linear", std::move(out), {x, weight, bias},
                [=](const DenseTensor& dout, const std::vector<DenseTensor*>& sinks,
                    std::vector<bool>* accumulated) {
                  std::vector<bool> matmul_accumulated(2, false);
                  Grads g = MatmulBackward(xv, wv, dout, false, false, need_dx, need_dw,
                                           {sinks[0], sinks[1]}, &matmul_accumulated);
                  (*accumulated)[0] = matmul_accumulated[0];
                  (*accumulated)[1] = matmul_accumulated[1];
                  DenseTensor db;
                  if (need_db) phi::AddGradKernel(dout, bias_dims, nullptr, &db);
                  return Grads{g[0], g[1], db};
                });
}

Tensor relu(const Tensor& x) {
  DenseTensor out;
  phi::ReluKernel(x.value(), &out);
  DenseTensor saved = out;
  return Record("relu", std::move(out), {x}, [=](const DenseTensor& dout) {
    DenseTensor dx;
    phi::ReluGradKernel(saved, dout, &dx);
    return Grads{dx};
  });
}

Tensor gelu(const Tensor& x, bool approximate) {
  DenseTensor out;
  phi::GeluKernel(x.value(), approximate, &out);
  DenseTensor xv = x.value();
  return Record("gelu", std::move(out), {x}, [=](const DenseTensor& dout) {
    DenseTensor dx;
    phi::GeluGradKernel(xv, dout, approximate, &dx);
    return Grads{dx};
  });
}

Tensor tanh(const Tensor& x) {
  DenseTensor out;
  phi::TanhKernel(x.value(), &out);
  DenseTensor saved = out;
  return Record("tanh", std::move(out), {x}, [=](const DenseTensor& dout) {
    DenseTensor dx;
    phi::TanhGradKernel(saved, dout, &dx);
    return Grads{dx};
  });
}

Tensor dropout(const Tensor& x, double p, uint64_t seed, bool training) {
  if (!training || p == 0.0) return scale(x, 1.0);
  DenseTensor out, mask;
  phi::DropoutKernel(x.value(), p, seed, &out, &mask);
  return Record("dropout", std::move(out), {x}, [=](const DenseTensor& dout) {
    DenseTensor dx;
    phi::DropoutGradKernel(mask, dout, p, &dx);
    return Grads{dx};
  });
}

Tensor embedding(const Tensor& ids, const Tensor& weight, int64_t padding_idx) {
  DenseTensor out;
  phi::EmbeddingKernel(ids.value(), weight.value(), 0, /*out_of_range_is_zero=*/false,
                       padding_idx, &out);
  DenseTensor idv = ids.value();
  phi::DDim table_dims = weight.dims();
  return Record("embedding", std::move(out), {ids, weight}, [=](const DenseTensor& dout) {
    DenseTensor dw;
    phi::EmbeddingGradKernel(idv, dout, table_dims, 0, padding_idx, &dw);
    return Grads{DenseTensor(), dw};
  });
}

Tensor cross_entropy(const Tensor& logits, const Tensor& label, int64_t ignore_index,
                     const std::string& reduction) {
  PADDLE_ENFORCE(reduction == "mean" || reduction == "sum" || reduction == "none",
                 phi::errors::InvalidArgument(
                     "cross_entropy: reduction must be 'mean', 'sum' or 'none', got '%s'.",
                     reduction.c_str()));
  DenseTensor softmax, loss;
  phi::SoftmaxWithCrossEntropyKernel(logits.value(), label.value(), ignore_index, &softmax,
                                     &loss);
  DenseTensor lv = label.value();
  Tensor per_row =
      Record("softmax_with_cross_entropy", std::move(loss), {logits, label},
             [=](const DenseTensor& dloss) {
               DenseTensor dlogits;
               phi::SoftmaxWithCrossEntropyGradKernel(lv, softmax, dloss, ignore_index,
                                                      &dlogits);
               return Grads{dlogits, DenseTensor()};
             });
  if (reduction == "none") return per_row;
  if (reduction == "sum") return sum(per_row);
  int64_t counted = 0;
  const int64_t* l = lv.data<int64_t>();
  for (int64_t i = 0; i < lv.numel(); ++i) counted += l[i] != ignore_index;
  return scale(sum(per_row), counted > 0 ? 1.0 / static_cast<double>(counted) : 0.0);
}

Tensor mse_loss(const Tensor& x, const Tensor& y) {
  DenseTensor loss;
  phi::MseLossKernel(x.value(), y.value(), &loss);
  DenseTensor xv = x.value(), yv = y.value();
  return Record("mse_loss", std::move(loss), {x, y}, [=](const DenseTensor& dloss) {
    DenseTensor dx, dy;
    phi::MseLossGradKernel(xv, yv, dloss, &dx);
    phi::ScaleKernel(dx, -1.0, 0.0, true, &dy);
    return Grads{dx, dy};
  });
}

}  // namespace functional
}  // namespace paddle_like
