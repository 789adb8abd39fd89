// OpSignature: what must agree across the ranks of a group for one op, written once. The
// in-band agreement check (op_agreement.h), the store fingerprint check
// (collective_fingerprint.h) and fr_trace's comparison of flight-recorder dumps (each dump line
// carries it as `sig=`) all compare this and nothing else.
//
// Per kind, what may legitimately differ per rank is left out:
//   - a rooted op's lists (scatter's input, gather's output exist on the root only): the
//     per-rank element count agrees, not the total;
//   - all-to-all's splits: any size (each pair's sizes are checked by the engine's messages);
//   - a coalesced group: any size (its members are compared one by one where they are
//     collectives, MakeGroupRecord);
//   - point-to-point ops: never compared across the group (only their two ends take part).
#pragma once

#include <cstdint>
#include <string>

#include "distributed/stream_task.h"

namespace paddle_like {
namespace distributed {

struct OpSignature {
  static constexpr int64_t kAnySize = -1;

  CommType type = CommType::UNKNOWN;
  phi::DataType dtype = phi::DataType::UNDEFINED;
  int64_t count = kAnySize;  // elements per rank that every rank agrees on, or kAnySize
  int reduce_op = -1;        // ReduceOp of a reducing op; -1 otherwise
  int root = -1;             // a rooted op's root; -1 otherwise

  static OpSignature Of(const OpDesc& desc);
  // Point-to-point ops (and coalesced groups of them only) are compared by nobody.
  static bool IsComparedAcrossRanks(const OpDesc& desc);

  bool operator==(const OpSignature& o) const {
    return type == o.type && dtype == o.dtype && count == o.count && reduce_op == o.reduce_op &&
           root == o.root;
  }
  bool operator!=(const OpSignature& o) const { return !(*this == o); }

  // "AllReduce(256 x float32, SUM)", "Scatter(16 x int64, root 2)", "AllToAll(any size x
  // float32)".
  std::string ToString() const;
  // ToString() without spaces: one token of a flight-recorder dump line.
  std::string Token() const;
};

}  // namespace distributed
}  // namespace paddle_like
