// The stream-safe layer over a raw allocator (see allocator.h for the contract).
#pragma once

#include <deque>
#include <memory>
#include <mutex>

#include "phi/core/allocator.h"

namespace phi {
namespace memory {

class StreamSafeAllocation;

class StreamSafeAllocator : public Allocator,
                            public std::enable_shared_from_this<StreamSafeAllocator> {
 public:
  explicit StreamSafeAllocator(std::unique_ptr<RawAllocator> raw);
  ~StreamSafeAllocator() override;

  std::shared_ptr<Allocation> Allocate(size_t bytes) override;
  // Returns every deferred block whose streams have passed. Runs on each Allocate and
  // release; tests and benchmarks call it to observe the current state.
  void ProcessPendingFrees();
  AllocatorStats stats();

 private:
  friend class StreamSafeAllocation;
  void Release(StreamSafeAllocation* allocation);  // last owner gone
  void FreeNow(StreamSafeAllocation* allocation);  // callers hold mu_
  void ProcessPendingFreesLocked();

  std::unique_ptr<RawAllocator> raw_;
  std::mutex mu_;
  std::deque<StreamSafeAllocation*> pending_;  // released, waiting on streams; oldest first
  AllocatorStats stats_;
};

}  // namespace memory
}  // namespace phi
