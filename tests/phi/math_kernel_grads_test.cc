// The math kernels' gradients: against the formulas evaluated by naive loops written here, and
// against central finite differences of the forward kernels in float64 (the loss being
// sum(w * out) for a random w, so dout = w). And the optimizers against hand-written loops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "phi/kernels/math_kernels.h"
#include "tests/phi/kernel_test_util.h"

namespace {

using namespace kernel_test;  // NOLINT: the test helpers
using phi::DataTypeToString;

using Fn = std::function<std::vector<double>(const std::vector<double>&)>;

// d/dv sum_i w[i] * f(v)[i], by central differences with step h.
std::vector<double> NumericGrad(const Fn& f, std::vector<double> v, const std::vector<double>& w,
                                double h) {
  std::vector<double> g(v.size());
  auto loss = [&](const std::vector<double>& at) {
    auto out = f(at);
    EXPECT_EQ(out.size(), w.size());
    double s = 0;
    for (size_t i = 0; i < out.size(); ++i) s += w[i] * out[i];
    return s;
  };
  for (size_t i = 0; i < v.size(); ++i) {
    double keep = v[i];
    v[i] = keep + h;
    double up = loss(v);
    v[i] = keep - h;
    double down = loss(v);
    v[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

// Finite-difference tolerance for smooth float64 functions with h = 1e-5: truncation h^2 f'''
// and cancellation eps / h are both ~1e-10.
constexpr Tol kFd = {1e-7, 1e-7};

// ------------------------------------------------------------------ matmul

// dx and dy of out = op(x) op(y) by the index formulas dX[i,p] = sum_j dout[i,j] Y[p,j] and
// dY[p,j] = sum_i X[i,p] dout[i,j], laid out as x and y (transposed back when op transposes).
void NaiveMatmulGrad(const std::vector<double>& x, bool tx, const std::vector<double>& y,
                     bool ty, const std::vector<double>& dout, int64_t m, int64_t k, int64_t n,
                     std::vector<double>* dx, std::vector<double>* dy) {
  dx->assign(m * k, 0.0);
  dy->assign(k * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      double s = 0;
      for (int64_t j = 0; j < n; ++j) s += dout[i * n + j] * OpAt(y, ty ? k : n, ty, p, j);
      (*dx)[tx ? p * m + i : i * k + p] = s;
    }
  }
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t i = 0; i < m; ++i) s += OpAt(x, tx ? m : k, tx, i, p) * dout[i * n + j];
      (*dy)[ty ? j * k + p : p * n + j] = s;
    }
  }
}

TEST(MathKernelsGrads, MatmulGradAllTransposeCombinationsMatchNaiveLoops) {
  const int64_t m = 3, k = 5, n = 4;
  for (DataType dt : kAllFloat) {
    for (bool tx : {false, true}) {
      for (bool ty : {false, true}) {
        SCOPED_TRACE(std::string(DataTypeToString(dt)) + " tx=" + std::to_string(tx) +
                     " ty=" + std::to_string(ty));
        DDim xd = tx ? DDim({k, m}) : DDim({m, k}), yd = ty ? DDim({n, k}) : DDim({k, n});
        DenseTensor x = Make(Random(m * k, 1), xd, dt);
        DenseTensor y = Make(Random(k * n, 2), yd, dt);
        DenseTensor dout = Make(Random(m * n, 3), DDim({m, n}), dt);
        std::vector<double> want_dx, want_dy;
        NaiveMatmulGrad(Values(x), tx, Values(y), ty, Values(dout), m, k, n, &want_dx, &want_dy);
        DenseTensor dx, dy;
        phi::MatmulGradKernel(x, y, dout, tx, ty, &dx, &dy);
        EXPECT_EQ(dx.dims(), xd);
        EXPECT_EQ(dy.dims(), yd);
        EXPECT_EQ(dx.dtype(), dt);
        ExpectClose(Values(dx), want_dx, TolFor(dt), "dx");
        ExpectClose(Values(dy), want_dy, TolFor(dt), "dy");
        // Either output may be skipped.
        DenseTensor only_dy;
        phi::MatmulGradKernel(x, y, dout, tx, ty, nullptr, &only_dy);
        EXPECT_EQ(Values(only_dy), Values(dy));
        // The gradients may be written over x and y themselves.
        phi::MatmulGradKernel(x, y, dout, tx, ty, &x, &y);
        EXPECT_EQ(Values(x), Values(dx));
        EXPECT_EQ(Values(y), Values(dy));
      }
    }
  }
}

