// Which algorithm a CPU communicator runs an all-reduce with: one table for every size, group
// and transport, read by the communicator (what to run) and by the engine (whether the
// agreement record can travel with the payload, op_agreement.h). It depends only on what
// every rank of a group knows alike (the group's size and transport, the byte count, the
// flag), so every rank picks the same algorithm. docs/benchmarks.md has the figures each
// boundary comes from.
#pragma once

#include <cstddef>
#include <string>

namespace phi {
namespace distributed {

enum class AllReduceAlgorithm {
  kGathered,         // one exchange of every rank's input; each rank reduces all in rank order
  kSharedMemory,     // the group's shared segment: reduce-scatter + all-gather in pieces
  kHierarchical,     // per host over shared memory, the host leaders over the network
  kTwoRankStream,    // two ranks: both halves streamed both ways over the peer connection
  kHalvingDoubling,  // Gloo's halving-doubling (BCUBE)
  kRing,             // Gloo's ring
  kNative,           // the engine's own all-reduce (MPI_Allreduce)
};
const char* AllReduceAlgorithmName(AllReduceAlgorithm a);

// FLAGS_gloo_allreduce_algo: "auto" (by size), "ring" or "halving_doubling" (fixes the
// algorithm of the sizes above the gathered exchange, for comparing them).
enum class ForcedAllReduce { kAuto, kRing, kHalvingDoubling };
// The flag's value parsed ("" is auto); InvalidArgument naming it when it is none of them.
ForcedAllReduce ParseForcedAllReduce(const std::string& flag);

// What a Gloo group's all-reduce can run on.
struct CpuAllReduceTopology {
  int world = 1;
  bool shared_memory = false;    // the whole group on one host, over one segment
  bool hierarchical = false;     // several hosts, at least one with two or more ranks
  size_t exchange_capacity = 0;  // the fused exchange's block (0: none, one rank)
  ForcedAllReduce forced = ForcedAllReduce::kAuto;
};

// Up to this many bytes an all-reduce over shared memory is one gathered step (every rank
// copies its input into its slot and reduces all slots); above it, two steps a piece.
constexpr size_t kShmGatheredAllReduceBytes = size_t{32} << 10;
// Up to this many bytes two ranks over TCP gather (one message each way, both reducing
// everything); above it the two-rank stream, each reducing half, leads.
constexpr size_t kTwoRankGatheredAllReduceBytes = size_t{128} << 10;

// The table.
AllReduceAlgorithm PlanAllReduce(const CpuAllReduceTopology& where, size_t bytes);

}  // namespace distributed
}  // namespace phi
