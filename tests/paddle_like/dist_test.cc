// paddle_like::dist on real processes over env:// and real Gloo: every collective against
// independently computed values on world sizes 1-4, subgroups (non-members, overlapping,
// global src/dst), point-to-point with any source, and the misuse that must raise.
#include <gtest/gtest.h>

#include "paddle_like/dist/distributed.h"
#include "phi/core/errors.h"
#include "tests/distributed/collective_test_util.h"
#include "tests/harness/multiprocess.h"
#include "tests/paddle_like/dist_test_util.h"

namespace paddle_like {
namespace testing {
namespace {



void Init() { InitGloo(std::chrono::seconds(20)); }

class Dist : public ::testing::TestWithParam<int> {};

TEST_P(Dist, EveryCollectiveOnTheWorld) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    Init();
    const int r = ctx.rank, n = ctx.world_size;
    ASSERT_TRUE(dist::is_initialized());
    EXPECT_EQ(dist::get_rank(), r);
    EXPECT_EQ(dist::get_world_size(), n);
    EXPECT_EQ(dist::get_backend(), "gloo");

    DenseTensor t = Ints({r + 1, 10 * r});
    dist::all_reduce(&t);
    EXPECT_EQ(Values(t), (std::vector<int64_t>{n * (n + 1) / 2, 10 * n * (n - 1) / 2}));
    t = Ints({r, r});
    dist::all_reduce(&t, dist::ReduceOp::MAX, {nullptr, true})->wait();
    EXPECT_EQ(Values(t), (std::vector<int64_t>{n - 1, n - 1}));

    t = Ints({r, 7});
    dist::broadcast(&t, n - 1);
    EXPECT_EQ(Values(t), (std::vector<int64_t>{n - 1, 7}));

    t = Ints({r + 1});
    dist::reduce(&t, 0, dist::ReduceOp::PRODUCT);
    if (r == 0) {
      int64_t f = 1;
      for (int k = 1; k <= n; ++k) f *= k;
      EXPECT_EQ(Values(t)[0], f);
    } else {
      EXPECT_EQ(Values(t)[0], r + 1) << "reduce wrote a non-destination rank";
    }

    std::vector<DenseTensor> list;
    dist::all_gather(&list, Ints({r, -r}));
    ASSERT_EQ(static_cast<int>(list.size()), n);
    for (int q = 0; q < n; ++q) EXPECT_EQ(Values(list[q]), (std::vector<int64_t>{q, -q}));
    DenseTensor flat;
    dist::all_gather_into_tensor(&flat, Ints({r}));
    for (int q = 0; q < n; ++q) EXPECT_EQ(Values(flat)[q], q);

    std::vector<int64_t> in(static_cast<size_t>(n));
    for (int q = 0; q < n; ++q) in[q] = 100 * r + q;  // block q goes to rank q
    DenseTensor rs;
    dist::reduce_scatter_tensor(&rs, Ints(in));
    EXPECT_EQ(Values(rs)[0], 100 * n * (n - 1) / 2 + n * r);
    DenseTensor a2a;
    dist::all_to_all_single(&a2a, Ints(in));
    for (int q = 0; q < n; ++q) EXPECT_EQ(Values(a2a)[q], 100 * q + r);

    std::vector<DenseTensor> gathered;
    dist::gather(Ints({r * r}), &gathered, n - 1);
    if (r == n - 1) {
      for (int q = 0; q < n; ++q) EXPECT_EQ(Values(gathered[q])[0], q * q);
    }
    std::vector<DenseTensor> parts;
    if (r == 0) {
      for (int q = 0; q < n; ++q) parts.push_back(Ints({q + 50, q}));
    }
    DenseTensor mine = Ints({0, 0});
    dist::scatter(&mine, parts, 0);
    EXPECT_EQ(Values(mine), (std::vector<int64_t>{r + 50, r}));
    dist::barrier();

    if (n > 1) {  // a ring with both directions async, then a receive from any source
      DenseTensor got = Ints({-1});
      auto s = dist::isend(Ints({r}), (r + 1) % n);
      auto g = dist::irecv(&got, (r + n - 1) % n);
      s->wait();
      g->wait();
      EXPECT_EQ(Values(got)[0], (r + n - 1) % n);
      if (r == 0) {
        for (int k = 1; k < n; ++k) {
          DenseTensor any = Ints({-1});
          int from = dist::recv(&any, dist::kAnySource, {nullptr, 3});
          EXPECT_EQ(Values(any)[0], from * 11);
        }
      } else {
        dist::send(Ints({r * 11}), 0, {nullptr, 3});
      }
    }
    dist::destroy_process_group();
    EXPECT_FALSE(dist::is_initialized());
  });
}

