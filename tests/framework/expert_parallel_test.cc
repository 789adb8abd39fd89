// An expert-parallel (MoE) layer on 1, 2 and 4 ranks: tokens routed to experts of other
// ranks with global_scatter, the experts' outputs (and, for the backward pass, the input
// gradients) returned with global_gather; global_count comes from an alltoall of
// local_count, as in Paddle's MoE layer. Ranks hold different numbers of tokens, every
// rank's token count to each expert differs, and one expert gets no token at all. The
// layer's outputs, the input gradients and every expert's weight gradient must equal the
// dense computation over all tokens of all ranks within 1e-12 relative in float64.
//
//   y_t = x_t W_{g(t)}    dx_t = dy_t W_{g(t)}^T    dW_e = sum over tokens t routed to e of x_t^T
//   dy_t
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "paddle_like/framework/executor.h"
#include "phi/kernels/math_kernels.h"
#include "tests/framework/framework_test_util.h"
#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

using framework::Executor;

constexpr int64_t kExperts = 2, kHidden = 3;
constexpr double kTol = 1e-12;

int64_t TokensOf(int r) { return 5 + 2 * r; }
// The global expert of token t of rank r; expert 1 never gets a token.
int64_t ExpertOf(int r, int64_t t, int n) {
  int64_t g = (r * 5 + t * 3 + t * t) % (kExperts * n);
  return g == 1 ? 0 : g;
}
DenseTensor TokensX(int r) { return RandomTensor(DDim({TokensOf(r), kHidden}), 300 + r); }
DenseTensor TokensDy(int r) { return RandomTensor(DDim({TokensOf(r), kHidden}), 400 + r); }
DenseTensor WeightOf(int64_t g) { return RandomTensor(DDim({kHidden, kHidden}), 500 + g); }

// Row i of `t` (2-D float64) as a vector.
std::vector<double> RowOf(const DenseTensor& t, int64_t i) {
  const double* p = t.data<double>() + i * t.dims()[1];
  return std::vector<double>(p, p + t.dims()[1]);
}

class FrameworkExpertParallel : public ::testing::TestWithParam<int> {};

