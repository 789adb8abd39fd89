#include "distributed/collective_fingerprint.h"

#include <vector>

#include "distributed/op_signature.h"
#include "phi/core/errors.h"
#include "phi/core/distributed/liveness.h"
#include "phi/core/distributed/rank_list.h"

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

std::string CollectiveFingerprintChecker::Fingerprint(const OpDesc& d, uint64_t n) {
  return OpSignature::Of(d).ToString() + " (collective #" + std::to_string(n) + ")";
}

void CollectiveFingerprintChecker::Check(const OpDesc& desc, const std::string& group_desc) {
  if (!OpSignature::IsComparedAcrossRanks(desc) || size_ == 1) return;
  std::lock_guard<std::mutex> lk(mu_);
  // Collectives are counted apart from the group's sequence numbers: point-to-point ops
  // take sequence numbers on their pair only.
  const uint64_t n = ++collectives_;
  const std::string mine = Fingerprint(desc, n);
  store_->set(Key(n, rank_), mine);
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back(Key(n, r));
  try {
    store_->wait(keys, timeout_.load());
  } catch (const phi::TimeoutError&) {
    std::vector<int> missing_ranks;
    for (int r = 0; r < size_; ++r) {
      if (!store_->check({keys[r]})) missing_ranks.push_back(r);
    }
    const std::string missing = phi::distributed::JoinRanks(missing_ranks);
    PADDLE_THROW(phi::errors::Timeout(
        "%s: rank(s) %s did not reach %s within %lld ms (collective check). They died, hang, "
        "or run fewer collectives than rank %d.%s",
        group_desc.c_str(), missing.c_str(), mine.c_str(),
        static_cast<long long>(timeout_.load().count()), rank_,
        phi::distributed::Liveness::Process().About(gid_, missing_ranks).c_str()));
  }
  // Every rank compares all fingerprints, so all ranks see the same set and all raise.
  auto values = store_->multi_get(keys);
  bool differ = false;
  std::string all;
  for (int r = 0; r < size_; ++r) {
    std::string theirs(values[r].begin(), values[r].end());
    differ |= theirs != std::string(values[0].begin(), values[0].end());
    all += "\n  Rank " + std::to_string(r) + " is running collective: " + theirs;
  }
  // Every rank has published n, so all have finished reading the previous one.
  if (last_checked_ != 0) store_->delete_key(Key(last_checked_, rank_));
  last_checked_ = n;
  PADDLE_ENFORCE(!differ, phi::errors::InvalidArgument(
                              "%s: Detected mismatch between collectives on ranks:%s",
                              group_desc.c_str(), all.c_str()));
}

}  // namespace distributed
}  // namespace paddle_like
