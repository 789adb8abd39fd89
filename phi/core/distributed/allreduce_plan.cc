#include "phi/core/distributed/allreduce_plan.h"

#include "phi/core/errors.h"

namespace phi {
namespace distributed {

const char* AllReduceAlgorithmName(AllReduceAlgorithm a) {
  switch (a) {
    case AllReduceAlgorithm::kGathered: return "gathered";
    case AllReduceAlgorithm::kSharedMemory: return "shared_memory";
    case AllReduceAlgorithm::kHierarchical: return "hierarchical";
    case AllReduceAlgorithm::kTwoRankStream: return "two_rank_stream";
    case AllReduceAlgorithm::kHalvingDoubling: return "halving_doubling";
    case AllReduceAlgorithm::kRing: return "ring";
    case AllReduceAlgorithm::kNative: return "native";
  }
  return "?";
}

ForcedAllReduce ParseForcedAllReduce(const std::string& flag) {
  if (flag.empty() || flag == "auto") return ForcedAllReduce::kAuto;
  if (flag == "ring") return ForcedAllReduce::kRing;
  PADDLE_ENFORCE(flag == "halving_doubling",
                 errors::InvalidArgument("FLAGS_gloo_allreduce_algo='%s': expected 'auto', "
                                         "'ring' or 'halving_doubling'",
                                         flag.c_str()));
  return ForcedAllReduce::kHalvingDoubling;
}

AllReduceAlgorithm PlanAllReduce(const CpuAllReduceTopology& where, size_t bytes) {
  const bool by_size = where.forced == ForcedAllReduce::kAuto;
  const bool fits_exchange = where.world > 1 && bytes <= where.exchange_capacity;
  if (where.shared_memory) {
    // One host: the segment for every size (the flag does not apply).
    return fits_exchange && bytes <= kShmGatheredAllReduceBytes ? AllReduceAlgorithm::kGathered
                                                                 : AllReduceAlgorithm::kSharedMemory;
  }
  if (where.hierarchical) {
    // Small ones are one flat exchange either way; above it the bytes cross the network
    // once per host instead of once per rank.
    return fits_exchange ? AllReduceAlgorithm::kGathered : AllReduceAlgorithm::kHierarchical;
  }
  if (where.world == 2 && by_size) {
    return fits_exchange && bytes <= kTwoRankGatheredAllReduceBytes
               ? AllReduceAlgorithm::kGathered
               : AllReduceAlgorithm::kTwoRankStream;
  }
  if (fits_exchange) return AllReduceAlgorithm::kGathered;
  if (!by_size) {
    return where.forced == ForcedAllReduce::kRing ? AllReduceAlgorithm::kRing
                                                  : AllReduceAlgorithm::kHalvingDoubling;
  }
  // Three or more ranks, Gloo's two: halving-doubling below a size, the ring above it.
  constexpr size_t kRingFrom = size_t{4} << 20;
  return bytes < kRingFrom ? AllReduceAlgorithm::kHalvingDoubling : AllReduceAlgorithm::kRing;
}

}  // namespace distributed
}  // namespace phi
