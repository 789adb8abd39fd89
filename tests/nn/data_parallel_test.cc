// DataParallel on real processes over real Gloo: N ranks, each on its shard of the global
// batch, end with the weights of one process trained on the whole batch (float64, 1e-10).
#include <gtest/gtest.h>

#include "tests/harness/multiprocess.h"
#include "paddle_like/parallel/data_parallel.h"
#include "tests/nn/nn_test_util.h"
#include "tests/paddle_like/dist_test_util.h"

namespace paddle_like {
namespace testing {
namespace {

constexpr int64_t kGlobalBatch = 12;  // divisible by 1, 2, 3 and 4
constexpr double kExact = 1e-10;

struct Batch {
  Tensor x, y;
};
Batch GlobalBatch(int step) { return {Data(kGlobalBatch, 8, 1000 + step), Data(kGlobalBatch, 4, 2000 + step)}; }
Batch Shard(const Batch& b, int rank, int world) {
  int64_t n = kGlobalBatch / world;
  return {Rows(b.x, rank * n, (rank + 1) * n), Rows(b.y, rank * n, (rank + 1) * n)};
}

// One process, the whole batch: the reference every rank compares against.
void TrainReference(nn::Module& net, optimizer::Optimizer& opt, int steps) {
  for (int s = 0; s < steps; ++s) {
    Batch b = GlobalBatch(s);
    F::mse_loss(net(b.x), b.y).backward();
    opt.step();
    opt.clear_grad();
  }
}

void ExpectEquivalent(int world, DataParallelOptions options, bool adam) {
  RunRanks(world, [=](const RankContext& ctx) {
    InitGloo();
    // Rank-dependent initial weights: DataParallel must broadcast rank 0's.
    auto net = MakeMlp(ctx.rank == 0 ? 5 : 50 + ctx.rank);
    DataParallel dp(net, options);
    std::unique_ptr<optimizer::Optimizer> opt;
    if (adam) opt = std::make_unique<optimizer::Adam>(dp.parameters(), 0.01);
    else opt = std::make_unique<optimizer::SGD>(dp.parameters(), 0.05, 0.9);
    for (int s = 0; s < 20; ++s) {
      Batch b = Shard(GlobalBatch(s), ctx.rank, world);
      F::mse_loss(dp(b.x), b.y).backward();
      opt->step();
      opt->clear_grad();
    }
    auto ref = MakeMlp(5);
    std::unique_ptr<optimizer::Optimizer> ref_opt;
    if (adam) ref_opt = std::make_unique<optimizer::Adam>(ref->parameters(), 0.01);
    else ref_opt = std::make_unique<optimizer::SGD>(ref->parameters(), 0.05, 0.9);
    TrainReference(*ref, *ref_opt, 20);
    double diff = MaxParamDiff(*net, *ref);
    EXPECT_LE(diff, kExact) << "rank " << ctx.rank << " of " << world;
    EXPECT_GT(MaxParamDiff(*net, *MakeMlp(5)), 1e-3);  // it did train
    dist::destroy_process_group();
  });
}

TEST(DataParallel, EquivalentToOneProcessOn1Rank) { ExpectEquivalent(1, {}, false); }
TEST(DataParallel, EquivalentToOneProcessOn2Ranks) { ExpectEquivalent(2, {}, false); }
TEST(DataParallel, EquivalentToOneProcessOn3RanksWithAdam) { ExpectEquivalent(3, {}, true); }
TEST(DataParallel, EquivalentToOneProcessOn4Ranks) { ExpectEquivalent(4, {}, false); }

TEST(DataParallel, SmallBucketsAndBucketViewsAreEquivalentToo) {
  DataParallelOptions o;
  o.comm_buffer_size = 512;  // many buckets: one or two parameters each
  o.last_comm_buffer_size = 64;
  o.gradient_as_bucket_view = true;
  ExpectEquivalent(3, o, false);
  o.gradient_as_bucket_view = false;
  ExpectEquivalent(4, o, true);
}

// Registered in the opposite order of use: the initial buckets (reversed registration
// order) differ from the order gradients become ready, so the rebuild is visible.
class ReversedRegistration : public nn::Module {
 public:
  explicit ReversedRegistration(uint64_t seed) {
    second_ = register_module("second", std::make_shared<nn::Linear>(16, 4, seed + 2, phi::DataType::FLOAT64));
    first_ = register_module("first", std::make_shared<nn::Linear>(8, 16, seed + 1, phi::DataType::FLOAT64));
  }
  Tensor forward(const Tensor& x) override { return (*second_)(F::tanh((*first_)(x))); }

