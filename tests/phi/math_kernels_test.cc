// The CPU math kernels' forward results against naive reference loops written here (not
// Eigen), in float32 and float64 everywhere and float16/bfloat16 where the models use them;
// and the errors bad input raises (shapes, dtypes, ids and labels out of range, strided or
// unallocated inputs). The gradients and the optimizers that apply them are in
// math_kernel_grads_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "phi/kernels/math_kernels.h"
#include "tests/phi/kernel_test_util.h"

namespace {

using namespace kernel_test;  // NOLINT: the test helpers
using phi::DataTypeToString;

// op(x) @ op(y) for op(x) [m, k] and op(y) [k, n], by the triple loop.
std::vector<double> NaiveMatmul(const std::vector<double>& x, bool tx,
                                const std::vector<double>& y, bool ty, int64_t m, int64_t k,
                                int64_t n) {
  std::vector<double> out(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < k; ++p) {
        out[i * n + j] += OpAt(x, tx ? m : k, tx, i, p) * OpAt(y, ty ? k : n, ty, p, j);
      }
    }
  }
  return out;
}

// ------------------------------------------------------------------ matmul

TEST(MathKernelsMatmul, AllTransposeCombinationsMatchNaiveLoop) {
  const int64_t m = 3, k = 5, n = 4;
  for (DataType dt : kAllFloat) {
    for (bool tx : {false, true}) {
      for (bool ty : {false, true}) {
        SCOPED_TRACE(std::string(DataTypeToString(dt)) + " tx=" + std::to_string(tx) +
                     " ty=" + std::to_string(ty));
        DenseTensor x = Make(Random(m * k, 1), tx ? DDim({k, m}) : DDim({m, k}), dt);
        DenseTensor y = Make(Random(k * n, 2), ty ? DDim({n, k}) : DDim({k, n}), dt);
        DenseTensor out;
        phi::MatmulKernel(x, y, tx, ty, &out);
        EXPECT_EQ(out.dims(), DDim({m, n}));
        EXPECT_EQ(out.dtype(), dt);
        ExpectClose(Values(out), NaiveMatmul(Values(x), tx, Values(y), ty, m, k, n), TolFor(dt));
      }
    }
  }
}

TEST(MathKernelsMatmul, LargerShapesUseTheBlockedPathCorrectly) {
  const int64_t m = 37, k = 70, n = 19;
  for (DataType dt : kFullFloat) {
    SCOPED_TRACE(DataTypeToString(dt));
    DenseTensor x = Make(Random(m * k, 3), DDim({k, m}), dt);
    DenseTensor y = Make(Random(k * n, 4), DDim({k, n}), dt);
    DenseTensor out;
    phi::MatmulKernel(x, y, true, false, &out);
    ExpectClose(Values(out), NaiveMatmul(Values(x), true, Values(y), false, m, k, n),
                {1e-4 * (dt == kF32) + 1e-12, 1e-5});
  }
}

TEST(MathKernelsMatmul, EmptyInnerDimGivesZerosAndOutputMayBeAnInput) {
  for (DataType dt : kAllFloat) {
    SCOPED_TRACE(DataTypeToString(dt));
    DenseTensor out = Make(std::vector<double>(12, 7.0), DDim({3, 4}), dt);  // stale contents
    phi::MatmulKernel(Make({}, DDim({3, 0}), dt), Make({}, DDim({0, 4}), dt), false, false,
                      &out);
    EXPECT_EQ(out.dims(), DDim({3, 4}));
    EXPECT_EQ(Values(out), std::vector<double>(12, 0.0));
    phi::MatmulKernel(Make({}, DDim({0, 3}), dt), Make({}, DDim({4, 0}), dt), true, true, &out);
    EXPECT_EQ(Values(out), std::vector<double>(12, 0.0));
  }
  // A row slice (contiguous, at an offset) is a valid input; out may be an input.
  DenseTensor base = Make(Random(12, 5), DDim({4, 3}), kF64);
  DenseTensor a = base.Slice(1, 3);
  DenseTensor b = Make(Random(9, 6), DDim({3, 3}), kF64);
  auto want = NaiveMatmul(Values(a), false, Values(b), false, 2, 3, 3);
  phi::MatmulKernel(a, b, false, false, &a);
  ExpectClose(Values(a), want, TolFor(kF64));
  EXPECT_EQ(a.dims(), DDim({2, 3}));
}

TEST(MathKernelsMatmul, BadShapesAndDtypesRaise) {
  DenseTensor x = Make(Random(15, 1), DDim({3, 5}), kF32);
  DenseTensor y = Make(Random(16, 2), DDim({4, 4}), kF32);
  DenseTensor out;
  EXPECT_INVALID(phi::MatmulKernel(x, y, false, false, &out), "inner dims differ", "[3, 5]",
                 "[4, 4]", "has 5 columns", "has 4 rows");
  EXPECT_INVALID(phi::MatmulKernel(x, y, true, false, &out), "has 3 columns");
  EXPECT_INVALID(phi::MatmulKernel(Make(Random(5, 1), DDim({5}), kF32), y, false, false, &out),
                 "must be 2-D", "[5]");
  EXPECT_INVALID(phi::MatmulKernel(x, Make(Random(20, 1), DDim({5, 4}), kF64), false, false,
                                   &out),
                 "float32", "float64");
  EXPECT_FALSE(out.initialized()) << "nothing is written on error";
}

// ------------------------------------------------------------------ elementwise