TEST(MathKernelsGrads, MatmulGradMatchesFiniteDifferencesInFloat64) {
  const int64_t m = 2, k = 3, n = 4;
  for (bool tx : {false, true}) {
    for (bool ty : {false, true}) {
      SCOPED_TRACE("tx=" + std::to_string(tx) + " ty=" + std::to_string(ty));
      DDim xd = tx ? DDim({k, m}) : DDim({m, k}), yd = ty ? DDim({n, k}) : DDim({k, n});
      auto xv = Random(m * k, 4), yv = Random(k * n, 5), w = Random(m * n, 6);
      auto forward = [&](const std::vector<double>& a, const std::vector<double>& b) {
        DenseTensor out;
        phi::MatmulKernel(Make(a, xd, kF64), Make(b, yd, kF64), tx, ty, &out);
        return Values(out);
      };
      DenseTensor dx, dy;
      phi::MatmulGradKernel(Make(xv, xd, kF64), Make(yv, yd, kF64), Make(w, DDim({m, n}), kF64),
                            tx, ty, &dx, &dy);
      Fn fx = [&](const std::vector<double>& a) { return forward(a, yv); };
      Fn fy = [&](const std::vector<double>& b) { return forward(xv, b); };
      ExpectClose(Values(dx), NumericGrad(fx, xv, w, 1e-5), kFd, "dx");
      ExpectClose(Values(dy), NumericGrad(fy, yv, w, 1e-5), kFd, "dy");
    }
  }
}

// MatmulGradAddKernel adds what MatmulGradKernel returns into the tensors it is given (the
// autograd engine hands it a parameter's gradient buffer): start + gradient, every transpose
// and dtype, either output alone.
TEST(MathKernelsGrads, MatmulGradAddAddsTheGradientsInPlace) {
  const int64_t m = 3, k = 5, n = 4;
  for (DataType dt : kAllFloat) {
    for (bool tx : {false, true}) {
      for (bool ty : {false, true}) {
        SCOPED_TRACE(std::string(DataTypeToString(dt)) + " tx=" + std::to_string(tx) +
                     " ty=" + std::to_string(ty));
        DDim xd = tx ? DDim({k, m}) : DDim({m, k}), yd = ty ? DDim({n, k}) : DDim({k, n});
        DenseTensor x = Make(Random(m * k, 1), xd, dt);
        DenseTensor y = Make(Random(k * n, 2), yd, dt);
        DenseTensor dout = Make(Random(m * n, 3), DDim({m, n}), dt);
        DenseTensor dx, dy;
        phi::MatmulGradKernel(x, y, dout, tx, ty, &dx, &dy);
        auto start_x = Random(m * k, 7), start_y = Random(k * n, 8);
        DenseTensor gx = Make(start_x, xd, dt), gy = Make(start_y, yd, dt);
        const void* gx_data = gx.data();
        phi::MatmulGradAddKernel(x, y, dout, tx, ty, &gx, &gy);
        EXPECT_EQ(gx.data(), gx_data) << "in place";
        // The starting values as the dtype holds them, plus the gradients.
        std::vector<double> want_x = Values(Make(start_x, xd, dt)), gdx = Values(dx);
        std::vector<double> want_y = Values(Make(start_y, yd, dt)), gdy = Values(dy);
        for (size_t i = 0; i < want_x.size(); ++i) want_x[i] += gdx[i];
        for (size_t i = 0; i < want_y.size(); ++i) want_y[i] += gdy[i];
        ExpectClose(Values(gx), want_x, TolFor(dt), "dx");
        ExpectClose(Values(gy), want_y, TolFor(dt), "dy");
        DenseTensor only_y = Make(start_y, yd, dt);
        phi::MatmulGradAddKernel(x, y, dout, tx, ty, nullptr, &only_y);
        EXPECT_EQ(Values(only_y), Values(gy));
      }
    }
  }
}

