// Memory: Allocation (a block and its place), Allocator, and the stream-safe layer.
//
// Every tensor holds a std::shared_ptr<Allocation>. Allocations handed out by
// GetAllocator(place) are stream-safe: RecordStream(allocation, stream) marks the block as
// used by the stream up to the stream's current end; when the last owner releases the
// block, it is neither freed nor reused until every recorded stream has passed its mark.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "phi/core/place.h"

namespace phi {

class Stream;

class Allocation {
 public:
  Allocation(void* ptr, size_t size, Place place) : ptr_(ptr), size_(size), place_(place) {}
  virtual ~Allocation() = default;
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;

  void* ptr() const { return ptr_; }
  size_t size() const { return size_; }
  const Place& place() const { return place_; }

 private:
  void* ptr_;
  size_t size_;
  Place place_;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual std::shared_ptr<Allocation> Allocate(size_t bytes) = 0;
};

namespace memory {

// The raw block source under the stream-safe layer (host malloc, cudaMalloc).
class RawAllocator {
 public:
  virtual ~RawAllocator() = default;
  virtual Place place() const = 0;
  virtual void* AllocateRaw(size_t bytes) = 0;
  virtual void FreeRaw(void* ptr, size_t bytes) = 0;
};

struct AllocatorStats {
  int64_t bytes_live = 0;               // blocks handed out or waiting on a stream
  int64_t frees_deferred = 0;           // releases that had to wait for a stream
  int64_t deferred_frees_completed = 0;  // of those, the ones since returned
  int64_t pending_frees = 0;            // deferred and not yet returned (now)
};

// A token identifying one RecordStream call, so that EraseStream removes only that record.
struct StreamRecord {
  uint64_t stream_id = 0;
  uint64_t token = 0;
};

class StreamSafeAllocator;

// Marks `allocation` as used by `stream` up to the stream's current end. No-op for the host
// stream (its work is already done) and for allocations from other allocators.
StreamRecord RecordStream(const std::shared_ptr<Allocation>& allocation, Stream* stream);
// Drops the record made by that RecordStream call. A later record on the same stream
// (by another op) is left alone: each task erases only its own.
void EraseStream(const std::shared_ptr<Allocation>& allocation, const StreamRecord& record);

// The stream-safe allocator of a place (process-wide, created on first use).
std::shared_ptr<StreamSafeAllocator> GetAllocator(const Place& place);
std::shared_ptr<Allocation> Alloc(const Place& place, size_t bytes);

// Host memory with a small exact-size cache so that reuse is deterministic (and visible to
// tests); cached blocks are poisoned under ASan.
std::unique_ptr<RawAllocator> CreateHostRawAllocator();
#ifdef PADDLE_WITH_CUDA
std::unique_ptr<RawAllocator> CreateCudaRawAllocator(int device);  // cuda_allocator.cc
#endif

}  // namespace memory
}  // namespace phi