TEST_P(FrameworkExpertParallel, GlobalScatterGatherMatchTheDenseLayer) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    InitWorldRing();
    const int r = ctx.rank, n = ctx.world_size;
    const int64_t T = TokensOf(r), slots = kExperts * n;
    // Route: sort this rank's tokens by global expert (= count index j * E + i).
    std::vector<int64_t> order(T);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return ExpertOf(r, a, n) < ExpertOf(r, b, n); });
    std::vector<int64_t> local_count(slots, 0);
    for (int64_t t = 0; t < T; ++t) ++local_count[ExpertOf(r, t, n)];
    const DenseTensor x = TokensX(r), dy = TokensDy(r);
    std::vector<double> xs, dys;
    for (int64_t t : order) {
      auto a = RowOf(x, t), b = RowOf(dy, t);
      xs.insert(xs.end(), a.begin(), a.end());
      dys.insert(dys.end(), b.begin(), b.end());
    }

    Scope scope;
    *scope.Var("local_count") = Int64s(local_count, DDim({slots}));
    *scope.Var("x_sorted") = Doubles(xs, DDim({T, kHidden}));
    *scope.Var("dy_sorted") = Doubles(dys, DDim({T, kHidden}));
    ProgramDesc dispatch;
    AddOp(&dispatch, "alltoall", {{"X", {"local_count"}}}, {{"Out", {"global_count"}}},
          {{"use_calc_stream", true}});
    const framework::VariableNameMap counts = {{"local_count", {"local_count"}},
                                               {"global_count", {"global_count"}}};
    auto with = [&](const std::string& x_name) {
      framework::VariableNameMap m = counts;
      m["X"] = {x_name};
      return m;
    };
    AddOp(&dispatch, "global_scatter", with("x_sorted"), {{"Out", {"expert_x"}}},
          {{"use_calc_stream", true}});
    AddOp(&dispatch, "global_scatter", with("dy_sorted"), {{"Out", {"expert_dy"}}},
          {{"use_calc_stream", false}});  // ordered by its consumer below
    AddOp(&dispatch, "c_sync_comm_stream", {}, {}, {{"ring_id", 0}});
    Executor exe;
    exe.Run(dispatch, &scope);

    // The experts of this rank, on the rows they got (expert-major; zero rows allowed).
    const std::vector<int64_t> global_count = scope.GetVar("global_count")->ToVector<int64_t>();
    const DenseTensor& ex = *scope.GetVar("expert_x");
    const DenseTensor& edy = *scope.GetVar("expert_dy");
    std::vector<double> out_rows, dx_rows;
    std::vector<DenseTensor> dw(kExperts);
    int64_t row = 0;
    for (int64_t i = 0; i < kExperts; ++i) {
      int64_t rows = 0;
      for (int j = 0; j < n; ++j) rows += global_count[j * kExperts + i];
      const DenseTensor w = WeightOf(r * kExperts + i);
      if (rows == 0) {
        dw[i] = Doubles(std::vector<double>(kHidden * kHidden, 0.0), DDim({kHidden, kHidden}));
        continue;
      }
      DenseTensor xi = Rows(ex, row, row + rows), dyi = Rows(edy, row, row + rows), yi, dxi;
      phi::MatmulKernel(xi, w, false, false, &yi);
      phi::MatmulGradKernel(xi, w, dyi, false, false, &dxi, &dw[i]);
      auto a = yi.ToVector<double>(), b = dxi.ToVector<double>();
      out_rows.insert(out_rows.end(), a.begin(), a.end());
      dx_rows.insert(dx_rows.end(), b.begin(), b.end());
      row += rows;
    }
    ASSERT_EQ(row, ex.dims()[0]);
    *scope.Var("expert_y") = Doubles(out_rows, DDim({row, kHidden}));
    *scope.Var("expert_dx") = Doubles(dx_rows, DDim({row, kHidden}));
    ProgramDesc combine;
    AddOp(&combine, "global_gather", with("expert_y"), {{"Out", {"y_sorted"}}},
          {{"use_calc_stream", false}});
    AddOp(&combine, "global_gather", with("expert_dx"), {{"Out", {"dx_sorted"}}},
          {{"use_calc_stream", true}});
    AddOp(&combine, "c_sync_comm_stream", {}, {}, {{"ring_id", 0}});
    exe.Run(combine, &scope);

    // Dense reference: every token of every rank through its expert.
    std::vector<DenseTensor> dense_dw(slots);
    for (int64_t g = 0; g < slots; ++g) {
      dense_dw[g] = Doubles(std::vector<double>(kHidden * kHidden, 0.0), DDim({kHidden, kHidden}));
    }
    for (int q = 0; q < n; ++q) {
      const DenseTensor xq = TokensX(q), dyq = TokensDy(q);
      for (int64_t t = 0; t < TokensOf(q); ++t) {
        const int64_t g = ExpertOf(q, t, n);
        const DenseTensor w = WeightOf(g);
        for (int64_t a = 0; a < kHidden; ++a) {
          for (int64_t b = 0; b < kHidden; ++b) {
            dense_dw[g].data<double>()[a * kHidden + b] +=
                xq.data<double>()[t * kHidden + a] * dyq.data<double>()[t * kHidden + b];
          }
        }
        if (q != r) continue;
        // This rank's token t sits at the position `order` gave it.
        const int64_t pos = std::find(order.begin(), order.end(), t) - order.begin();
        std::vector<double> y(kHidden, 0.0), dx(kHidden, 0.0);
        for (int64_t a = 0; a < kHidden; ++a) {
          for (int64_t b = 0; b < kHidden; ++b) {
            y[b] += xq.data<double>()[t * kHidden + a] * w.data<double>()[a * kHidden + b];
            dx[a] += dyq.data<double>()[t * kHidden + b] * w.data<double>()[a * kHidden + b];
          }
        }
        ExpectValues(Rows(*scope.GetVar("y_sorted"), pos, pos + 1), y, kTol,
                     "y of token " + std::to_string(t));
        ExpectValues(Rows(*scope.GetVar("dx_sorted"), pos, pos + 1), dx, kTol,
                     "dx of token " + std::to_string(t));
      }
    }
    for (int64_t i = 0; i < kExperts; ++i) {
      ExpectClose(dw[i], dense_dw[r * kExperts + i], kTol,
                  "weight grad of expert " + std::to_string(r * kExperts + i));
    }
    if (r == 0) {  // expert 1 got nothing from anyone
      for (int j = 0; j < n; ++j) EXPECT_EQ(global_count[j * kExperts + 1], 0);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, FrameworkExpertParallel, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "ranks";
                         });

}  // namespace
}  // namespace testing
}  // namespace paddle_like
