#include "tools/train_fashion_mnist/mnist_training.h"

#include <random>
#include <type_traits>

#include "paddle_like/eager/autograd.h"
#include "paddle_like/eager/functional.h"
#include "phi/core/errors.h"
#include "phi/kernels/math_kernels.h"

namespace paddle_like {
namespace tools {

namespace {
// Fashion-MNIST's pixel mean and standard deviation (of x / 255 over the training set).
constexpr double kMean = 0.2860;
constexpr double kStd = 0.3530;
}  // namespace

std::shared_ptr<nn::Sequential> MakeClassifier(int64_t pixels, int64_t hidden, double dropout,
                                               uint64_t seed, phi::DataType dtype) {
  auto net = std::make_shared<nn::Sequential>();
  net->append(std::make_shared<nn::Linear>(pixels, hidden, seed + 1, dtype));
  net->append(std::make_shared<nn::ReLU>());
  if (dropout > 0) net->append(std::make_shared<nn::Dropout>(dropout, seed + 7));
  net->append(std::make_shared<nn::Linear>(hidden, hidden / 2, seed + 2, dtype));
  net->append(std::make_shared<nn::ReLU>());
  net->append(std::make_shared<nn::Linear>(hidden / 2, 10, seed + 3, dtype));
  return net;
}

Batch MakeBatch(const IdxDataset& data, const std::vector<int64_t>& indices, int64_t begin,
                int64_t count, phi::DataType dtype) {
  PADDLE_ENFORCE(dtype == phi::DataType::FLOAT32 || dtype == phi::DataType::FLOAT64,
                 phi::errors::InvalidArgument("MakeBatch: float32 or float64, got %s.",
                                              phi::DataTypeToString(dtype)));
  const int64_t pixels = data.pixels();
  phi::DenseTensor x(phi::CPUPlace(), dtype, phi::DDim({count, pixels}));
  phi::DenseTensor y(phi::CPUPlace(), phi::DataType::INT64, phi::DDim({count}));
  int64_t* py = y.data<int64_t>();
  auto fill = [&](auto* px) {
    using T = std::remove_pointer_t<decltype(px)>;
    // A pixel has 256 values: normalize each once, in double, rounded once to T (the value
    // a double tensor cast to T would hold).
    T table[256];
    for (int v = 0; v < 256; ++v) table[v] = static_cast<T>((v / 255.0 - kMean) / kStd);
    for (int64_t i = 0; i < count; ++i) {
      int64_t sample = indices[begin + i];
      const uint8_t* img = data.images.data() + sample * pixels;
      // The samples are in random order, so each image is a fresh cache miss: fetch the
      // next one while this one is converted.
      if (i + 1 < count) {
        const uint8_t* next = data.images.data() + indices[begin + i + 1] * pixels;
        for (int64_t k = 0; k < pixels; k += 64) __builtin_prefetch(next + k);
      }
      T* row = px + i * pixels;
      for (int64_t k = 0; k < pixels; ++k) row[k] = table[img[k]];
      py[i] = data.labels[sample];
    }
  };
  if (dtype == phi::DataType::FLOAT32) fill(x.data<float>());
  else fill(x.data<double>());
  return {Tensor(std::move(x)), Tensor(std::move(y))};
}

std::vector<int64_t> EpochOrder(int64_t n, uint64_t seed, int epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  // Fisher-Yates on raw 64-bit draws (std::shuffle's use of the engine is not specified).
  std::mt19937_64 gen(seed * 1000003u + static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[gen() % static_cast<uint64_t>(i + 1)]);
  return order;
}

double ForwardBackward(nn::Module& model, const Batch& batch, double loss_scale) {
  Tensor loss = functional::cross_entropy(model(batch.images), batch.labels);
  (loss_scale == 1.0 ? loss : functional::scale(loss, loss_scale)).backward();
  phi::DenseTensor d;
  phi::CastKernel(loss.value(), phi::DataType::FLOAT64, &d);
  return d.data<double>()[0];
}

double TrainStep(nn::Module& model, optimizer::Optimizer& opt, const Batch& batch) {
  double loss = ForwardBackward(model, batch);
  opt.step();
  opt.clear_grad();
  return loss;
}

int64_t CountCorrect(nn::Module& model, const IdxDataset& data, int64_t begin, int64_t end,
                     phi::DataType dtype) {
  autograd::NoGradGuard no_grad;
  bool was_training = model.training();
  model.eval();
  std::vector<int64_t> all(static_cast<size_t>(data.count));
  for (int64_t i = 0; i < data.count; ++i) all[i] = i;
  int64_t correct = 0;
  const int64_t chunk = 500;
  for (int64_t at = begin; at < end; at += chunk) {
    int64_t n = std::min(chunk, end - at);
    Batch b = MakeBatch(data, all, at, n, dtype);
    phi::DenseTensor logits;
    phi::CastKernel(model(b.images).value(), phi::DataType::FLOAT64, &logits);
    const double* p = logits.data<double>();
    const int64_t* label = b.labels.value().data<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t best = 0;
      for (int64_t c = 1; c < 10; ++c) {
        if (p[i * 10 + c] > p[i * 10 + best]) best = c;
      }
      correct += best == label[i];
    }
  }
  if (was_training) model.train();
  return correct;
}

}  // namespace tools
}  // namespace paddle_like
