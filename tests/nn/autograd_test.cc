// The eager framework in one process: gradients against finite differences, hook timing and
// order, graph lifetime, modules and optimizers against hand loops.
#include <gtest/gtest.h>

#include "paddle_like/eager/autograd.h"
#include "paddle_like/eager/functional.h"
#include "phi/core/errors.h"
#include "tests/nn/nn_test_util.h"

namespace paddle_like {
namespace testing {
namespace {

// d loss / d p[k] by central differences, loss recomputed by `loss_fn`.
double NumericGrad(Tensor& p, int64_t k, const std::function<double()>& loss_fn) {
  double* v = p.mutable_value().data<double>();
  const double h = 1e-6, keep = v[k];
  v[k] = keep + h;
  double up = loss_fn();
  v[k] = keep - h;
  double down = loss_fn();
  v[k] = keep;
  return (up - down) / (2 * h);
}

double Scalar(const Tensor& t) { return AsDoubles(t.value())[0]; }

TEST(Autograd, MlpGradientsMatchFiniteDifferences) {
  auto net = MakeMlp(7);
  auto emb = std::make_shared<nn::Embedding>(10, 8, 3, phi::DataType::FLOAT64);
  Tensor ids(phi::DenseTensor::FromVector<int64_t>({1, 4, 4, 9, 0}, {5}));
  Tensor label(phi::DenseTensor::FromVector<int64_t>({0, 3, 1, 2, 3}, {5}));
  auto loss_of = [&] {
    Tensor h = net->forward((*emb)(ids));
    return F::add(F::cross_entropy(h, label), F::scale(F::mean(F::gelu(h)), 0.5));
  };
  Tensor loss = loss_of();
  loss.backward();
  std::vector<Tensor> params = net->parameters();
  params.push_back(emb->weight());
  for (Tensor& p : params) {
    ASSERT_TRUE(p.has_grad()) << p.name();
    auto g = AsDoubles(p.grad());
    for (int64_t k = 0; k < p.numel(); k += std::max<int64_t>(1, p.numel() / 7)) {
      double num = NumericGrad(p, k, [&] {
        autograd::NoGradGuard no_grad;
        return Scalar(loss_of());
      });
      EXPECT_NEAR(g[k], num, 1e-6 * std::max(1.0, std::fabs(num))) << p.name() << "[" << k << "]";
    }
  }
}

TEST(Autograd, MseAndSubtractMultiplyGradients) {
  Tensor x = Data(3, 4, 1);
  x.set_requires_grad(true);
  Tensor y = Data(3, 4, 2);
  y.set_requires_grad(true);
  auto loss_of = [&] { return F::mse_loss(F::multiply(x, F::subtract(x, y)), y); };
  loss_of().backward();
  for (Tensor* p : {&x, &y}) {
    auto g = AsDoubles(p->grad());
    for (int64_t k = 0; k < p->numel(); ++k) {
      double num = NumericGrad(*p, k, [&] {
        autograd::NoGradGuard no_grad;
        return Scalar(loss_of());
      });
      EXPECT_NEAR(g[k], num, 1e-7);
    }
  }
}

TEST(Autograd, HooksFireOnceInReverseOrderWhenTheGradientIsFinal) {
  auto net = MakeMlp(1);
  std::vector<std::string> order;
  auto params = net->named_parameters();
  for (auto& [name, p] : params) {
    std::string n = name;
    p.register_post_accumulate_grad_hook([&order, n](Tensor& t) {
      EXPECT_TRUE(t.has_grad());
      order.push_back(n);
    });
  }
  // The first layer's weight is used twice: its hook must wait for both contributions.
  Tensor x = Data(5, 8, 3);
  Tensor out = net->forward(x);
  Tensor loss = F::mean(out);
  loss.backward();
  ASSERT_EQ(order.size(), params.size());
  // Reverse parameter order: the last layer's bias first, the first layer's weight last.
  EXPECT_EQ(order.front(), "4.bias");
  EXPECT_EQ(order.back(), "0.weight");
  // Shared use: w appears twice in the graph, the hook fires once with the sum.
  Tensor w = Data(4, 4, 9);
  w.set_requires_grad(true);
  int fired = 0;
  w.register_post_accumulate_grad_hook([&](Tensor& t) {
    ++fired;
    EXPECT_NEAR(AsDoubles(t.grad())[0], 2.0 / 16, 1e-15);
  });
  F::mean(F::add(w, w)).backward();
  EXPECT_EQ(fired, 1);
}

TEST(Autograd, CallbacksRunAfterTheLastNodeAndGradientsAccumulate) {
  Tensor w = Data(2, 2, 4);
  w.set_requires_grad(true);
  bool ran = false;
  w.register_post_accumulate_grad_hook([&](Tensor&) {
    autograd::QueueCallback([&] { ran = true; });
  });
  F::sum(w).backward();
  EXPECT_TRUE(ran);
  F::sum(w).backward();  // accumulates: every element's gradient is now 2
  for (double g : AsDoubles(w.grad())) EXPECT_EQ(g, 2.0);
  w.clear_grad();
  for (double g : AsDoubles(w.grad())) EXPECT_EQ(g, 0.0);
  EXPECT_THROW(autograd::QueueCallback([] {}), phi::EnforceNotMet);
}

// Once a parameter has a gradient, matmul and linear add theirs into it in place
// (GradNode::ApplyInto): the same storage, the sum of both passes, each hook once per pass; a
// leaf that is both matmul operands, or whose gradient is also reached through another node,
// still gets every contribution.
TEST(Autograd, GradientsAccumulateInPlaceIntoExistingGradients) {
  auto net = MakeMlp(5);
  Tensor x = Data(6, 8, 11);
  auto params = net->parameters();
  F::mean(net->forward(x)).backward();
  std::vector<std::vector<double>> once;
  std::vector<const void*> storage;
  for (auto& p : params) {
    once.push_back(AsDoubles(p.grad()));
    storage.push_back(p.grad().data());
  }
  std::vector<int> fired(params.size(), 0);
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].register_post_accumulate_grad_hook([&fired, i](Tensor&) { ++fired[i]; });
  }
  F::mean(net->forward(x)).backward();
  for (size_t i = 0; i < params.size(); ++i) {
    SCOPED_TRACE(params[i].name());
    EXPECT_EQ(params[i].grad().data(), storage[i]) << "accumulated where it was";
    EXPECT_EQ(fired[i], 1);
    auto twice = AsDoubles(params[i].grad());
    for (size_t k = 0; k < twice.size(); ++k) EXPECT_NEAR(twice[k], 2 * once[i][k], 1e-14);
  }
  // w @ w and w + (w @ w): every path's gradient arrives.
  Tensor w = Data(3, 3, 12);
  w.set_requires_grad(true);
  F::sum(F::add(w, F::matmul(w, w))).backward();  // gives w a gradient
  auto first = AsDoubles(w.grad());
  int hooks = 0;
  w.register_post_accumulate_grad_hook([&](Tensor&) { ++hooks; });
  F::sum(F::add(w, F::matmul(w, w))).backward();  // the matmul now adds in place
  auto second = AsDoubles(w.grad());
  for (size_t k = 0; k < first.size(); ++k) EXPECT_NEAR(second[k], 2 * first[k], 1e-14);
  EXPECT_EQ(hooks, 1);
}

TEST(Autograd, SecondBackwardNeedsRetainGraphAndNoGradRecordsNothing) {
  Tensor w = Data(2, 2, 4);
  w.set_requires_grad(true);
  Tensor loss = F::mean(F::tanh(w));
  loss.backward(nullptr, /*retain_graph=*/true);
  loss.backward();
  try {
    loss.backward();
    FAIL() << "a third backward through a freed graph must raise";
  } catch (const phi::EnforceNotMet& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
  autograd::NoGradGuard no_grad;
  Tensor y = F::mean(F::tanh(w));
  EXPECT_FALSE(y.requires_grad());
  EXPECT_THROW(y.backward(), phi::EnforceNotMet);
}

TEST(Autograd, BadInputRaisesNamingTheProblem) {
  Tensor x = Data(3, 4, 1);
  Tensor y = Data(5, 2, 1);
  try {
    F::matmul(x, y);
    FAIL();
  } catch (const phi::EnforceNotMet& e) {
    EXPECT_NE(std::string(e.what()).find("inner dims"), std::string::npos) << e.what();
  }
  Tensor ids(phi::DenseTensor::FromVector<int64_t>({1, 12}, {2}));
  auto emb = std::make_shared<nn::Embedding>(10, 3, 1, phi::DataType::FLOAT64);
  EXPECT_THROW((*emb)(ids), phi::EnforceNotMet);
  EXPECT_THROW(Tensor(phi::DenseTensor::FromVector<int64_t>({1}), true), phi::EnforceNotMet);
  EXPECT_THROW(F::cross_entropy(x, ids), phi::EnforceNotMet);  // 2 labels for 3 rows
}

TEST(Modules, ParametersDropoutAndFloat32) {
  auto net = MakeMlp(5, phi::DataType::FLOAT32);
  auto named = net->named_parameters();
  ASSERT_EQ(named.size(), 6u);
  EXPECT_EQ(named[0].first, "0.weight");
  EXPECT_EQ(named[5].first, "4.bias");
  EXPECT_EQ(named[0].second.dtype(), phi::DataType::FLOAT32);
  // Same seed -> same weights.
  EXPECT_EQ(MaxParamDiff(*net, *MakeMlp(5, phi::DataType::FLOAT32)), 0.0);
  EXPECT_GT(MaxParamDiff(*net, *MakeMlp(6, phi::DataType::FLOAT32)), 0.0);

  nn::Dropout drop(0.5, 42), same(0.5, 42);
  Tensor x = Data(50, 40, 2);
  auto a = AsDoubles(drop(x).value()), b = AsDoubles(same(x).value());
  EXPECT_EQ(a, b);  // seeded: reproducible
  auto c = AsDoubles(drop(x).value());
  EXPECT_NE(a, c);  // a new mask per call
  int64_t zeros = 0;
  for (double v : a) zeros += v == 0.0;
  EXPECT_NEAR(static_cast<double>(zeros) / a.size(), 0.5, 0.05);
  drop.eval();
  EXPECT_EQ(AsDoubles(drop(x).value()), AsDoubles(x.value()));

  // float16 and bfloat16 parameters: forward and backward run, gradients are finite.
  for (auto dt : {phi::DataType::FLOAT16, phi::DataType::BFLOAT16}) {
    nn::Linear lin(8, 4, 3, dt);
    Tensor in = Data(2, 8, 4, dt);
    F::mean(F::relu(lin(in))).backward();
    for (double g : AsDoubles(lin.weight().grad())) EXPECT_TRUE(std::isfinite(g));
  }
}

TEST(Optimizers, SgdMomentumAndAdamMatchHandLoops) {
  for (int kind = 0; kind < 2; ++kind) {
    Tensor w = Data(3, 2, 11);
    w.set_requires_grad(true);
    std::vector<double> ref = AsDoubles(w.value()), m(6, 0), v(6, 0);
    std::unique_ptr<optimizer::Optimizer> opt;
    if (kind == 0) opt = std::make_unique<optimizer::SGD>(std::vector<Tensor>{w}, 0.1, 0.9, 0.01);
    else opt = std::make_unique<optimizer::Adam>(std::vector<Tensor>{w}, 0.01);
    for (int step = 1; step <= 3; ++step) {
      F::sum(F::multiply(w, w)).backward();  // grad = 2w
      opt->step();
      for (size_t i = 0; i < ref.size(); ++i) {
        double g = 2 * ref[i];
        if (kind == 0) {
          m[i] = 0.9 * m[i] + g + 0.01 * ref[i];
          ref[i] -= 0.1 * m[i];
        } else {
          m[i] = 0.9 * m[i] + 0.1 * g;
          v[i] = 0.999 * v[i] + 0.001 * g * g;
          double mh = m[i] / (1 - std::pow(0.9, step)), vh = v[i] / (1 - std::pow(0.999, step));
          ref[i] -= 0.01 * mh / (std::sqrt(vh) + 1e-8);
        }
      }
      opt->clear_grad();
    }
    auto got = AsDoubles(w.value());
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-14) << kind;
  }
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
