#include "distributed/op_signature.h"

#include <algorithm>

#include "phi/core/distributed/reduce_op.h"

namespace paddle_like {
namespace distributed {
namespace {

bool HasRoot(CommType t) {
  return t == CommType::BROADCAST || t == CommType::REDUCE || t == CommType::SCATTER ||
         t == CommType::GATHER;
}

// The per-rank count every rank of the group has; OpDesc holds this rank's totals.
int64_t AgreedCount(const OpDesc& d) {
  switch (d.type) {
    case CommType::REDUCE_SCATTER:
    case CommType::SCATTER:
      return d.numel_out;  // each rank's share; scatter's input exists on the root only
    case CommType::ALLTOALL:
    case CommType::COALESCED:
      return OpSignature::kAnySize;
    case CommType::RECV:
      return d.numel_out;
    default:
      return d.numel_in;  // gather: what each rank sends; its output exists on the root only
  }
}

}  // namespace

OpSignature OpSignature::Of(const OpDesc& d) {
  OpSignature s;
  s.type = d.type;
  s.dtype = d.dtype;
  s.count = AgreedCount(d);
  s.reduce_op = d.reduce_op;
  s.root = HasRoot(d.type) ? d.peer : -1;
  return s;
}

bool OpSignature::IsComparedAcrossRanks(const OpDesc& d) {
  return !d.is_p2p() && d.type != CommType::SEND && d.type != CommType::RECV;
}

std::string OpSignature::ToString() const {
  std::string s = std::string(CommTypeToString(type)) + "(";
  s += count >= 0 ? std::to_string(count) + " x " : std::string("any size x ");
  s += phi::DataTypeToString(dtype);
  if (reduce_op >= 0) {
    s += std::string(", ") +
         phi::distributed::ReduceOpToString(static_cast<phi::distributed::ReduceOp>(reduce_op));
  }
  if (root >= 0) s += ", root " + std::to_string(root);
  return s + ")";
}

std::string OpSignature::Token() const {
  std::string s = ToString();
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
  return s;
}

}  // namespace distributed
}  // namespace paddle_like