TEST(MathKernelsGrads, MatmulGradAddRejectsAliasesAndWrongShapes) {
  DenseTensor x = Make(Random(6, 1), DDim({2, 3}), kF32);
  DenseTensor y = Make(Random(12, 2), DDim({3, 4}), kF32);
  DenseTensor dout = Make(Random(8, 3), DDim({2, 4}), kF32);
  DenseTensor gy = Make(Random(12, 4), DDim({3, 4}), kF32);
  EXPECT_INVALID(phi::MatmulGradAddKernel(x, y, dout, false, false, nullptr, &y),
                 "matmul_grad_add", "dy shares storage");
  DenseTensor wrong = Make(Random(12, 5), DDim({4, 3}), kF32);
  EXPECT_INVALID(phi::MatmulGradAddKernel(x, y, dout, false, false, nullptr, &wrong),
                 "dy must be float32 [3, 4]");
  DenseTensor f64 = Make(Random(12, 6), DDim({3, 4}), kF64);
  EXPECT_INVALID(phi::MatmulGradAddKernel(x, y, dout, false, false, nullptr, &f64), "float32");
  DenseTensor view = gy;  // same storage
  DenseTensor gx = Make(Random(6, 7), DDim({2, 3}), kF32);
  EXPECT_INVALID(phi::MatmulGradAddKernel(x, y, dout, false, false, &gx, &gx), "dy must be");
  auto before = Values(gy);
  EXPECT_INVALID(phi::MatmulGradAddKernel(x, y, dout, false, false, &view, &gy), "dx must be");
  EXPECT_EQ(Values(gy), before) << "nothing written on bad input";
}

TEST(MathKernelsGrads, MatmulGradEmptyInnerDimAndBadInputs) {
  DenseTensor dx, dy;
  phi::MatmulGradKernel(Make({}, DDim({3, 0}), kF32), Make({}, DDim({0, 4}), kF32),
                        Make(Random(12, 1), DDim({3, 4}), kF32), false, false, &dx, &dy);
  EXPECT_EQ(dx.dims(), DDim({3, 0}));
  EXPECT_EQ(dy.dims(), DDim({0, 4}));
  DenseTensor x = Make(Random(15, 1), DDim({3, 5}), kF32);
  DenseTensor y = Make(Random(20, 2), DDim({5, 4}), kF32);
  DenseTensor dout = Make(Random(12, 3), DDim({3, 4}), kF32);
  DenseTensor none, gx, gy;
  EXPECT_INVALID(phi::MatmulGradKernel(x, y, Make(Random(15, 3), DDim({3, 5}), kF32), false,
                                       false, &gx, &gy),
                 "dout", "[3, 5]", "[3, 4]");
  EXPECT_INVALID(phi::MatmulGradKernel(x, y, dout, true, false, &gx, &gy), "inner dims");
  EXPECT_INVALID(phi::MatmulGradKernel(x, Make(Random(20, 2), DDim({5, 4}), kF64), dout, false,
                                       false, &gx, &gy),
                 "float64");
  EXPECT_INVALID(phi::MatmulGradKernel(none, y, dout, false, false, &gx, &gy), "not initialized");
  EXPECT_INVALID(phi::MatmulGradKernel(x, y.AsStrided(DDim({5, 4}), {1, 5}, 0), dout, false,
                                       false, &gx, &gy),
                 "contiguous");
  EXPECT_FALSE(gx.initialized());
  EXPECT_FALSE(gy.initialized());
}

// ------------------------------------------------------------------ add

