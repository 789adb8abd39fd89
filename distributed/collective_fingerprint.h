// Debug check that every rank runs the same collective (FLAGS_collective_check=store),
// in the manner of c10d's fingerprints: before each collective the ranks exchange op type,
// sequence number and the rest of its OpSignature (op_signature.h) through the store and
// compare.
// A mismatch raises InvalidArgument on every rank, naming the ranks and both ops; a rank
// that never arrives makes the others raise Timeout naming it. Costs a store round trip
// per op: a debugging aid, off by default.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "distributed/op_observer.h"
#include "distributed/stream_task.h"
#include "phi/core/distributed/store/store.h"

namespace paddle_like {
namespace distributed {

class CollectiveFingerprintChecker : public OpObserver {
 public:
  CollectiveFingerprintChecker(std::shared_ptr<phi::distributed::Store> store, int gid, int rank,
                               int size, std::chrono::milliseconds timeout);
  // Compares `desc` with the same collective number on every rank. P2P ops are not
  // compared (their peers legitimately differ). Thread-safe: concurrent calls take distinct
  // numbers, one check at a time.
  void Check(const OpDesc& desc, const std::string& group_desc);
  bool ChecksBeforeIssue() const override { return true; }
  void BeforeIssue(const OpDesc& desc, const std::string& group_desc) override {
    Check(desc, group_desc);
  }
  // How long a later check waits for the other ranks (set_timeout).
  void SetTimeout(std::chrono::milliseconds timeout) { timeout_.store(timeout); }

  // What the ranks compare: the op's signature and its collective number.
  static std::string Fingerprint(const OpDesc& desc, uint64_t n);

 private:
  std::string Key(uint64_t seq, int rank) const;
  std::shared_ptr<phi::distributed::Store> store_;
  int gid_, rank_, size_;
  std::atomic<std::chrono::milliseconds> timeout_;
  std::mutex mu_;              // one check at a time; guards the counters
  uint64_t collectives_ = 0;  // collectives checked so far
  uint64_t last_checked_ = 0;
};

}  // namespace distributed
}  // namespace paddle_like
