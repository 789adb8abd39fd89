// The all-reduce table (allreduce_plan.h): every row, and the boundaries between them.
#include "phi/core/distributed/allreduce_plan.h"

#include <gtest/gtest.h>

#include "phi/core/errors.h"

namespace phi {
namespace distributed {
namespace {

constexpr size_t KiB = 1024, MiB = 1024 * KiB;
constexpr size_t kCapacity = 256 * KiB + 256;  // the fused exchange's block on up to 4 ranks

CpuAllReduceTopology Tcp(int world, const std::string& forced = "auto") {
  CpuAllReduceTopology t;
  t.world = world;
  t.exchange_capacity = world > 1 ? kCapacity : 0;
  t.forced = ParseForcedAllReduce(forced);
  return t;
}

TEST(AllReducePlan, TwoRanksOverTcpGatherThenStream) {
  EXPECT_EQ(PlanAllReduce(Tcp(2), 8), AllReduceAlgorithm::kGathered);
  EXPECT_EQ(PlanAllReduce(Tcp(2), kTwoRankGatheredAllReduceBytes), AllReduceAlgorithm::kGathered);
  EXPECT_EQ(PlanAllReduce(Tcp(2), kTwoRankGatheredAllReduceBytes + 1),
            AllReduceAlgorithm::kTwoRankStream);
  EXPECT_EQ(PlanAllReduce(Tcp(2), 64 * MiB), AllReduceAlgorithm::kTwoRankStream);
}

TEST(AllReducePlan, ThreeOrMoreRanksGatherThenGlooBySize) {
  for (int world : {3, 4}) {
    EXPECT_EQ(PlanAllReduce(Tcp(world), 8), AllReduceAlgorithm::kGathered);
    EXPECT_EQ(PlanAllReduce(Tcp(world), kCapacity), AllReduceAlgorithm::kGathered);
    EXPECT_EQ(PlanAllReduce(Tcp(world), kCapacity + 1), AllReduceAlgorithm::kHalvingDoubling);
    EXPECT_EQ(PlanAllReduce(Tcp(world), 4 * MiB - 1), AllReduceAlgorithm::kHalvingDoubling);
    EXPECT_EQ(PlanAllReduce(Tcp(world), 4 * MiB), AllReduceAlgorithm::kRing);
  }
}

TEST(AllReducePlan, TheFlagFixesGloosAlgorithmAboveTheExchangeOnly) {
  EXPECT_EQ(PlanAllReduce(Tcp(2, "ring"), 8), AllReduceAlgorithm::kGathered);
  EXPECT_EQ(PlanAllReduce(Tcp(2, "ring"), 200 * KiB), AllReduceAlgorithm::kGathered);
  EXPECT_EQ(PlanAllReduce(Tcp(2, "ring"), 1 * MiB), AllReduceAlgorithm::kRing);
  EXPECT_EQ(PlanAllReduce(Tcp(4, "halving_doubling"), 64 * MiB),
            AllReduceAlgorithm::kHalvingDoubling);
  EXPECT_EQ(PlanAllReduce(Tcp(4, "ring"), 1 * MiB), AllReduceAlgorithm::kRing);
  EXPECT_THROW(ParseForcedAllReduce("bcube"), phi::EnforceNotMet);
  EXPECT_THROW(ParseForcedAllReduce("Ring"), phi::EnforceNotMet);
  EXPECT_EQ(ParseForcedAllReduce(""), ForcedAllReduce::kAuto);
}

TEST(AllReducePlan, SharedMemoryGathersSmallOnesAndIgnoresTheFlag) {
  for (const char* forced : {"auto", "ring"}) {
    CpuAllReduceTopology t = Tcp(4, forced);
    t.shared_memory = true;
    EXPECT_EQ(PlanAllReduce(t, 8), AllReduceAlgorithm::kGathered);
    EXPECT_EQ(PlanAllReduce(t, kShmGatheredAllReduceBytes), AllReduceAlgorithm::kGathered);
    EXPECT_EQ(PlanAllReduce(t, kShmGatheredAllReduceBytes + 1),
              AllReduceAlgorithm::kSharedMemory);
    EXPECT_EQ(PlanAllReduce(t, 64 * MiB), AllReduceAlgorithm::kSharedMemory);
  }
}

TEST(AllReducePlan, HierarchicalAboveTheExchange) {
  CpuAllReduceTopology t = Tcp(4);
  t.hierarchical = true;
  EXPECT_EQ(PlanAllReduce(t, 8), AllReduceAlgorithm::kGathered);
  EXPECT_EQ(PlanAllReduce(t, kCapacity + 1), AllReduceAlgorithm::kHierarchical);
  EXPECT_EQ(PlanAllReduce(t, 64 * MiB), AllReduceAlgorithm::kHierarchical);
}

TEST(AllReducePlan, OneRankHasNoExchange) {
  EXPECT_EQ(PlanAllReduce(Tcp(1), 8), AllReduceAlgorithm::kHalvingDoubling);
  EXPECT_STREQ(AllReduceAlgorithmName(AllReduceAlgorithm::kTwoRankStream), "two_rank_stream");
}

}  // namespace
}  // namespace distributed
}  // namespace phi
