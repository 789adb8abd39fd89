#include "distributed/collective_fingerprint.h"

#include <vector>

#include "phi/core/errors.h"

namespace paddle_like {
namespace distributed {

CollectiveFingerprintChecker::CollectiveFingerprintChecker(
    std::shared_ptr<phi::distributed::Store> store, int gid, int rank, int size,
    std::chrono::milliseconds timeout)
    : store_(std::move(store)), gid_(gid), rank_(rank), size_(size), timeout_(timeout) {}

std::string CollectiveFingerprintChecker::Key(uint64_t seq, int rank) const {
  return "fingerprint/" + std::to_string(gid_) + "/" + std::to_string(seq) + "/" +
         std::to_string(rank);
}

std::string CollectiveFingerprintChecker::Fingerprint(const OpDesc& d) {
  std::string s = std::string(CommTypeToString(d.type)) + " seq " + std::to_string(d.seq) +
                  " dtype " + phi::DataTypeToString(d.dtype);
  switch (d.type) {
    case CommType::SCATTER:
      s += " numel " + std::to_string(d.numel_out);
      break;
    case CommType::ALLTOALL:
    case CommType::COALESCED:
      break;  // per-rank sizes may differ legitimately
    default:
      s += " numel " + std::to_string(d.numel_in);
  }
  if (d.type == CommType::BROADCAST || d.type == CommType::REDUCE ||
      d.type == CommType::SCATTER || d.type == CommType::GATHER) {
    s += " root " + std::to_string(d.peer);
  }
  return s;
}

void CollectiveFingerprintChecker::Check(const OpDesc& desc, const std::string& group_desc) {
  if (desc.type == CommType::SEND || desc.type == CommType::RECV || size_ == 1) return;
  const std::string mine = Fingerprint(desc);
  store_->set(Key(desc.seq, rank_), mine);
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back(Key(desc.seq, r));
  try {
    store_->wait(keys, timeout_);
  } catch (const phi::TimeoutError&) {
    std::string missing;
    for (int r = 0; r < size_; ++r) {
      if (!store_->check({keys[r]})) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    PADDLE_THROW(phi::errors::Timeout(
        "%s: rank(s) %s did not reach %s within %lld ms (collective check). They died, hang, "
        "or run fewer collectives than rank %d.",
        group_desc.c_str(), missing.c_str(), mine.c_str(),
        static_cast<long long>(timeout_.count()), rank_));
  }
  auto values = store_->multi_get(keys);
  for (int r = 0; r < size_; ++r) {
    std::string theirs(values[r].begin(), values[r].end());
    if (theirs != mine) {
      PADDLE_THROW(phi::errors::InvalidArgument(
          "%s: Detected mismatch between collectives on ranks. Rank %d is running collective: "
          "%s, but Rank %d is running collective: %s.",
          group_desc.c_str(), rank_, mine.c_str(), r, theirs.c_str()));
    }
  }
  // Every rank has published seq, so all have finished reading the previous one.
  if (last_checked_ != 0) store_->delete_key(Key(last_checked_, rank_));
  last_checked_ = desc.seq;
}

}  // namespace distributed
}  // namespace paddle_like