TEST(MathKernelsGrads, AddGradSumsDownToTheShapeOfY) {
  const int64_t rows = 6, cols = 4;
  for (DataType dt : kAllFloat) {
    SCOPED_TRACE(DataTypeToString(dt));
    DenseTensor dout = Make(Random(rows * cols, 1), DDim({2, 3, cols}), dt);
    auto d = Values(dout);
    std::vector<double> col_sum(cols, 0.0);
    double total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        col_sum[c] += d[r * cols + c];
        total += d[r * cols + c];
      }
    }
    DenseTensor dx, dy;
    phi::AddGradKernel(dout, dout.dims(), &dx, &dy);
    EXPECT_EQ(Values(dx), d);
    EXPECT_EQ(Values(dy), d);
    EXPECT_NE(dx.data(), dout.data()) << "dx has its own storage";
    phi::AddGradKernel(dout, DDim({cols}), &dx, &dy);
    EXPECT_EQ(Values(dx), d);
    EXPECT_EQ(dy.dims(), DDim({cols}));
    ExpectClose(Values(dy), col_sum, TolFor(dt), "bias: column sum");
    phi::AddGradKernel(dout, DDim({1}), nullptr, &dy);
    EXPECT_EQ(dy.dims(), DDim({1}));
    ExpectClose(Values(dy), {total}, TolFor(dt), "scalar: sum");
  }
  DenseTensor dout = Make(Random(12, 1), DDim({3, 4}), kF32), dx, dy;
  EXPECT_INVALID(phi::AddGradKernel(dout, DDim({3}), &dx, &dy), "[3, 4]", "[3]");
  EXPECT_INVALID(phi::AddGradKernel(dout, DDim({4, 3}), &dx, &dy), "[4, 3]");
  EXPECT_FALSE(dx.initialized());
}

// ------------------------------------------------------------------ activations

TEST(MathKernelsGrads, ReluAndTanhGradsFollowTheirOutputs) {
  for (DataType dt : kAllFloat) {
    SCOPED_TRACE(DataTypeToString(dt));
    std::vector<double> xv = Random(30, 1, -3, 3);
    xv[0] = 0.0;  // relu'(0) is taken as 0
    DenseTensor x = Make(xv, DDim({5, 6}), dt);
    DenseTensor dout = Make(Random(30, 2), DDim({5, 6}), dt);
    DenseTensor relu, th, dx;
    phi::ReluKernel(x, &relu);
    phi::TanhKernel(x, &th);
    auto r = Values(relu), t = Values(th), d = Values(dout);
    std::vector<double> want_relu, want_tanh;
    for (size_t i = 0; i < d.size(); ++i) {
      want_relu.push_back(r[i] > 0 ? d[i] : 0.0);
      want_tanh.push_back(d[i] * (1 - t[i] * t[i]));
    }
    phi::ReluGradKernel(relu, dout, &dx);
    EXPECT_EQ(Values(dx), want_relu);
    phi::TanhGradKernel(th, dout, &dx);
    ExpectClose(Values(dx), want_tanh, TolFor(dt), "tanh");
    EXPECT_INVALID(phi::ReluGradKernel(relu, Make(Random(6, 2), DDim({6}), dt), &dx),
                   "relu_grad", "[5, 6]", "[6]");
  }
}

