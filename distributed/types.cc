#include "distributed/types.h"

namespace paddle_like {
namespace distributed {

const char* CommTypeToString(CommType t) {
  switch (t) {
    case CommType::BROADCAST: return "Broadcast";
    case CommType::ALLREDUCE: return "AllReduce";
    case CommType::REDUCE: return "Reduce";
    case CommType::ALLGATHER: return "AllGather";
    case CommType::GATHER: return "Gather";
    case CommType::SCATTER: return "Scatter";
    case CommType::REDUCE_SCATTER: return "ReduceScatter";
    case CommType::ALLTOALL: return "AllToAll";
    case CommType::SEND: return "Send";
    case CommType::RECV: return "Recv";
    case CommType::BARRIER: return "Barrier";
    case CommType::COALESCED: return "Coalesced";
    case CommType::UNKNOWN: return "Unknown";
  }
  return "Unknown";
}

}  // namespace distributed
}  // namespace paddle_like
