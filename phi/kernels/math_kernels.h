// CPU math kernels a model needs (Eigen, OpenBLAS for matmul), with their gradients.
//
// Conventions, as Paddle's phi kernels:
//  - inputs are CPU tensors, contiguous, of a floating dtype (float32, float64, float16,
//    bfloat16) unless a parameter says otherwise (ids and labels are int64);
//  - outputs are written through `DenseTensor*`: each gets new contiguous storage of the
//    right shape, so an output never aliases an input or a view someone else holds (the
//    in-place kernels, Accumulate and the optimizers, say so);
//  - bad input (dtype, place, shape, an id out of range) raises InvalidArgument naming the
//    kernel, what it expected and what came; nothing is written then.
// float16 and bfloat16 compute in their own Eigen types, element by element (slow, exact to
// their precision); float32 and float64 matmuls run on OpenBLAS (its thread count:
// phi/kernels/blas.h), the rest on Eigen.
#pragma once

#include <cstdint>
#include <vector>

#include "phi/core/dense_tensor.h"

namespace phi {

// ------------------------------------------------------------------ matmul
// out = op(x) @ op(y), op = transpose when the flag is set. x, y are 2-D; the inner dims must
// agree.
void MatmulKernel(const DenseTensor& x, const DenseTensor& y, bool trans_x, bool trans_y,
                  DenseTensor* out);
// Gradients of MatmulKernel; dx or dy may be nullptr (not needed).
void MatmulGradKernel(const DenseTensor& x, const DenseTensor& y, const DenseTensor& dout,
                      bool trans_x, bool trans_y, DenseTensor* dx, DenseTensor* dy);
// MatmulGradKernel that adds the gradients into dx / dy in place (nullptr: not needed):
// each must hold x's / y's dims and dtype, contiguous on the CPU, and share no storage with
// x, y, dout or the other (the in-place exception above: a gradient accumulated straight into
// a parameter's gradient buffer, with no temporary and no separate add).
void MatmulGradAddKernel(const DenseTensor& x, const DenseTensor& y, const DenseTensor& dout,
                         bool trans_x, bool trans_y, DenseTensor* dx, DenseTensor* dy);

// ------------------------------------------------------------------ elementwise
// out = x + y. y has x's shape, or is a bias: 1-D of x's last dim (added to every row), or a
// single element.
void AddKernel(const DenseTensor& x, const DenseTensor& y, DenseTensor* out);
// dx = dout; dy = dout summed down to y's shape (the bias gradient: a column sum).
void AddGradKernel(const DenseTensor& dout, const DDim& y_dims, DenseTensor* dx,
                   DenseTensor* dy);
// out = x - y and out = x * y, same shapes only.
void SubtractKernel(const DenseTensor& x, const DenseTensor& y, DenseTensor* out);
void MultiplyKernel(const DenseTensor& x, const DenseTensor& y, DenseTensor* out);
// out = scale * x + bias (bias_after_scale), or scale * (x + bias).
void ScaleKernel(const DenseTensor& x, double scale, double bias, bool bias_after_scale,
                 DenseTensor* out);
// x += y in place (gradient accumulation); same shape and dtype.
void AccumulateKernel(const DenseTensor& y, DenseTensor* x);
// A 1-element tensor holding the sum (or mean) of all elements, accumulated in double.
void SumAllKernel(const DenseTensor& x, DenseTensor* out);
void MeanAllKernel(const DenseTensor& x, DenseTensor* out);
// A tensor of `dims` x `dtype` filled with `value` (Paddle's full / fill_constant).
void FullKernel(const DDim& dims, DataType dtype, double value, DenseTensor* out);
// out = x converted to `dtype` (any numeric types).
void CastKernel(const DenseTensor& x, DataType dtype, DenseTensor* out);

// ------------------------------------------------------------------ activations
void ReluKernel(const DenseTensor& x, DenseTensor* out);
void ReluGradKernel(const DenseTensor& out, const DenseTensor& dout, DenseTensor* dx);
// gelu(x) = x * Phi(x) (erf form), or the tanh approximation when `approximate`.
void GeluKernel(const DenseTensor& x, bool approximate, DenseTensor* out);
void GeluGradKernel(const DenseTensor& x, const DenseTensor& dout, bool approximate,
                    DenseTensor* dx);
void TanhKernel(const DenseTensor& x, DenseTensor* out);
void TanhGradKernel(const DenseTensor& out, const DenseTensor& dout, DenseTensor* dx);

// ------------------------------------------------------------------ softmax + cross-entropy
// logits [N, C], label int64 [N] (or [N, 1]) -> softmax [N, C], loss [N, 1]. A label equal to
// `ignore_index` gives loss 0 and no gradient; any other label outside [0, C) raises.
void SoftmaxWithCrossEntropyKernel(const DenseTensor& logits, const DenseTensor& label,
                                   int64_t ignore_index, DenseTensor* softmax,
                                   DenseTensor* loss);
// dlogits = (softmax - onehot(label)) * dloss[row].
void SoftmaxWithCrossEntropyGradKernel(const DenseTensor& label, const DenseTensor& softmax,
                                       const DenseTensor& dloss, int64_t ignore_index,
                                       DenseTensor* dlogits);

// ------------------------------------------------------------------ embedding
// out[i, :] = table[ids[i] - start_index, :]. ids int64 of any shape; out is ids.shape + [D].
// With `out_of_range_is_zero` (the vocab-parallel c_embedding), an id outside this shard
// [start_index, start_index + rows) gives a zero row; otherwise it raises. An id equal to
// `padding_idx` (when >= 0) gives a zero row and no gradient.
void EmbeddingKernel(const DenseTensor& ids, const DenseTensor& table, int64_t start_index,
                     bool out_of_range_is_zero, int64_t padding_idx, DenseTensor* out);
// dtable (rows x D, zeroed first) += dout rows at the looked-up ids.
void EmbeddingGradKernel(const DenseTensor& ids, const DenseTensor& dout, const DDim& table_dims,
                         int64_t start_index, int64_t padding_idx, DenseTensor* dtable);

// ------------------------------------------------------------------ concat / split
// Concatenates along `axis` (negative counts from the end); every other dim must agree. Any
// dtype.
void ConcatKernel(const std::vector<const DenseTensor*>& x, int axis, DenseTensor* out);
// Splits along `axis` into pieces of `sections` (they must sum to the dim; one -1 takes the
// rest). Any dtype.
void SplitKernel(const DenseTensor& x, const std::vector<int64_t>& sections, int axis,
                 const std::vector<DenseTensor*>& out);

// ------------------------------------------------------------------ dropout
// Upscale-in-train dropout: mask ~ Bernoulli(1 - p) from a counter-based generator seeded by
// `seed` (the same seed gives the same mask on every machine), out = x * mask / (1 - p).
// mask is uint8 of x's shape.
void DropoutKernel(const DenseTensor& x, double p, uint64_t seed, DenseTensor* out,
                   DenseTensor* mask);
void DropoutGradKernel(const DenseTensor& mask, const DenseTensor& dout, double p,
                       DenseTensor* dx);

// ------------------------------------------------------------------ losses
// loss = mean((x - y)^2) as a 1-element tensor; dx = 2 (x - y) / numel * dloss.
void MseLossKernel(const DenseTensor& x, const DenseTensor& y, DenseTensor* loss);
void MseLossGradKernel(const DenseTensor& x, const DenseTensor& y, const DenseTensor& dloss,
                       DenseTensor* dx);

// ------------------------------------------------------------------ optimizers (in place)
// velocity = momentum * velocity + grad (+ weight_decay * param); param -= lr * velocity.
void SgdMomentumKernel(const DenseTensor& grad, double lr, double momentum,
                       double weight_decay, DenseTensor* param, DenseTensor* velocity);
// Adam (Kingma & Ba) with bias correction at step `step` (1-based); float32 computes in float
// (as torch's), float64 and the 16-bit types in double.
void AdamKernel(const DenseTensor& grad, double lr, double beta1, double beta2, double epsilon,
                int64_t step, DenseTensor* param, DenseTensor* moment1, DenseTensor* moment2);

}  // namespace phi