TEST(MathKernelsGrads, ActivationGradsMatchFiniteDifferencesInFloat64) {
  std::vector<double> xv = Random(24, 3, -4, 4);
  xv[1] = 0.0;
  std::vector<double> w = Random(24, 4);
  DenseTensor x = Make(xv, DDim({4, 6}), kF64), dout = Make(w, DDim({4, 6}), kF64);
  for (bool approximate : {false, true}) {
    SCOPED_TRACE(approximate ? "gelu tanh form" : "gelu erf form");
    Fn gelu = [&](const std::vector<double>& v) {
      DenseTensor out;
      phi::GeluKernel(Make(v, DDim({4, 6}), kF64), approximate, &out);
      return Values(out);
    };
    DenseTensor dx;
    phi::GeluGradKernel(x, dout, approximate, &dx);
    ExpectClose(Values(dx), NumericGrad(gelu, xv, w, 1e-5), kFd);
    // And float32 against the analytic derivative written out here.
    std::vector<double> want;
    DenseTensor x32 = Make(xv, DDim({4, 6}), kF32), d32 = Make(w, DDim({4, 6}), kF32);
    auto xr = Values(x32), wr = Values(d32);
    for (size_t i = 0; i < xr.size(); ++i) {
      double v = xr[i], deriv;
      if (approximate) {
        double c = std::sqrt(2 / M_PI), u = c * (v + 0.044715 * v * v * v);
        double t = std::tanh(u);
        deriv = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * c * (1 + 3 * 0.044715 * v * v);
      } else {
        deriv = 0.5 * std::erfc(-v / std::sqrt(2.0)) + v * std::exp(-v * v / 2) / std::sqrt(2 * M_PI);
      }
      want.push_back(wr[i] * deriv);
    }
    phi::GeluGradKernel(x32, d32, approximate, &dx);
    ExpectClose(Values(dx), want, TolFor(kF32), "float32");
  }
  Fn tanh = [&](const std::vector<double>& v) {
    DenseTensor out;
    phi::TanhKernel(Make(v, DDim({4, 6}), kF64), &out);
    return Values(out);
  };
  DenseTensor out, dx;
  phi::TanhKernel(x, &out);
  phi::TanhGradKernel(out, dout, &dx);
  ExpectClose(Values(dx), NumericGrad(tanh, xv, w, 1e-5), kFd, "tanh");
}

// ------------------------------------------------------------------ softmax + cross-entropy

TEST(MathKernelsGrads, SoftmaxCrossEntropyGradIsSoftmaxMinusOneHot) {
  const int64_t n = 5, c = 4;
  std::vector<int64_t> labels = {3, -100, 0, 2, 1};
  for (DataType dt : kAllFloat) {
    SCOPED_TRACE(DataTypeToString(dt));
    DenseTensor logits = Make(Random(n * c, 1, -2, 2), DDim({n, c}), dt);
    DenseTensor dloss = Make(Random(n, 2, 0.5, 1.5), DDim({n, 1}), dt);
    for (DDim label_dims : {DDim({n}), DDim({n, 1})}) {
      SCOPED_TRACE(label_dims.to_str());
      DenseTensor label = MakeIds(labels, label_dims);
      DenseTensor softmax, loss, dlogits;
      phi::SoftmaxWithCrossEntropyKernel(logits, label, -100, &softmax, &loss);
      phi::SoftmaxWithCrossEntropyGradKernel(label, softmax, dloss, -100, &dlogits);
      EXPECT_EQ(dlogits.dims(), DDim({n, c}));
      auto s = Values(softmax), d = Values(dloss);
      std::vector<double> want(n * c);
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < c; ++j) {
          double g = (s[i * c + j] - (j == labels[i] ? 1.0 : 0.0)) * d[i];
          want[i * c + j] = labels[i] == -100 ? 0.0 : g;
        }
      }
      ExpectClose(Values(dlogits), want, TolFor(dt));
      for (int64_t j = 0; j < c; ++j) EXPECT_EQ(Values(dlogits)[1 * c + j], 0.0) << "ignored";
    }
  }
}

TEST(MathKernelsGrads, SoftmaxCrossEntropyGradMatchesFiniteDifferencesInFloat64) {
  const int64_t n = 4, c = 5;
  std::vector<int64_t> labels = {4, 0, 7, 2};  // 7 is ignore_index here
  auto xv = Random(n * c, 3, -3, 3), w = Random(n, 4, 0.5, 1.5);
  Fn loss = [&](const std::vector<double>& v) {
    DenseTensor softmax, out;
    phi::SoftmaxWithCrossEntropyKernel(Make(v, DDim({n, c}), kF64), MakeIds(labels), 7, &softmax,
                                       &out);
    return Values(out);
  };
  DenseTensor softmax, out, dlogits;
  phi::SoftmaxWithCrossEntropyKernel(Make(xv, DDim({n, c}), kF64), MakeIds(labels), 7, &softmax,
                                     &out);
  phi::SoftmaxWithCrossEntropyGradKernel(MakeIds(labels), softmax, Make(w, DDim({n}), kF64), 7,
                                         &dlogits);
  ExpectClose(Values(dlogits), NumericGrad(loss, xv, w, 1e-5), kFd);
}