TEST(MathKernelsElementwise, AddSameShapeBiasAndScalar) {
  for (DataType dt : kAllFloat) {
    SCOPED_TRACE(DataTypeToString(dt));
    const int64_t rows = 6, cols = 5;  // x is [2, 3, 5]: the bias is added to all 6 rows
    DenseTensor x = Make(Random(rows * cols, 1), DDim({2, 3, cols}), dt);
    auto xv = Values(x);
    DenseTensor same = Make(Random(rows * cols, 2), x.dims(), dt);
    DenseTensor bias = Make(Random(cols, 3), DDim({cols}), dt);
    DenseTensor scalar = Make({0.375}, DDim({1}), dt);
    auto sv = Values(same), bv = Values(bias);
    std::vector<double> want_same(rows * cols), want_bias(rows * cols), want_scalar(rows * cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        int64_t i = r * cols + c;
        want_same[i] = xv[i] + sv[i];
        want_bias[i] = xv[i] + bv[c];
        want_scalar[i] = xv[i] + 0.375;
      }
    }
    DenseTensor out;
    phi::AddKernel(x, same, &out);
    EXPECT_EQ(out.dims(), x.dims());
    ExpectClose(Values(out), want_same, TolFor(dt), "same shape");
    phi::AddKernel(x, bias, &out);
    EXPECT_EQ(out.dims(), x.dims());
    ExpectClose(Values(out), want_bias, TolFor(dt), "bias");
    phi::AddKernel(x, scalar, &out);
    ExpectClose(Values(out), want_scalar, TolFor(dt), "scalar");
    phi::AddKernel(x, Make({0.375}, DDim({1, 1}), dt), &out);  // any one-element shape
    ExpectClose(Values(out), want_scalar, TolFor(dt), "scalar [1, 1]");
  }
}

TEST(MathKernelsElementwise, AddBadShapesRaise) {
  DenseTensor x = Make(Random(12, 1), DDim({3, 4}), kF32);
  DenseTensor out;
  EXPECT_INVALID(phi::AddKernel(x, Make(Random(3, 1), DDim({3}), kF32), &out), "add", "[3, 4]",
                 "[3]");
  EXPECT_INVALID(phi::AddKernel(x, Make(Random(12, 1), DDim({4, 3}), kF32), &out), "[4, 3]");
  EXPECT_INVALID(phi::AddKernel(x, Make(Random(4, 1), DDim({1, 4}), kF32), &out), "[1, 4]");
  EXPECT_INVALID(phi::AddKernel(x, Make(Random(12, 1), DDim({3, 4}), kF64), &out), "float32",
                 "float64");
  EXPECT_FALSE(out.initialized());
}

TEST(MathKernelsElementwise, SubtractMultiplyAndScale) {
  for (DataType dt : kAllFloat) {
    SCOPED_TRACE(DataTypeToString(dt));
    DenseTensor x = Make(Random(12, 1), DDim({3, 4}), dt);
    DenseTensor y = Make(Random(12, 2), DDim({3, 4}), dt);
    auto xv = Values(x), yv = Values(y);
    std::vector<double> sub(12), mul(12), after(12), before(12);
    for (size_t i = 0; i < 12; ++i) {
      sub[i] = xv[i] - yv[i];
      mul[i] = xv[i] * yv[i];
      after[i] = 2.5 * xv[i] + 0.75;
      before[i] = 2.5 * (xv[i] + 0.75);
    }
    DenseTensor out;
    phi::SubtractKernel(x, y, &out);
    ExpectClose(Values(out), sub, TolFor(dt), "subtract");
    phi::MultiplyKernel(x, y, &out);
    ExpectClose(Values(out), mul, TolFor(dt), "multiply");
    phi::ScaleKernel(x, 2.5, 0.75, /*bias_after_scale=*/true, &out);
    ExpectClose(Values(out), after, TolFor(dt), "scale, bias after");
    phi::ScaleKernel(x, 2.5, 0.75, /*bias_after_scale=*/false, &out);
    ExpectClose(Values(out), before, TolFor(dt), "scale, bias before");
    EXPECT_INVALID(phi::SubtractKernel(x, Make(Random(4, 1), DDim({4}), dt), &out), "subtract",
                   "[3, 4]", "[4]");
    EXPECT_INVALID(phi::MultiplyKernel(x, Make(Random(12, 1), DDim({4, 3}), dt), &out),
                   "multiply", "[4, 3]");
  }
}

TEST(MathKernelsElementwise, AccumulateAddsInPlace) {
  for (DataType dt : kAllFloat) {
    SCOPED_TRACE(DataTypeToString(dt));
    DenseTensor x = Make(Random(6, 1), DDim({2, 3}), dt);
    DenseTensor y = Make(Random(6, 2), DDim({2, 3}), dt);
    auto xv = Values(x), yv = Values(y);
    const void* storage = x.data();
    phi::AccumulateKernel(y, &x);
    EXPECT_EQ(x.data(), storage) << "in place";
    std::vector<double> want(6);
    for (size_t i = 0; i < 6; ++i) want[i] = xv[i] + yv[i];
    ExpectClose(Values(x), want, TolFor(dt));
    // On a row slice only the slice changes.
    DenseTensor rows = Make(Random(12, 4), DDim({4, 3}), dt);
    auto rv = Values(rows);
    DenseTensor mid = rows.Slice(1, 3);
    phi::AccumulateKernel(y, &mid);
    for (size_t i = 0; i < 12; ++i) {
      EXPECT_EQ(Values(rows)[i], i >= 3 && i < 9 ? RoundTo(rv[i] + yv[i - 3], dt) : rv[i]) << i;
    }
    auto before = Values(x);
    EXPECT_INVALID(phi::AccumulateKernel(Make(Random(6, 3), DDim({3, 2}), dt), &x), "accumulate",
                   "[2, 3]", "[3, 2]");
    EXPECT_EQ(Values(x), before) << "nothing is written on error";
  }
}

