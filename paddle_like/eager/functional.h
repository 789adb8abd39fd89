// Differentiable ops on eager Tensors (paddle.nn.functional / paddle.* names), built on the
// phi/kernels CPU kernels. Each records a GradNode when grad is enabled and an input
// requires grad; bad input raises the kernel's InvalidArgument.
#pragma once

#include <cstdint>
#include <string>

#include "paddle_like/eager/tensor.h"

namespace paddle_like {
namespace functional {

// ---- math
// x, y 2-D; op(x) @ op(y).
Tensor matmul(const Tensor& x, const Tensor& y, bool transpose_x = false,
              bool transpose_y = false);
// y: x's shape, a bias of x's last dim, or one element.
Tensor add(const Tensor& x, const Tensor& y);
Tensor subtract(const Tensor& x, const Tensor& y);  // same shapes
Tensor multiply(const Tensor& x, const Tensor& y);  // same shapes
Tensor scale(const Tensor& x, double scale, double bias = 0.0);
Tensor sum(const Tensor& x);   // all elements, one-element result
Tensor mean(const Tensor& x);  // all elements, one-element result
Tensor reshape(const Tensor& x, const phi::DDim& dims);
Tensor cast(const Tensor& x, phi::DataType dtype);  // floating to floating is differentiable

// ---- nn
// x @ weight + bias; weight is [in, out] (Paddle's layout), bias [out] or undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, bool approximate = false);
Tensor tanh(const Tensor& x);
// Upscale-in-train dropout with a mask drawn from `seed`; identity when !training or p == 0.
Tensor dropout(const Tensor& x, double p, uint64_t seed, bool training);
// ids int64 (any shape) -> ids.shape + [dim]; padding_idx < 0: none.
Tensor embedding(const Tensor& ids, const Tensor& weight, int64_t padding_idx = -1);

// ---- losses
// Softmax cross-entropy of logits [N, C] against int64 labels [N] or [N, 1]. reduction:
// "mean" (over the labels that are not ignore_index), "sum" or "none" ([N, 1]).
Tensor cross_entropy(const Tensor& logits, const Tensor& label, int64_t ignore_index = -100,
                     const std::string& reduction = "mean");
// mean((x - y)^2).
Tensor mse_loss(const Tensor& x, const Tensor& y);

}  // namespace functional
}  // namespace paddle_like