TEST(MathKernelsGrads, SoftmaxCrossEntropyGradRejectsBadInput) {
  DenseTensor softmax = Make(std::vector<double>(6, 1.0 / 3), DDim({2, 3}), kF32);
  DenseTensor dloss = Make({1, 1}, DDim({2, 1}), kF32), dx;
  EXPECT_INVALID(phi::SoftmaxWithCrossEntropyGradKernel(MakeIds({0, 5}), softmax, dloss, -100,
                                                        &dx),
                 "label[1] = 5", "[0, 3)");
  EXPECT_INVALID(phi::SoftmaxWithCrossEntropyGradKernel(MakeIds({0, 1}), softmax,
                                                        Make({1, 1, 1}, DDim({3}), kF32), -100,
                                                        &dx),
                 "dloss", "[3]");
  EXPECT_INVALID(phi::SoftmaxWithCrossEntropyGradKernel(MakeIds({0, 1}), softmax,
                                                        Make({1, 1}, DDim({2}), kF64), -100, &dx),
                 "float64");
  EXPECT_INVALID(phi::SoftmaxWithCrossEntropyGradKernel(MakeIds({0, 1, 2, 0}).AsStrided(
                                                            DDim({2}), {2}, 0),
                                                        softmax, dloss, -100, &dx),
                 "label", "contiguous");
  EXPECT_FALSE(dx.initialized());
}

// ------------------------------------------------------------------ embedding

TEST(MathKernelsGrads, EmbeddingGradAccumulatesDuplicateIdsAndSkipsPadding) {
  const int64_t rows = 6, width = 3;
  std::vector<int64_t> ids = {2, 5, 2, 0, 4, 2, 5, 4};
  for (DataType dt : kAllFloat) {
    for (int64_t padding : {int64_t{-1}, int64_t{4}}) {
      SCOPED_TRACE(std::string(DataTypeToString(dt)) + " padding_idx " +
                   std::to_string(padding));
      DenseTensor dout = Make(Random(8 * width, 1), DDim({2, 4, width}), dt);
      auto d = Values(dout);
      std::vector<double> want(rows * width, 0.0);
      for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] == padding) continue;
        for (int64_t k = 0; k < width; ++k) want[ids[i] * width + k] += d[i * width + k];
      }
      DenseTensor dtable;
      phi::EmbeddingGradKernel(MakeIds(ids, DDim({2, 4})), dout, DDim({rows, width}), 0, padding,
                               &dtable);
      EXPECT_EQ(dtable.dims(), DDim({rows, width}));
      EXPECT_EQ(dtable.dtype(), dt);
      ExpectClose(Values(dtable), want, TolFor(dt));
      for (int64_t r : {int64_t{1}, int64_t{3}}) {
        for (int64_t k = 0; k < width; ++k) EXPECT_EQ(Values(dtable)[r * width + k], 0.0);
      }
    }
  }
}

TEST(MathKernelsGrads, VocabParallelEmbeddingGradTouchesOnlyThisShard) {
  // Shard [3, 6) of the vocabulary; ids elsewhere give no gradient here.
  std::vector<int64_t> ids = {0, 3, 5, 6, 3, 9, 4};
  DenseTensor dout = Make(Random(7 * 2, 2), DDim({7, 2}), kF64);
  auto d = Values(dout);
  std::vector<double> want(3 * 2, 0.0);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 3 || ids[i] >= 6) continue;
    for (int64_t k = 0; k < 2; ++k) want[(ids[i] - 3) * 2 + k] += d[i * 2 + k];
  }
  DenseTensor dtable;
  phi::EmbeddingGradKernel(MakeIds(ids), dout, DDim({3, 2}), 3, -1, &dtable);
  ExpectClose(Values(dtable), want, TolFor(kF64));
  EXPECT_INVALID(phi::EmbeddingGradKernel(MakeIds(ids), Make(Random(12, 2), DDim({6, 2}), kF64),
                                          DDim({3, 2}), 3, -1, &dtable),
                 "embedding_grad", "[6, 2]");
  DenseTensor none;
  EXPECT_INVALID(phi::EmbeddingGradKernel(MakeIds(ids), dout, DDim({6}), 3, -1, &none),
                 "embedding_grad", "[6]");
  EXPECT_FALSE(none.initialized());
}