TEST(MathKernelsElementwise, SumAllAndMeanAllAccumulateInDouble) {
  for (DataType dt : kAllFloat) {
    SCOPED_TRACE(DataTypeToString(dt));
    DenseTensor x = Make(Random(24, 1, 0.0, 2.0), DDim({2, 3, 4}), dt);
    double s = 0;
    for (double v : Values(x)) s += v;
    DenseTensor out;
    phi::SumAllKernel(x, &out);
    EXPECT_EQ(out.dims(), DDim({1}));
    EXPECT_EQ(out.dtype(), dt);
    ExpectClose(Values(out), {RoundTo(s, dt)}, TolFor(dt), "sum");
    phi::MeanAllKernel(x, &out);
    EXPECT_EQ(out.dims(), DDim({1}));
    ExpectClose(Values(out), {RoundTo(s / 24, dt)}, TolFor(dt), "mean");
  }
  // float16 tops out at 65504: 10000 x 10 sums to 1e5, but the mean, taken in double, is 10.
  DenseTensor big = Make(std::vector<double>(10000, 10.0), DDim({100, 100}), kF16);
  DenseTensor mean;
  phi::MeanAllKernel(big, &mean);
  EXPECT_EQ(Values(mean), std::vector<double>{10.0});
  // float32 loses 1.0 against 1e8; the double accumulator does not (the mean is exact).
  DenseTensor mixed = Make({1e8, 1.0, 1.0, 1.0, 1.0, -1e8, 0.0, 0.0}, DDim({8}), kF32);
  phi::MeanAllKernel(mixed, &mean);
  EXPECT_EQ(Values(mean), std::vector<double>{0.5});
  phi::SumAllKernel(Make({}, DDim({0, 3}), kF32), &mean);
  EXPECT_EQ(Values(mean), std::vector<double>{0.0});
  EXPECT_INVALID(phi::MeanAllKernel(Make({}, DDim({0}), kF32), &mean), "mean");
}

TEST(MathKernelsElementwise, FullFillsAnyDtype) {
  DenseTensor out;
  for (DataType dt : {kF32, kF64, kF16, kBF16, DataType::INT64, DataType::INT32}) {
    SCOPED_TRACE(DataTypeToString(dt));
    phi::FullKernel(DDim({2, 3}), dt, 2.5, &out);
    EXPECT_EQ(out.dims(), DDim({2, 3}));
    EXPECT_EQ(out.dtype(), dt);
    double want = phi::IsFloating(dt) ? 2.5 : 2.0;
    EXPECT_EQ(Values(out), std::vector<double>(6, want));
  }
  phi::FullKernel(DDim({0, 4}), kF32, 1.0, &out);
  EXPECT_EQ(out.dims(), DDim({0, 4}));
}

TEST(MathKernelsElementwise, CastConvertsBetweenNumericTypes) {
  DenseTensor f64 = Make({1.25, -2.75, 1.0e10, 0.1, -0.0, 7.5}, DDim({2, 3}), kF64);
  DenseTensor f32, i64, back;
  phi::CastKernel(f64, kF32, &f32);
  EXPECT_EQ(f32.dtype(), kF32);
  EXPECT_EQ(f32.dims(), DDim({2, 3}));
  EXPECT_EQ(f32.ToVector<float>(),
            (std::vector<float>{1.25f, -2.75f, 1.0e10f, 0.1f, -0.0f, 7.5f}));
  phi::CastKernel(f32, DataType::INT64, &i64);
  EXPECT_EQ(i64.ToVector<int64_t>(), (std::vector<int64_t>{1, -2, 10000000000LL, 0, 0, 7}))
      << "float to integer truncates toward zero";
  phi::CastKernel(i64, kF64, &back);
  EXPECT_EQ(back.ToVector<double>(), (std::vector<double>{1, -2, 1.0e10, 0, 0, 7}));
  // Integers wider than a double's 53-bit mantissa survive integer-to-integer casts.
  const int64_t big = (int64_t{1} << 62) + 1;
  DenseTensor wide = MakeIds({big, -big, 5});
  phi::CastKernel(wide, DataType::INT64, &back);
  EXPECT_EQ(back.ToVector<int64_t>(), (std::vector<int64_t>{big, -big, 5}));
  DenseTensor small = MakeIds({-7, 100, 1 << 20});
  phi::CastKernel(small, DataType::INT32, &back);
  EXPECT_EQ(back.ToVector<int32_t>(), (std::vector<int32_t>{-7, 100, 1 << 20}));
  // Floating to the 16-bit types rounds to nearest; to bool is `!= 0`.
  for (DataType dt : {kF16, kBF16}) {
    phi::CastKernel(f32, dt, &back);
    std::vector<double> want;
    for (double v : Values(f32)) want.push_back(RoundTo(v, dt));  // 1e10 is inf in float16
    EXPECT_EQ(Values(back), want) << DataTypeToString(dt);
  }
  phi::CastKernel(Make({0.0, 0.5, -2.0}, DDim({3}), kF32), DataType::BOOL, &back);
  EXPECT_EQ(back.dtype(), DataType::BOOL);
  EXPECT_EQ(Values(back), (std::vector<double>{0, 1, 1}));
  phi::CastKernel(Make({0, 200, 3}, DDim({3}), DataType::UINT8), kF32, &back);
  EXPECT_EQ(back.ToVector<float>(), (std::vector<float>{0, 200, 3}));
  EXPECT_INVALID(phi::CastKernel(f64, DataType::COMPLEX64, &back), "complex");
}

// ------------------------------------------------------------------ activations

