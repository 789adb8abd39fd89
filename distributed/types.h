// Option structs of the ProcessGroup API (Paddle / c10d names).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "phi/core/distributed/reduce_op.h"

namespace paddle_like {
namespace distributed {

using phi::distributed::ReduceOp;

struct AllreduceOptions {
  ReduceOp reduce_op = ReduceOp::SUM;
  double premul_factor = 1.0;  // PREMUL_SUM only
};

struct BroadcastOptions {
  int64_t source_rank = 0;
  // Paddle's index into a per-process tensor list. This runtime broadcasts one tensor per
  // process, so only 0 is valid; anything else is an InvalidArgumentError, not ignored.
  int64_t source_root = 0;
};

struct BarrierOptions {
  int8_t device_id = -1;  // GPU barrier on this device; -1: the group's current device
};

struct ReduceOptions {
  ReduceOp reduce_op = ReduceOp::SUM;
  double premul_factor = 1.0;
  int64_t root_rank = 0;
};

struct ReduceScatterOptions {
  ReduceOp reduce_op = ReduceOp::SUM;
  double premul_factor = 1.0;
};

struct ScatterOptions {
  int64_t root_rank = 0;
};

struct GatherOptions {
  int64_t root_rank = 0;
};

// Point-to-point tag; ops with different tags between the same pair never match.
struct P2POptions {
  int tag = 0;
};

// Receive from whichever rank sends first (engines that allow it).
constexpr int kAnySource = -1;

enum class CommType : uint8_t {
  BROADCAST = 0,
  ALLREDUCE,
  REDUCE,
  ALLGATHER,
  GATHER,
  SCATTER,
  REDUCE_SCATTER,
  ALLTOALL,
  SEND,
  RECV,
  BARRIER,
  COALESCED,
  UNKNOWN = 100,
};

const char* CommTypeToString(CommType t);

}  // namespace distributed
}  // namespace paddle_like