 private:
  std::shared_ptr<nn::Linear> first_, second_;
};

TEST(DataParallel, BucketsAreRebuiltInGradientReadyOrderAfterTheFirstStep) {
  RunRanks(2, [](const RankContext& ctx) {
    InitGloo();
    auto net = std::make_shared<ReversedRegistration>(3);
    DataParallelOptions o;
    o.comm_buffer_size = 1;  // one parameter per bucket
    o.last_comm_buffer_size = 1;
    DataParallel dp(net, o);
    // Parameters: 0 second.weight, 1 second.bias, 2 first.weight, 3 first.bias.
    using Buckets = std::vector<std::vector<size_t>>;
    EXPECT_EQ(dp.reducer().bucket_indices(), (Buckets{{3}, {2}, {1}, {0}}));
    optimizer::SGD opt(dp.parameters(), 0.1);
    auto ref = std::make_shared<ReversedRegistration>(3);
    optimizer::SGD ref_opt(ref->parameters(), 0.1);
    for (int s = 0; s < 3; ++s) {
      Batch b = Shard(GlobalBatch(s), ctx.rank, 2);
      F::mse_loss(dp(b.x), b.y).backward();
      opt.step();
      opt.clear_grad();
      if (s >= 1) {
        EXPECT_TRUE(dp.reducer().buckets_rebuilt());
        // The second layer's gradients are ready first (bias, then weight), then the first's.
        EXPECT_EQ(dp.reducer().bucket_indices(), (Buckets{{1}, {0}, {3}, {2}}));
      }
    }
    TrainReference(*ref, ref_opt, 3);
    EXPECT_LE(MaxParamDiff(*net, *ref), kExact);
  });
}

// A branch only odd ranks use.
class Branchy : public nn::Module {
 public:
  Branchy(uint64_t seed, bool use_branch) : use_branch_(use_branch) {
    trunk_ = register_module("trunk", MakeMlp(seed));
    branch_ = register_module("branch", std::make_shared<nn::Linear>(8, 4, seed + 9, phi::DataType::FLOAT64));
  }
  Tensor forward(const Tensor& x) override {
    Tensor out = (*trunk_)(x);
    return use_branch_ ? F::add(out, F::tanh((*branch_)(x))) : out;
  }
  bool use_branch_;

