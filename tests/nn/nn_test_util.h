// Helpers of the nn / DataParallel tests: deterministic data, a small MLP and comparisons.
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "paddle_like/eager/functional.h"
#include "paddle_like/nn/module.h"
#include "paddle_like/nn/optimizer.h"
#include "phi/kernels/math_kernels.h"

namespace paddle_like {
namespace testing {

namespace F = functional;

// A [rows, cols] tensor of deterministic values in [-1, 1] from `seed`.
inline Tensor Data(int64_t rows, int64_t cols, uint64_t seed,
                   phi::DataType dtype = phi::DataType::FLOAT64) {
  Tensor t = nn::MakeParameter({rows, cols}, dtype, seed, 1.0);
  t.set_requires_grad(false);
  return t;
}

// Rows [begin, end) of a 2-D tensor, as a new leaf (a rank's shard of the global batch).
inline Tensor Rows(const Tensor& t, int64_t begin, int64_t end) {
  phi::DenseTensor slice = t.value().Slice(begin, end);
  phi::DenseTensor own;
  phi::Copy(slice, phi::CPUPlace(), &own);
  return Tensor(std::move(own));
}

// 8 -> 16 -> 16 -> 4 with tanh and relu; the same seed gives the same weights everywhere.
inline std::shared_ptr<nn::Sequential> MakeMlp(uint64_t seed,
                                               phi::DataType dtype = phi::DataType::FLOAT64,
                                               int64_t hidden = 16) {
  auto net = std::make_shared<nn::Sequential>();
  net->append(std::make_shared<nn::Linear>(8, hidden, seed + 1, dtype));
  net->append(std::make_shared<nn::Tanh>());
  net->append(std::make_shared<nn::Linear>(hidden, 16, seed + 2, dtype));
  net->append(std::make_shared<nn::ReLU>());
  net->append(std::make_shared<nn::Linear>(16, 4, seed + 3, dtype));
  return net;
}

inline std::vector<double> AsDoubles(const phi::DenseTensor& t) {
  phi::DenseTensor d;
  phi::CastKernel(t, phi::DataType::FLOAT64, &d);
  return d.ToVector<double>();
}

// max |a - b| over all parameters of two modules with the same structure.
inline double MaxParamDiff(const nn::Module& a, const nn::Module& b) {
  auto pa = a.parameters(), pb = b.parameters();
  EXPECT_EQ(pa.size(), pb.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(pa.size(), pb.size()); ++i) {
    auto va = AsDoubles(pa[i].value()), vb = AsDoubles(pb[i].value());
    EXPECT_EQ(va.size(), vb.size());
    for (size_t k = 0; k < std::min(va.size(), vb.size()); ++k) {
      worst = std::max(worst, std::fabs(va[k] - vb[k]));
    }
  }
  return worst;
}

}  // namespace testing
}  // namespace paddle_like