// ------------------------------------------------------------------ dropout and MSE

TEST(MathKernelsGrads, DropoutGradAppliesTheForwardMaskAndScale) {
  for (DataType dt : kAllFloat) {
    SCOPED_TRACE(DataTypeToString(dt));
    DenseTensor x = Make(Random(200, 1), DDim({10, 20}), dt);
    DenseTensor dout = Make(Random(200, 2), DDim({10, 20}), dt);
    DenseTensor out, mask, dx;
    phi::DropoutKernel(x, 0.25, 9, &out, &mask);
    phi::DropoutGradKernel(mask, dout, 0.25, &dx);
    auto m = mask.ToVector<uint8_t>();
    auto d = Values(dout), o = Values(out), xv = Values(x), g = Values(dx);
    std::vector<double> want_dx, want_out;
    for (size_t i = 0; i < m.size(); ++i) {
      want_dx.push_back(m[i] ? d[i] / 0.75 : 0.0);
      want_out.push_back(m[i] ? xv[i] / 0.75 : 0.0);
      if (!m[i]) {
        EXPECT_EQ(g[i], 0.0);
      }
    }
    ExpectClose(g, want_dx, TolFor(dt), "dx");
    ExpectClose(o, want_out, TolFor(dt), "out");
  }
  DenseTensor dout = Make(Random(6, 2), DDim({2, 3}), kF32), dx;
  DenseTensor mask = Make({1, 0, 1, 1, 0, 1}, DDim({2, 3}), DataType::UINT8);
  EXPECT_INVALID(phi::DropoutGradKernel(Make({1, 0, 1, 1, 0, 1}, DDim({3, 2}), DataType::UINT8),
                                        dout, 0.5, &dx),
                 "mask", "[3, 2]");
  EXPECT_INVALID(phi::DropoutGradKernel(Make({1, 0, 1, 1, 0, 1}, DDim({2, 3}), kF32), dout, 0.5,
                                        &dx),
                 "uint8", "float32");
  EXPECT_INVALID(phi::DropoutGradKernel(mask, dout, 1.0, &dx), "[0, 1)");
  EXPECT_INVALID(phi::DropoutGradKernel(mask.FlatView(0, 6).AsStrided(DDim({2, 3}), {1, 2}, 0),
                                        dout, 0.5, &dx),
                 "mask", "contiguous");
  EXPECT_FALSE(dx.initialized());
}

TEST(MathKernelsGrads, MseLossGradMatchesFormulaAndFiniteDifferences) {
  for (DataType dt : kAllFloat) {
    SCOPED_TRACE(DataTypeToString(dt));
    DenseTensor x = Make(Random(12, 1), DDim({3, 4}), dt);
    DenseTensor y = Make(Random(12, 2), DDim({3, 4}), dt);
    auto xv = Values(x), yv = Values(y);
    std::vector<double> want;
    for (size_t i = 0; i < 12; ++i) want.push_back(2 * (xv[i] - yv[i]) / 12 * 0.5);
    DenseTensor dx;
    phi::MseLossGradKernel(x, y, Make({0.5}, DDim({1}), dt), &dx);
    EXPECT_EQ(dx.dims(), x.dims());
    ExpectClose(Values(dx), want, TolFor(dt));
  }
  auto xv = Random(6, 3), yv = Random(6, 4);
  Fn loss = [&](const std::vector<double>& v) {
    DenseTensor out;
    phi::MseLossKernel(Make(v, DDim({2, 3}), kF64), Make(yv, DDim({2, 3}), kF64), &out);
    return Values(out);
  };
  DenseTensor dx;
  phi::MseLossGradKernel(Make(xv, DDim({2, 3}), kF64), Make(yv, DDim({2, 3}), kF64),
                         Make({1.5}, DDim({1}), kF64), &dx);
  ExpectClose(Values(dx), NumericGrad(loss, xv, {1.5}, 1e-5), kFd);
  EXPECT_INVALID(phi::MseLossGradKernel(Make(xv, DDim({2, 3}), kF64), Make(yv, DDim({2, 3}), kF64),
                                        Make({1, 1}, DDim({2}), kF64), &dx),
                 "one element", "[2]");
}