TEST(MathKernelsActivation, ReluGeluTanhMatchReferenceFormulas) {
  std::vector<double> in = Random(40, 7, -4.0, 4.0);
  in[0] = 0.0;
  in[1] = -0.0;
  in[2] = 1.0;
  in[3] = -1.0;
  for (DataType dt : kAllFloat) {
    SCOPED_TRACE(DataTypeToString(dt));
    DenseTensor x = Make(in, DDim({5, 8}), dt);
    auto xv = Values(x);
    std::vector<double> relu, gelu_erf, gelu_tanh, th;
    for (double v : xv) {
      relu.push_back(v > 0 ? v : 0);
      gelu_erf.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
      double u = std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v);
      gelu_tanh.push_back(0.5 * v * (1 + std::tanh(u)));
      th.push_back(std::tanh(v));
    }
    DenseTensor out;
    phi::ReluKernel(x, &out);
    EXPECT_EQ(out.dims(), x.dims());
    EXPECT_EQ(Values(out), relu) << "relu is exact in every dtype";
    // The transcendental forms are computed in double and rounded once to the dtype.
    // The error is then half an ulp of the dtype (the reference differs by an ulp of double,
    // magnified where 1 + erf cancels): relative 2^-24 (float32), 2^-11 (float16), 2^-8
    // (bfloat16); a factor of 2 of margin.
    int bits = dt == kF32 ? 23 : dt == kF16 ? 10 : 7;
    Tol tol = dt == kF64 ? Tol{1e-14, 1e-11} : Tol{1e-7, std::ldexp(1.0, -bits)};
    phi::GeluKernel(x, /*approximate=*/false, &out);
    ExpectClose(Values(out), gelu_erf, tol, "gelu erf");
    phi::GeluKernel(x, /*approximate=*/true, &out);
    ExpectClose(Values(out), gelu_tanh, tol, "gelu tanh");
    phi::TanhKernel(x, &out);
    ExpectClose(Values(out), th, tol, "tanh");
  }
  // Known values: gelu(1) = Phi(1) = 0.841344746..., the tanh form gives 0.841191990...
  DenseTensor out;
  phi::GeluKernel(Make({1.0, -1.0}, DDim({2}), kF64), false, &out);
  ExpectClose(Values(out), {0.8413447460685429, -0.15865525393145707}, {1e-15, 1e-14});
  phi::GeluKernel(Make({1.0}, DDim({1}), kF64), true, &out);
  ExpectClose(Values(out), {0.8411919906082768}, {1e-15, 1e-14});
}

// ------------------------------------------------------------------ softmax + cross-entropy

// softmax and loss rows by log-sum-exp, in double.
void ReferenceSoftmaxCE(const std::vector<double>& x, const std::vector<int64_t>& label,
                        int64_t c, int64_t ignore, std::vector<double>* sm,
                        std::vector<double>* loss) {
  int64_t n = static_cast<int64_t>(label.size());
  sm->assign(n * c, 0.0);
  loss->assign(n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    double mx = x[i * c];
    for (int64_t j = 1; j < c; ++j) mx = std::max(mx, x[i * c + j]);
    double z = 0;
    for (int64_t j = 0; j < c; ++j) z += std::exp(x[i * c + j] - mx);
    double lse = mx + std::log(z);
    for (int64_t j = 0; j < c; ++j) (*sm)[i * c + j] = std::exp(x[i * c + j] - lse);
    (*loss)[i] = label[i] == ignore ? 0.0 : lse - x[i * c + label[i]];
  }
}

TEST(MathKernelsSoftmaxCE, MatchesLogSumExpReferenceForBothLabelShapes) {
  const int64_t n = 6, c = 5;
  std::vector<int64_t> labels = {0, 4, 2, -100, 1, 3};
  for (DataType dt : kAllFloat) {
    SCOPED_TRACE(DataTypeToString(dt));
    DenseTensor logits = Make(Random(n * c, 11, -3.0, 3.0), DDim({n, c}), dt);
    std::vector<double> sm, loss;
    ReferenceSoftmaxCE(Values(logits), labels, c, -100, &sm, &loss);
    for (DDim label_dims : {DDim({n}), DDim({n, 1})}) {
      SCOPED_TRACE(label_dims.to_str());
      DenseTensor softmax, out_loss;
      phi::SoftmaxWithCrossEntropyKernel(logits, MakeIds(labels, label_dims), -100, &softmax,
                                         &out_loss);
      EXPECT_EQ(softmax.dims(), DDim({n, c}));
      EXPECT_EQ(out_loss.dims(), DDim({n, 1}));
      EXPECT_EQ(out_loss.dtype(), dt);
      ExpectClose(Values(softmax), sm, TolFor(dt), "softmax");
      ExpectClose(Values(out_loss), loss, TolFor(dt), "loss");
      EXPECT_EQ(Values(out_loss)[3], 0.0) << "the ignored row has no loss";
    }
  }
}

TEST(MathKernelsSoftmaxCE, IgnoreIndexMayBeAValidClass) {
  DenseTensor logits = Make(Random(8, 12), DDim({4, 2}), kF64);
  std::vector<double> sm, loss;
  ReferenceSoftmaxCE(Values(logits), {0, 1, 1, 0}, 2, 1, &sm, &loss);
  DenseTensor softmax, out_loss;
  phi::SoftmaxWithCrossEntropyKernel(logits, MakeIds({0, 1, 1, 0}), 1, &softmax, &out_loss);
  ExpectClose(Values(out_loss), loss, TolFor(kF64));
  EXPECT_EQ(Values(out_loss)[1], 0.0);
  EXPECT_GT(Values(out_loss)[0], 0.0);
}

TEST(MathKernelsSoftmaxCE, LargeLogitsStayFinite) {
  for (DataType dt : {kF32, kF64, kF16, kBF16}) {
    SCOPED_TRACE(DataTypeToString(dt));
    std::vector<double> x = {1000, -1000, 999, 0, -1000, -1000, 1000, 1000, 1000};
    DenseTensor softmax, loss;
    phi::SoftmaxWithCrossEntropyKernel(Make(x, DDim({3, 3}), dt), MakeIds({2, 1, 1}), -100,
                                       &softmax, &loss);
    std::vector<double> sm_want, loss_want;
    ReferenceSoftmaxCE(Values(Make(x, DDim({3, 3}), dt)), {2, 1, 1}, 3, -100, &sm_want,
                       &loss_want);
    for (double v : Values(softmax)) EXPECT_TRUE(std::isfinite(v));
    for (double v : Values(loss)) EXPECT_TRUE(std::isfinite(v));
    ExpectClose(Values(softmax), sm_want, TolFor(dt), "softmax");
    ExpectClose(Values(loss), loss_want, {TolFor(dt).atol, 1e-2}, "loss");
    EXPECT_NEAR(Values(loss)[1], 1000.0, 1e-6) << "log-sum-exp 0 minus logit -1000";
  }
}