TEST_P(Dist, SubgroupsWithNonMembersAndGlobalRanks) {
  const int world = GetParam();
  RunRanks(world, [](const RankContext& ctx) {
    Init();
    const int r = ctx.rank, n = ctx.world_size;
    std::vector<int> odd, low;
    for (int q = 1; q < n; q += 2) odd.push_back(q);
    for (int q = 0; q < (n + 1) / 2; ++q) low.push_back(q);
    if (odd.empty()) odd = {0};  // world 1: both groups are the world's one rank
    // Every rank creates every group, in the same order.
    auto odd_group = dist::new_group(odd);
    auto low_group = dist::new_group(low);  // overlaps odd_group at rank 1 when n > 2
    EXPECT_NE(odd_group->gid(), low_group->gid());
    EXPECT_EQ(dist::get_process_group_ranks(odd_group), odd);
    for (auto [g, ranks] : {std::make_pair(odd_group, odd), std::make_pair(low_group, low)}) {
      const bool member = std::find(ranks.begin(), ranks.end(), r) != ranks.end();
      EXPECT_EQ(g->is_member(), member);
      DenseTensor t = Ints({r});
      auto work = dist::all_reduce(&t, dist::ReduceOp::SUM, {g, false});
      if (member) {
        int64_t sum = 0;
        for (int q : ranks) sum += q;
        EXPECT_EQ(Values(t)[0], sum);
        // src is a GLOBAL rank: the group's last member.
        DenseTensor b = Ints({r});
        dist::broadcast(&b, ranks.back(), {g, false});
        EXPECT_EQ(Values(b)[0], ranks.back());
        EXPECT_EQ(dist::get_global_rank(g, dist::get_group_rank(g, r)), r);
      } else {
        EXPECT_EQ(work, nullptr);
        EXPECT_EQ(Values(t)[0], r) << "a non-member's tensor was touched";
        EXPECT_THROW(dist::get_rank(g), phi::InvalidArgumentError);  // as the seed
      }
      // Interleaved with a world op, which every rank runs.
      DenseTensor w = Ints({1});
      dist::all_reduce(&w, dist::ReduceOp::SUM, {nullptr, false});
      EXPECT_EQ(Values(w)[0], n);
    }
    dist::destroy_process_group();
  });
}

TEST_P(Dist, LocallySynchronizedGroupsNeedOnlyTheirMembers) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    Init();
    const int r = ctx.rank, n = ctx.world_size;
    dist::NewGroupOptions local;
    local.use_local_synchronization = true;
    // Pairs {0,1}, {2,3}, ... made by their members only, two groups each; the world's own
    // call-order ids go on in between.
    std::vector<int> pair{r - r % 2};
    if (r - r % 2 + 1 < n) pair.push_back(r - r % 2 + 1);
    auto a = dist::new_group(pair, local);
    auto world_group = dist::new_group();  // every rank
    auto b = dist::new_group(pair, local);
    EXPECT_NE(a->gid(), b->gid());
    EXPECT_NE(a->gid(), world_group->gid());
    DenseTensor t = Ints({r + 1});
    dist::all_reduce(&t, dist::ReduceOp::SUM, {b, false});
    int64_t sum = 0;
    for (int q : pair) sum += q + 1;
    EXPECT_EQ(At(t, 0), sum);
    DenseTensor w = Ints({1});
    dist::all_reduce(&w, dist::ReduceOp::SUM, {world_group, false});
    EXPECT_EQ(At(w, 0), n);
    if (n > 2) {
      EXPECT_THROW(dist::new_group({(r + 2) % n}, local), phi::InvalidArgumentError);
    }
    dist::destroy_process_group();
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, Dist, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "world" + std::to_string(i.param);
                         });

template <typename E, typename F>
void ExpectError(const char* what, const std::string& needle, F&& f) {
  try {
    f();
    ADD_FAILURE() << what << ": no error";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << what << ": " << e.what();
  }
}

TEST(DistMisuse, EveryBadCallRaisesATypedErrorNamingIt) {
  RunRanks(2, [](const RankContext& ctx) {
    DenseTensor t = Ints({1});
    ExpectError<phi::PreconditionNotMetError>("op before init", "init_process_group",
                                              [&] { dist::all_reduce(&t); });
    dist::InitOptions bad;
    bad.backend = "tpu";
    ExpectError<phi::InvalidArgumentError>("unknown backend", "'tpu' is not available",
                                           [&] { dist::init_process_group(bad); });
    bad.backend = "cuda:gloo";
    ExpectError<phi::InvalidArgumentError>("wrong device", "does not serve device 'cuda'",
                                           [&] { dist::init_process_group(bad); });
    EXPECT_FALSE(dist::is_initialized());
    Init();
    ExpectError<phi::PreconditionNotMetError>("init twice", "already called", [&] { Init(); });
    ExpectError<phi::InvalidArgumentError>("duplicate ranks", "listed twice",
                                           [&] { dist::new_group({0, 0}); });
    ExpectError<phi::InvalidArgumentError>("rank out of range", "not in the world",
                                           [&] { dist::new_group({0, 5}); });
    ExpectError<phi::InvalidArgumentError>("bad src", "global rank 7 is not in group",
                                           [&] { dist::broadcast(&t, 7); });
    std::vector<DenseTensor> three(3);
    ExpectError<phi::InvalidArgumentError>("list length", "one tensor per rank",
                                           [&] { dist::all_gather(&three, t); });
    // Still usable, and in step on both ranks.
    DenseTensor s = Ints({ctx.rank + 1});
    dist::all_reduce(&s);
    EXPECT_EQ(Values(s)[0], 3);
    dist::destroy_process_group();
  });
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