// ------------------------------------------------------------------ optimizers

TEST(MathKernelsOptimizer, SgdMomentumMatchesHandLoopOverThreeSteps) {
  const int64_t n = 10;
  const double lr = 0.1, momentum = 0.9;
  for (DataType dt : kFullFloat) {
    for (double wd : {0.0, 0.01}) {
      SCOPED_TRACE(std::string(DataTypeToString(dt)) + " weight_decay " + std::to_string(wd));
      DenseTensor param = Make(Random(n, 1), DDim({2, 5}), dt);
      DenseTensor velocity = Make(std::vector<double>(n, 0.0), DDim({2, 5}), dt);
      auto p = Values(param);
      std::vector<double> v(n, 0.0);
      for (int step = 0; step < 3; ++step) {
        DenseTensor grad = Make(Random(n, 10 + step), DDim({2, 5}), dt);
        auto g = Values(grad);
        for (int64_t i = 0; i < n; ++i) {
          v[i] = momentum * v[i] + g[i] + wd * p[i];
          p[i] -= lr * v[i];
        }
        phi::SgdMomentumKernel(grad, lr, momentum, wd, &param, &velocity);
      }
      ExpectClose(Values(param), p, TolFor(dt), "param");
      ExpectClose(Values(velocity), v, TolFor(dt), "velocity");
    }
  }
  DenseTensor p = Make(Random(4, 1), DDim({4}), kF32), v = Make(Random(3, 1), DDim({3}), kF32);
  EXPECT_INVALID(phi::SgdMomentumKernel(Make(Random(4, 1), DDim({4}), kF32), 0.1, 0.9, 0, &p, &v),
                 "[4]", "[3]");
}

TEST(MathKernelsOptimizer, AdamMatchesHandLoopOverThreeSteps) {
  const int64_t n = 8;
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  for (DataType dt : kFullFloat) {
    SCOPED_TRACE(DataTypeToString(dt));
    DenseTensor param = Make(Random(n, 1), DDim({n}), dt);
    DenseTensor m1 = Make(std::vector<double>(n, 0.0), DDim({n}), dt);
    DenseTensor m2 = Make(std::vector<double>(n, 0.0), DDim({n}), dt);
    auto p = Values(param);
    std::vector<double> m(n, 0.0), v(n, 0.0);
    for (int step = 1; step <= 3; ++step) {
      DenseTensor grad = Make(Random(n, 20 + step), DDim({n}), dt);
      auto g = Values(grad);
      for (int64_t i = 0; i < n; ++i) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        double mhat = m[i] / (1 - std::pow(b1, step));
        double vhat = v[i] / (1 - std::pow(b2, step));
        p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
      }
      phi::AdamKernel(grad, lr, b1, b2, eps, step, &param, &m1, &m2);
    }
    ExpectClose(Values(param), p, TolFor(dt), "param");
    ExpectClose(Values(m1), m, TolFor(dt), "moment1");
    ExpectClose(Values(m2), v, TolFor(dt), "moment2");
    EXPECT_INVALID(phi::AdamKernel(Make(Random(n, 1), DDim({n}), dt), lr, b1, b2, eps, 0, &param,
                                   &m1, &m2),
                   "step is 1-based");
  }
}

}  // namespace