TEST(MathKernelsSoftmaxCE, BadLabelsRaiseNamingTheLabel) {
  DenseTensor logits = Make(Random(15, 1), DDim({3, 5}), kF32);
  DenseTensor softmax, loss;
  EXPECT_INVALID(
      phi::SoftmaxWithCrossEntropyKernel(logits, MakeIds({0, 7, 1}), -100, &softmax, &loss),
      "label[1] = 7", "[0, 5)");
  EXPECT_INVALID(
      phi::SoftmaxWithCrossEntropyKernel(logits, MakeIds({0, 1, -1}), -100, &softmax, &loss),
      "label[2] = -1");
  EXPECT_INVALID(phi::SoftmaxWithCrossEntropyKernel(logits, MakeIds({0, 1}), -100, &softmax,
                                                    &loss),
                 "[3] or [3, 1]", "[2]");
  EXPECT_INVALID(phi::SoftmaxWithCrossEntropyKernel(logits, MakeIds({0, 1, 2, 3, 4, 0},
                                                                    DDim({3, 2})),
                                                    -100, &softmax, &loss),
                 "[3, 2]");
  EXPECT_INVALID(phi::SoftmaxWithCrossEntropyKernel(
                     logits, Make({0, 1, 2}, DDim({3}), DataType::INT32), -100, &softmax, &loss),
                 "int64", "int32");
  EXPECT_INVALID(phi::SoftmaxWithCrossEntropyKernel(Make(Random(5, 1), DDim({5}), kF32),
                                                    MakeIds({0}), -100, &softmax, &loss),
                 "[N, C]");
  EXPECT_FALSE(softmax.initialized());
  EXPECT_FALSE(loss.initialized());
}

// ------------------------------------------------------------------ embedding

TEST(MathKernelsEmbedding, LookupPaddingAndOutOfRange) {
  const int64_t rows = 10, width = 3;
  for (DataType dt : kAllFloat) {
    SCOPED_TRACE(DataTypeToString(dt));
    DenseTensor table = Make(Random(rows * width, 1), DDim({rows, width}), dt);
    auto tv = Values(table);
    std::vector<int64_t> ids = {3, 0, 9, 3, 2, 7};
    for (int64_t padding : {int64_t{-1}, int64_t{3}}) {
      DenseTensor out;
      phi::EmbeddingKernel(MakeIds(ids, DDim({2, 3})), table, 0, false, padding, &out);
      EXPECT_EQ(out.dims(), DDim({2, 3, width}));
      std::vector<double> want;
      for (int64_t id : ids) {
        for (int64_t d = 0; d < width; ++d) want.push_back(id == padding ? 0.0 : tv[id * width + d]);
      }
      EXPECT_EQ(Values(out), want) << "padding_idx " << padding;
    }
  }
  DenseTensor table = Make(Random(rows * width, 1), DDim({rows, width}), kF32);
  DenseTensor out;
  EXPECT_INVALID(phi::EmbeddingKernel(MakeIds({1, 10}), table, 0, false, -1, &out), "id 10",
                 "[0, 10)");
  EXPECT_INVALID(phi::EmbeddingKernel(MakeIds({-1}), table, 0, false, -1, &out), "id -1");
  EXPECT_INVALID(phi::EmbeddingKernel(Make({1, 2}, DDim({2}), DataType::INT32), table, 0, false,
                                      -1, &out),
                 "int64", "int32");
  EXPECT_INVALID(phi::EmbeddingKernel(MakeIds({1}), Make(Random(4, 1), DDim({4}), kF32), 0,
                                      false, -1, &out),
                 "[rows, dim]");
  EXPECT_FALSE(out.initialized());
}

TEST(MathKernelsEmbedding, VocabParallelShardGivesZeroRowsOffShard) {
  // This rank holds ids [4, 8) of a 12-word vocabulary.
  const int64_t start = 4, rows = 4, width = 2;
  DenseTensor table = Make(Random(rows * width, 2), DDim({rows, width}), kF64);
  auto tv = Values(table);
  std::vector<int64_t> ids = {0, 3, 4, 5, 7, 8, 11, 6};
  DenseTensor out;
  phi::EmbeddingKernel(MakeIds(ids), table, start, /*out_of_range_is_zero=*/true, -1, &out);
  EXPECT_EQ(out.dims(), DDim({8, width}));
  std::vector<double> want;
  for (int64_t id : ids) {
    bool here = id >= start && id < start + rows;
    for (int64_t d = 0; d < width; ++d) want.push_back(here ? tv[(id - start) * width + d] : 0.0);
  }
  EXPECT_EQ(Values(out), want);
  EXPECT_INVALID(phi::EmbeddingKernel(MakeIds(ids), table, start, false, -1, &out), "id 0",
                 "[4, 8)");
}

// ------------------------------------------------------------------ concat / split

// Element (i, j, k) of a row-major [d0, d1, d2] tensor.
double At3(const std::vector<double>& v, const DDim& d, int64_t i, int64_t j, int64_t k) {
  return v[(i * d[1] + j) * d[2] + k];
}

// The slab [begin, begin + len) along `axis` of a 3-D tensor, by index loops.
std::vector<double> Slab(const std::vector<double>& v, const DDim& d, int axis, int64_t begin,
                         int64_t len) {
  std::vector<double> out;
  int64_t e[3] = {d[0], d[1], d[2]};
  e[axis] = len;
  for (int64_t i = 0; i < e[0]; ++i) {
    for (int64_t j = 0; j < e[1]; ++j) {
      for (int64_t k = 0; k < e[2]; ++k) {
        int64_t idx[3] = {i, j, k};
        idx[axis] += begin;
        out.push_back(At3(v, d, idx[0], idx[1], idx[2]));
      }
    }
  }
  return out;
}