 private:
  std::shared_ptr<nn::Sequential> trunk_;
  std::shared_ptr<nn::Linear> branch_;
};

TEST(DataParallel, FindUnusedParametersGivesTheAveragedGradientOfABranchOnlyOddRanksUse) {
  for (int world : {1, 2, 3}) {
    RunRanks(world, [world](const RankContext& ctx) {
      InitGloo();
      auto net = std::make_shared<Branchy>(4, ctx.rank % 2 == 1);
      DataParallelOptions o;
      o.find_unused_parameters = true;
      o.comm_buffer_size = 256;
      DataParallel dp(net, o);
      optimizer::SGD opt(dp.parameters(), 0.05, 0.9);
      // The reference: every rank's loss on its shard with its own branch flag, averaged.
      auto ref = std::make_shared<Branchy>(4, false);
      optimizer::SGD ref_opt(ref->parameters(), 0.05, 0.9);
      for (int s = 0; s < 6; ++s) {
        Batch global = GlobalBatch(s);
        Batch b = Shard(global, ctx.rank, world);
        F::mse_loss(dp(b.x), b.y).backward();
        opt.step();
        opt.clear_grad();
        Tensor total;
        for (int r = 0; r < world; ++r) {
          ref->use_branch_ = r % 2 == 1;
          Batch rb = Shard(global, r, world);
          Tensor l = F::scale(F::mse_loss((*ref)(rb.x), rb.y), 1.0 / world);
          total = total.defined() ? F::add(total, l) : l;
        }
        total.backward();
        ref_opt.step();
        ref_opt.clear_grad();
      }
      EXPECT_LE(MaxParamDiff(*net, *ref), kExact) << "world " << world;
      dist::destroy_process_group();
    });
  }
}

TEST(DataParallel, NoSyncAccumulatesAndTheNextSyncedBackwardReducesTheSum) {
  RunRanks(3, [](const RankContext& ctx) {
    InitGloo();
    auto net = MakeMlp(8);
    DataParallel dp(net, {});
    optimizer::SGD opt(dp.parameters(), 0.05);
    auto ref = MakeMlp(8);
    optimizer::SGD ref_opt(ref->parameters(), 0.05);
    for (int s = 0; s < 4; ++s) {
      Batch a = GlobalBatch(2 * s), b = GlobalBatch(2 * s + 1);
      {
        auto guard = dp.no_sync();
        Batch sa = Shard(a, ctx.rank, 3);
        F::mse_loss(dp(sa.x), sa.y).backward();
      }
      Batch sb = Shard(b, ctx.rank, 3);
      F::mse_loss(dp(sb.x), sb.y).backward();
      opt.step();
      opt.clear_grad();
      // One process: both micro-batches' losses, one step.
      F::add(F::mse_loss((*ref)(a.x), a.y), F::mse_loss((*ref)(b.x), b.y)).backward();
      ref_opt.step();
      ref_opt.clear_grad();
    }
    EXPECT_LE(MaxParamDiff(*net, *ref), kExact);
  });
}

// float32 and float64 layers in one model.
class MixedPrecision : public nn::Module {
 public:
  explicit MixedPrecision(uint64_t seed) {
    a_ = register_module("a", std::make_shared<nn::Linear>(8, 16, seed, phi::DataType::FLOAT32));
    b_ = register_module("b", std::make_shared<nn::Linear>(16, 4, seed + 1, phi::DataType::FLOAT64));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = F::relu((*a_)(F::cast(x, phi::DataType::FLOAT32)));
    return (*b_)(F::cast(h, phi::DataType::FLOAT64));
  }

