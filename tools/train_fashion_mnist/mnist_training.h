// The pieces of the Fashion-MNIST data-parallel demo that the training run and its
// one-process check share: the model, the batches, the steps.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "paddle_like/nn/module.h"
#include "paddle_like/nn/optimizer.h"
#include "tools/train_fashion_mnist/idx_dataset.h"

namespace paddle_like {
namespace tools {

// 784 -> hidden -> hidden/2 -> 10, ReLU, optional dropout after the first layer; weights from
// `seed` (the same on every rank before DataParallel broadcasts anyway).
std::shared_ptr<nn::Sequential> MakeClassifier(int64_t pixels, int64_t hidden, double dropout,
                                               uint64_t seed, phi::DataType dtype);

// Images `indices[begin, begin + count)` of `data`, normalized ((x / 255 - mean) / std), as
// a [count, pixels] tensor of `dtype` (float32 or float64), and their int64 labels.
struct Batch {
  Tensor images;
  Tensor labels;
};
Batch MakeBatch(const IdxDataset& data, const std::vector<int64_t>& indices, int64_t begin,
                int64_t count, phi::DataType dtype);

// The sample order of an epoch: a permutation of [0, n) from (seed, epoch), the same on
// every rank.
std::vector<int64_t> EpochOrder(int64_t n, uint64_t seed, int epoch);

// Forward and backward of the mean cross-entropy of `model` on `batch`, the loss scaled by
// `loss_scale` before backward; returns the unscaled loss.
double ForwardBackward(nn::Module& model, const Batch& batch, double loss_scale = 1.0);
// ForwardBackward, then one optimizer step; returns the loss.
double TrainStep(nn::Module& model, optimizer::Optimizer& opt, const Batch& batch);

// Correct predictions of `model` over samples [begin, end) of `data` (eval mode, no grad).
int64_t CountCorrect(nn::Module& model, const IdxDataset& data, int64_t begin, int64_t end,
                     phi::DataType dtype);

}  // namespace tools
}  // namespace paddle_like