TEST(MathKernelsConcatSplit, ConcatAlongEachAxisMatchesIndexLoops) {
  for (DataType dt : {kF32, kF64, kF16, DataType::INT64}) {
    for (int axis : {0, 1, -1}) {
      SCOPED_TRACE(std::string(DataTypeToString(dt)) + " axis " + std::to_string(axis));
      int a = axis < 0 ? axis + 3 : axis;
      DDim da({2, 3, 4}), db({2, 3, 4});
      da[a] = 1;
      db[a] = 3;
      DenseTensor ta = Make(Random(da.numel(), 1, -50, 50), da, dt);
      DenseTensor tb = Make(Random(db.numel(), 2, -50, 50), db, dt);
      DenseTensor tc = Make(Random(24, 3, -50, 50), DDim({2, 3, 4}), dt);
      std::vector<const DenseTensor*> inputs = {&ta, &tb, &tc};
      DenseTensor out;
      phi::ConcatKernel(inputs, axis, &out);
      DDim want_dims({2, 3, 4});
      want_dims[a] = 1 + 3 + want_dims[a];
      ASSERT_EQ(out.dims(), want_dims);
      EXPECT_EQ(out.dtype(), dt);
      auto va = Values(ta), vb = Values(tb), vc = Values(tc), vo = Values(out);
      for (int64_t i = 0; i < want_dims[0]; ++i) {
        for (int64_t j = 0; j < want_dims[1]; ++j) {
          for (int64_t k = 0; k < want_dims[2]; ++k) {
            int64_t idx[3] = {i, j, k};
            double want;
            if (idx[a] < 1) {
              want = At3(va, da, idx[0], idx[1], idx[2]);
            } else if (idx[a] < 4) {
              idx[a] -= 1;
              want = At3(vb, db, idx[0], idx[1], idx[2]);
            } else {
              idx[a] -= 4;
              want = At3(vc, tc.dims(), idx[0], idx[1], idx[2]);
            }
            ASSERT_EQ(At3(vo, want_dims, i, j, k), want) << i << "," << j << "," << k;
          }
        }
      }
    }
  }
}

TEST(MathKernelsConcatSplit, SplitAlongEachAxisAndConcatOfSplitIsIdentity) {
  const DDim dims({4, 6, 5});
  for (DataType dt : {kF32, kF64, kBF16, DataType::INT64}) {
    for (int axis : {0, 1, -1}) {
      SCOPED_TRACE(std::string(DataTypeToString(dt)) + " axis " + std::to_string(axis));
      int a = axis < 0 ? axis + 3 : axis;
      DenseTensor x = Make(Random(dims.numel(), 5, -50, 50), dims, dt);
      auto xv = Values(x);
      // Sections {1, -1, 2}: the -1 takes what is left.
      std::vector<int64_t> sections = {1, -1, 2};
      std::vector<int64_t> sizes = {1, dims[a] - 3, 2};
      DenseTensor p0, p1, p2;
      phi::SplitKernel(x, sections, axis, {&p0, &p1, &p2});
      int64_t begin = 0;
      DenseTensor* pieces[] = {&p0, &p1, &p2};
      for (int i = 0; i < 3; ++i) {
        DDim want_dims = dims;
        want_dims[a] = sizes[i];
        EXPECT_EQ(pieces[i]->dims(), want_dims);
        EXPECT_EQ(pieces[i]->dtype(), dt);
        EXPECT_EQ(Values(*pieces[i]), Slab(xv, dims, a, begin, sizes[i])) << "piece " << i;
        begin += sizes[i];
      }
      std::vector<const DenseTensor*> parts = {&p0, &p1, &p2};
      DenseTensor joined;
      phi::ConcatKernel(parts, axis, &joined);
      EXPECT_EQ(joined.dims(), dims);
      EXPECT_EQ(Values(joined), xv);
    }
  }
  // Zero-size sections are allowed.
  DenseTensor x = Make(Random(6, 1), DDim({2, 3}), kF32), e0, e1;
  phi::SplitKernel(x, {0, 3}, 1, {&e0, &e1});
  EXPECT_EQ(e0.dims(), DDim({2, 0}));
  EXPECT_EQ(Values(e1), Values(x));
  // An output may be the input itself.
  auto xv = Values(x);
  phi::SplitKernel(x, {1, -1}, 1, {&x, &e1});
  EXPECT_EQ(Values(x), (std::vector<double>{xv[0], xv[3]}));
  EXPECT_EQ(Values(e1), (std::vector<double>{xv[1], xv[2], xv[4], xv[5]}));
}

TEST(MathKernelsConcatSplit, BadSectionsAxesAndShapesRaise) {
  DenseTensor x = Make(Random(24, 1), DDim({2, 3, 4}), kF32);
  DenseTensor a, b, c;
  EXPECT_INVALID(phi::SplitKernel(x, {1, 2}, 2, {&a, &b}), "sum to 3", "is 4");
  EXPECT_INVALID(phi::SplitKernel(x, {3, 2}, 2, {&a, &b}), "sum to 5");
  EXPECT_INVALID(phi::SplitKernel(x, {5, -1}, 2, {&a, &b}), "sum to 5");
  EXPECT_INVALID(phi::SplitKernel(x, {-1, -1, 2}, 2, {&a, &b, &c}), "section 1 is -1");
  EXPECT_INVALID(phi::SplitKernel(x, {-2, 6}, 2, {&a, &b}), "section 0 is -2");
  EXPECT_INVALID(phi::SplitKernel(x, {2, 2}, 2, {&a}), "2 sections but 1 outputs");
  EXPECT_INVALID(phi::SplitKernel(x, {2, 2}, 3, {&a, &b}), "axis 3", "rank 3");
  EXPECT_INVALID(phi::SplitKernel(x, {2, 2}, -4, {&a, &b}), "axis -4");
  EXPECT_INVALID(phi::SplitKernel(x, {2, 2}, 2, {&a, nullptr}), "output 1 is null");
  EXPECT_FALSE(a.initialized()) << "nothing is written on error";
  DenseTensor y = Make(Random(18, 1), DDim({2, 3, 3}), kF32);
  DenseTensor z = Make(Random(24, 1), DDim({2, 3, 4}), kF64);
  std::vector<const DenseTensor*> xy = {&x, &y}, xz = {&x, &z}, none = {};
  phi::ConcatKernel(xy, -1, &a);  // only the concat axis differs: fine
  EXPECT_EQ(a.dims(), DDim({2, 3, 7}));
  EXPECT_INVALID(phi::ConcatKernel(xy, 1, &c), "input 1", "[2, 3, 3]", "[2, 3, 4]");
  EXPECT_INVALID(phi::ConcatKernel(xz, 0, &c), "float64");
  EXPECT_INVALID(phi::ConcatKernel(none, 0, &c), "no inputs");
  EXPECT_INVALID(phi::ConcatKernel(xy, 3, &c), "axis 3");
  EXPECT_FALSE(c.initialized());
}