 private:
  std::shared_ptr<nn::Linear> a_, b_;
};

TEST(DataParallel, MixedDtypesGetSeparateBuckets) {
  RunRanks(2, [](const RankContext& ctx) {
    InitGloo();
    auto net = std::make_shared<MixedPrecision>(2);
    DataParallel dp(net, {});
    auto buckets = dp.reducer().bucket_indices();
    ASSERT_EQ(buckets.size(), 2u);  // one per dtype (all parameters are far below 1 MB)
    auto params = net->parameters();
    for (const auto& bucket : buckets) {
      for (size_t p : bucket) EXPECT_EQ(params[p].dtype(), params[bucket[0]].dtype());
    }
    optimizer::SGD opt(dp.parameters(), 0.05);
    auto ref = std::make_shared<MixedPrecision>(2);
    optimizer::SGD ref_opt(ref->parameters(), 0.05);
    for (int s = 0; s < 5; ++s) {
      Batch b = Shard(GlobalBatch(s), ctx.rank, 2);
      F::mse_loss(dp(b.x), b.y).backward();
      opt.step();
      opt.clear_grad();
    }
    TrainReference(*ref, ref_opt, 5);
    EXPECT_LE(MaxParamDiff(*net, *ref), 1e-5);  // float32 layers: float32 rounding
  });
}

TEST(DataParallel, CompressionHooksStayWithinTheirPrecision) {
  for (int which = 0; which < 3; ++which) {
    RunRanks(2, [which](const RankContext& ctx) {
      InitGloo();
      auto net = MakeMlp(9);
      DataParallel dp(net, {});
      int calls = 0;
      CommHook inner = which == 0   ? comm_hooks::allreduce_hook
                       : which == 1 ? comm_hooks::fp16_compress_hook
                                    : comm_hooks::bf16_compress_hook;
      dp.register_comm_hook({}, [&calls, inner](const std::any& state, GradBucket& bucket) {
        ++calls;
        EXPECT_EQ(bucket.gradients().size(), bucket.parameters().size());
        EXPECT_TRUE(bucket.is_last());  // the whole MLP fits one bucket
        return inner(state, bucket);
      });
      optimizer::SGD opt(dp.parameters(), 0.05);
      auto ref = MakeMlp(9);
      optimizer::SGD ref_opt(ref->parameters(), 0.05);
      for (int s = 0; s < 5; ++s) {
        Batch b = Shard(GlobalBatch(s), ctx.rank, 2);
        F::mse_loss(dp(b.x), b.y).backward();
        opt.step();
        opt.clear_grad();
      }
      TrainReference(*ref, ref_opt, 5);
      EXPECT_EQ(calls, 5);
      // fp16 keeps 11 significant bits, bf16 8: gradients of O(1) lose ~5e-4 / ~4e-3 each;
      // 5 steps at lr 0.05 keep the weights within 1e-3 / 1e-2.
      double tolerance = which == 0 ? kExact : which == 1 ? 1e-3 : 1e-2;
      double diff = MaxParamDiff(*net, *ref);
      EXPECT_LE(diff, tolerance) << "hook " << which;
      if (which > 0) {
        EXPECT_GT(diff, 0.0);  // the compression really happened
      }
    });
  }
}

// ---------------------------------------------------------------- errors
TEST(DataParallelErrors, ParametersThatDifferAcrossRanksAreNamedWithTheRank) {
  RunRanks(3, [](const RankContext& ctx) {
    InitGloo();
    auto net = MakeMlp(1, phi::DataType::FLOAT64, ctx.rank == 2 ? 17 : 16);
    try {
      DataParallel dp(net, {});
      ADD_FAILURE() << "differing parameters must raise";
    } catch (const phi::EnforceNotMet& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("'0.weight: float64 [8, 16]' on rank 0 but '0.weight: float64 [8, 17]' on rank 2"),
                std::string::npos) << m;
    }
  });
}

TEST(DataParallelErrors, AnUnusedParameterWithoutFindUnusedParametersIsNamed) {
  RunRanks(2, [](const RankContext& ctx) {
    InitGloo();
    auto net = std::make_shared<Branchy>(4, false);  // the branch is used by no rank
    DataParallel dp(net, {});
    Batch b = Shard(GlobalBatch(0), ctx.rank, 2);
    try {
      F::mse_loss(dp(b.x), b.y).backward();
      ADD_FAILURE() << "an unused parameter must raise";
    } catch (const phi::EnforceNotMet& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("'branch.weight', 'branch.bias'"), std::string::npos) << m;
      EXPECT_NE(m.find("find_unused_parameters"), std::string::npos) << m;
    }
  });
}

TEST(DataParallelErrors, AParameterMarkedReadyTwiceRaises) {
  RunRanks(2, [](const RankContext& ctx) {
    InitGloo();
    auto net = MakeMlp(2);
    DataParallel dp(net, {});
    Batch b = Shard(GlobalBatch(0), ctx.rank, 2);
    Tensor loss = F::mse_loss(dp(b.x), b.y);
    loss.backward(nullptr, /*retain_graph=*/true);
    try {
      loss.backward();
      ADD_FAILURE() << "a second backward without forward must raise";
    } catch (const phi::EnforceNotMet& e) {
      EXPECT_NE(std::string(e.what()).find("marked ready twice"), std::string::npos) << e.what();
    }
    // The next iteration works normally.
    optimizer::SGD opt(dp.parameters(), 0.05);
    opt.clear_grad();
    F::mse_loss(dp(b.x), b.y).backward();
    opt.step();
  });
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