// ------------------------------------------------------------------ dropout

TEST(MathKernelsDropout, SeededMaskKeepRateAndScale) {
  const int64_t n = 100000;
  DenseTensor x = Make(Random(n, 1), DDim({100, 1000}), kF32);
  DenseTensor out1, mask1, out2, mask2, out3, mask3;
  phi::DropoutKernel(x, 0.3, 42, &out1, &mask1);
  phi::DropoutKernel(x, 0.3, 42, &out2, &mask2);
  phi::DropoutKernel(x, 0.3, 43, &out3, &mask3);
  EXPECT_EQ(mask1.dtype(), DataType::UINT8);
  EXPECT_EQ(mask1.dims(), x.dims());
  auto m1 = mask1.ToVector<uint8_t>(), m3 = mask3.ToVector<uint8_t>();
  EXPECT_EQ(m1, mask2.ToVector<uint8_t>()) << "the same seed gives the same mask";
  EXPECT_EQ(Values(out1), Values(out2));
  int64_t kept = 0, differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    kept += m1[i];
    differ += m1[i] != m3[i];
  }
  // Keep probability 0.7: the std of the kept fraction is 0.0014; 0.01 is seven of them.
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.7, 0.01);
  // Independent masks agree on 0.7^2 + 0.3^2 = 58% of elements, so differ on 42%.
  EXPECT_NEAR(static_cast<double>(differ) / n, 0.42, 0.01);
  auto xv = Values(x), ov = Values(out1);
  for (int64_t i = 0; i < n; ++i) {
    double want = m1[i] ? static_cast<double>(static_cast<float>(xv[i] / 0.7)) : 0.0;
    ASSERT_NEAR(ov[i], want, 1e-6) << i;
    ASSERT_TRUE(m1[i] == 0 || m1[i] == 1);
  }
}

TEST(MathKernelsDropout, ZeroPIsIdentityAndBadPRaises) {
  for (DataType dt : kAllFloat) {
    SCOPED_TRACE(DataTypeToString(dt));
    DenseTensor x = Make(Random(50, 3), DDim({5, 10}), dt);
    DenseTensor out, mask;
    phi::DropoutKernel(x, 0.0, 7, &out, &mask);
    EXPECT_EQ(Values(out), Values(x));
    EXPECT_EQ(mask.ToVector<uint8_t>(), std::vector<uint8_t>(50, 1));
  }
  DenseTensor x = Make(Random(4, 3), DDim({4}), kF32), out, mask;
  EXPECT_INVALID(phi::DropoutKernel(x, 1.0, 1, &out, &mask), "[0, 1)", "got 1");
  EXPECT_INVALID(phi::DropoutKernel(x, -0.1, 1, &out, &mask), "got -0.1");
  EXPECT_INVALID(phi::DropoutKernel(x, 1.5, 1, &out, &mask), "got 1.5");
  EXPECT_INVALID(phi::DropoutKernel(x, std::nan(""), 1, &out, &mask), "got nan");
  EXPECT_FALSE(out.initialized());
  EXPECT_FALSE(mask.initialized());
}

// ------------------------------------------------------------------ losses

TEST(MathKernelsLoss, MseLossIsTheMeanSquaredDifference) {
  for (DataType dt : kAllFloat) {
    SCOPED_TRACE(DataTypeToString(dt));
    DenseTensor x = Make(Random(12, 1), DDim({3, 4}), dt);
    DenseTensor y = Make(Random(12, 2), DDim({3, 4}), dt);
    auto xv = Values(x), yv = Values(y);
    double s = 0;
    for (size_t i = 0; i < 12; ++i) s += (xv[i] - yv[i]) * (xv[i] - yv[i]);
    DenseTensor loss;
    phi::MseLossKernel(x, y, &loss);
    EXPECT_EQ(loss.dims(), DDim({1}));
    ExpectClose(Values(loss), {s / 12}, TolFor(dt));
  }
  DenseTensor loss;
  EXPECT_INVALID(phi::MseLossKernel(Make(Random(4, 1), DDim({4}), kF32),
                                    Make(Random(3, 1), DDim({3}), kF32), &loss),
                 "[4]", "[3]");
}

// ------------------------------------------------------------------ input checks

TEST(MathKernelsInputChecks, IntegerInputToAFloatKernelRaisesNamingTheDtype) {
  DenseTensor i32 = Make({1, 2, 3, 4, 5, 6}, DDim({2, 3}), DataType::INT32);
  DenseTensor i32t = Make({1, 2, 3, 4, 5, 6}, DDim({3, 2}), DataType::INT32);
  DenseTensor out, mask, p = i32, v = i32;
  EXPECT_INVALID(phi::MatmulKernel(i32, i32t, false, false, &out), "matmul", "int32");
  EXPECT_INVALID(phi::AddKernel(i32, i32, &out), "add", "int32");
  EXPECT_INVALID(phi::SubtractKernel(i32, i32, &out), "subtract", "int32");
  EXPECT_INVALID(phi::MultiplyKernel(i32, i32, &out), "multiply", "int32");
  EXPECT_INVALID(phi::ScaleKernel(i32, 2, 0, true, &out), "scale", "int32");
  EXPECT_INVALID(phi::SumAllKernel(i32, &out), "sum", "int32");
  EXPECT_INVALID(phi::MeanAllKernel(i32, &out), "mean", "int32");
  EXPECT_INVALID(phi::ReluKernel(i32, &out), "relu", "int32");
  EXPECT_INVALID(phi::GeluKernel(i32, false, &out), "gelu", "int32");
  EXPECT_INVALID(phi::TanhKernel(i32, &out), "tanh", "int32");
  EXPECT_INVALID(phi::SoftmaxWithCrossEntropyKernel(i32, MakeIds({0, 1}), -100, &out, &mask),
                 "softmax_with_cross_entropy", "int32");
  EXPECT_INVALID(phi::EmbeddingKernel(MakeIds({0}), i32, 0, false, -1, &out), "embedding",
                 "int32");
  EXPECT_INVALID(phi::DropoutKernel(i32, 0.5, 1, &out, &mask), "dropout", "int32");
  EXPECT_INVALID(phi::MseLossKernel(i32, i32, &out), "int32");
  EXPECT_INVALID(phi::SgdMomentumKernel(i32, 0.1, 0.9, 0, &p, &v), "sgd", "int32");
  EXPECT_INVALID(phi::AdamKernel(i32, 0.1, 0.9, 0.99, 1e-8, 1, &p, &v, &out), "adam", "int32");
  EXPECT_INVALID(phi::AccumulateKernel(i32, &p), "accumulate", "int32");
  EXPECT_FALSE(out.initialized());
}

TEST(MathKernelsInputChecks, StridedAndUnallocatedInputsRaise) {
  DenseTensor base = Make(Random(12, 1), DDim({3, 4}), kF32);
  DenseTensor tv = base.AsStrided(DDim({4, 3}), {1, 4}, 0);  // the transpose: strided
  ASSERT_FALSE(tv.IsContiguous());
  DenseTensor sq = Make(Random(12, 2), DDim({4, 3}), kF32);
  DenseTensor w = Make(Random(12, 3), DDim({3, 4}), kF32);
  DenseTensor none, out, mask;
  EXPECT_INVALID(phi::MatmulKernel(tv, w, false, false, &out), "matmul", "contiguous");
  EXPECT_INVALID(phi::MatmulKernel(w, tv, false, false, &out), "matmul", "y", "contiguous");
  EXPECT_INVALID(phi::AddKernel(tv, sq, &out), "add", "contiguous");
  EXPECT_INVALID(phi::AddKernel(sq, tv, &out), "add", "contiguous");
  EXPECT_INVALID(phi::MultiplyKernel(sq, tv, &out), "multiply", "contiguous");
  EXPECT_INVALID(phi::ScaleKernel(tv, 2, 0, true, &out), "scale", "contiguous");
  EXPECT_INVALID(phi::SumAllKernel(tv, &out), "contiguous");
  EXPECT_INVALID(phi::ReluKernel(tv, &out), "relu", "contiguous");
  EXPECT_INVALID(phi::GeluKernel(tv, true, &out), "gelu", "contiguous");
  EXPECT_INVALID(phi::CastKernel(tv, kF64, &out), "cast", "contiguous");
  EXPECT_INVALID(phi::DropoutKernel(tv, 0.5, 1, &out, &mask), "dropout", "contiguous");
  EXPECT_INVALID(phi::SoftmaxWithCrossEntropyKernel(tv, MakeIds({0, 1, 2, 0}), -100, &out,
                                                    &mask),
                 "contiguous");
  EXPECT_INVALID(phi::EmbeddingKernel(MakeIds({0}), tv, 0, false, -1, &out), "embedding",
                 "contiguous");
  DenseTensor ids = MakeIds({0, 1, 2, 0, 1, 2});
  EXPECT_INVALID(phi::EmbeddingKernel(ids.AsStrided(DDim({3}), {2}, 0), sq, 0, false, -1, &out),
                 "ids", "contiguous");
  std::vector<const DenseTensor*> cat = {&tv, &sq};
  EXPECT_INVALID(phi::ConcatKernel(cat, 0, &out), "concat", "contiguous");
  EXPECT_INVALID(phi::SplitKernel(tv, {2, 2}, 0, {&out, &mask}), "split", "contiguous");
  DenseTensor acc = sq;
  EXPECT_INVALID(phi::AccumulateKernel(tv, &acc), "accumulate", "contiguous");
  EXPECT_INVALID(phi::AccumulateKernel(sq, &tv), "accumulate", "contiguous");
  // Unallocated.
  EXPECT_INVALID(phi::MatmulKernel(none, w, false, false, &out), "not initialized");
  EXPECT_INVALID(phi::AddKernel(sq, none, &out), "not initialized");
  EXPECT_INVALID(phi::ReluKernel(none, &out), "not initialized");
  EXPECT_INVALID(phi::MeanAllKernel(none, &out), "mean", "not initialized");
  EXPECT_INVALID(phi::CastKernel(none, kF64, &out), "not initialized");
  EXPECT_INVALID(phi::SoftmaxWithCrossEntropyKernel(sq, none, -100, &out, &mask),
                 "not initialized");
  EXPECT_INVALID(phi::EmbeddingKernel(none, sq, 0, false, -1, &out), "not initialized");
  EXPECT_INVALID(phi::SplitKernel(none, {1}, 0, {&out}), "not initialized");
  EXPECT_FALSE(out.initialized());
  EXPECT_FALSE(mask.initialized());
}

}  // namespace
