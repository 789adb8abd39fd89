#include "phi/core/stream_safe_allocator.h"

#include <map>
#include <unordered_map>
#include <vector>

#include <glog/logging.h>

#include "phi/core/errors.h"
#include "phi/core/flags.h"
#include "phi/core/cpu_stream.h"
#include "phi/core/stream.h"

namespace phi {
namespace memory {

// One block with its stream records: for each stream, the latest mark. A later record on
// a stream supersedes an earlier one (the stream is in order), which is why records never
// grow past the number of streams that touched the block.
class StreamSafeAllocation : public Allocation {
 public:
  StreamSafeAllocation(void* ptr, size_t size, Place place,
                       std::shared_ptr<StreamSafeAllocator> owner)
      : Allocation(ptr, size, place), owner_(std::move(owner)) {}

  StreamRecord Record(Stream* stream) {
    auto event = stream->CreateEvent();
    event->Record(stream);
    std::lock_guard<std::mutex> lk(mu_);
    Mark& m = marks_[stream->id()];
    m.event = std::move(event);
    m.token = ++next_token_;
    return StreamRecord{stream->id(), m.token};
  }

  void Erase(const StreamRecord& r) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = marks_.find(r.stream_id);
    if (it != marks_.end() && it->second.token == r.token) marks_.erase(it);
  }

  // True when every recorded stream has passed its mark; drops marks found complete.
  bool StreamsPassed() {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = marks_.begin(); it != marks_.end();) {
      if (it->second.event->Query()) {
        it = marks_.erase(it);
      } else {
        return false;
      }
    }
    return true;
  }

  void WaitStreams() {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& kv : marks_) kv.second.event->Synchronize(std::chrono::hours(24));
    marks_.clear();
  }

  const std::shared_ptr<StreamSafeAllocator>& owner() const { return owner_; }

 private:
  struct Mark {
    std::unique_ptr<Event> event;
    uint64_t token = 0;
  };
  std::mutex mu_;
  std::map<uint64_t, Mark> marks_;
  uint64_t next_token_ = 0;
  std::shared_ptr<StreamSafeAllocator> owner_;  // keeps the allocator alive
};

StreamSafeAllocator::StreamSafeAllocator(std::unique_ptr<RawAllocator> raw)
    : raw_(std::move(raw)) {}

StreamSafeAllocator::~StreamSafeAllocator() {
  // Every allocation holds a reference to us, so nothing is pending here.
  CHECK(pending_.empty());
}

std::shared_ptr<Allocation> StreamSafeAllocator::Allocate(size_t bytes) {
  void* ptr;
  {
    std::lock_guard<std::mutex> lk(mu_);
    ProcessPendingFreesLocked();
    ptr = raw_->AllocateRaw(bytes);
    stats_.bytes_live += static_cast<int64_t>(bytes);
  }
  auto* a = new StreamSafeAllocation(ptr, bytes, raw_->place(), shared_from_this());
  return std::shared_ptr<Allocation>(a, [](Allocation* p) {
    auto* ssa = static_cast<StreamSafeAllocation*>(p);
    auto owner = ssa->owner();  // keep the allocator alive through Release
    owner->Release(ssa);
  });
}

void StreamSafeAllocator::Release(StreamSafeAllocation* a) {
  std::vector<StreamSafeAllocation*> overflow;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (a->StreamsPassed()) {
      FreeNow(a);
    } else {
      pending_.push_back(a);
      ++stats_.frees_deferred;
      VLOG(4) << "deferred free of " << a->size() << " B at " << a->ptr();
    }
    ProcessPendingFreesLocked();
    // Bound the pending list: past the limit the oldest blocks are waited for. Their
    // streams are in order, so the oldest are the likeliest to be done already. A thread
    // running a stream job does not wait (it may be the work the oldest block waits for);
    // the list may then exceed the bound until the next release on another thread.
    if (!InCpuStreamJob()) {
      while (static_cast<int64_t>(pending_.size()) > FLAGS_max_pending_stream_frees) {
        overflow.push_back(pending_.front());
        pending_.pop_front();
      }
    }
  }
  // Wait without mu_: a stream job may allocate or release (a worker drops a job's
  // captures, the last owners of blocks) and needs mu_ to do so.
  for (StreamSafeAllocation* oldest : overflow) {
    oldest->WaitStreams();
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.deferred_frees_completed;
    FreeNow(oldest);
  }
}

void StreamSafeAllocator::FreeNow(StreamSafeAllocation* a) {
  raw_->FreeRaw(a->ptr(), a->size());
  stats_.bytes_live -= static_cast<int64_t>(a->size());
  // The deleter copied owner(); deleting `a` drops its reference, not the last one.
  delete a;
}

void StreamSafeAllocator::ProcessPendingFrees() {
  std::lock_guard<std::mutex> lk(mu_);
  ProcessPendingFreesLocked();
}

void StreamSafeAllocator::ProcessPendingFreesLocked() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if ((*it)->StreamsPassed()) {
      StreamSafeAllocation* a = *it;
      it = pending_.erase(it);
      ++stats_.deferred_frees_completed;
      FreeNow(a);
    } else {
      ++it;
    }
  }
}

AllocatorStats StreamSafeAllocator::stats() {
  std::lock_guard<std::mutex> lk(mu_);
  ProcessPendingFreesLocked();
  AllocatorStats s = stats_;
  s.pending_frees = static_cast<int64_t>(pending_.size());
  return s;
}

// ------------------------------------------------------------------ free functions
StreamRecord RecordStream(const std::shared_ptr<Allocation>& allocation, Stream* stream) {
  if (!allocation || stream == nullptr || stream->IsHostStream()) return {};
  auto* ssa = dynamic_cast<StreamSafeAllocation*>(allocation.get());
  if (ssa == nullptr) return {};
  return ssa->Record(stream);
}

void EraseStream(const std::shared_ptr<Allocation>& allocation, const StreamRecord& record) {
  if (!allocation || record.token == 0) return;
  auto* ssa = dynamic_cast<StreamSafeAllocation*>(allocation.get());
  if (ssa != nullptr) ssa->Erase(record);
}

std::shared_ptr<StreamSafeAllocator> GetAllocator(const Place& place) {
  static std::mutex mu;
  static auto* allocators = new std::map<Place, std::shared_ptr<StreamSafeAllocator>>();
  std::lock_guard<std::mutex> lk(mu);
  auto& slot = (*allocators)[place];
  if (!slot) {
    if (place.is_cpu()) {
      slot = std::make_shared<StreamSafeAllocator>(CreateHostRawAllocator());
    } else {
#ifdef PADDLE_WITH_CUDA
      slot = std::make_shared<StreamSafeAllocator>(CreateCudaRawAllocator(place.GetDeviceId()));
#else
      PADDLE_THROW(errors::Unavailable(
          "Cannot allocate on %s: this build has no CUDA support (built without the toolkit "
          "or with -DWITH_GPU=OFF).",
          place.DebugString().c_str()));
#endif
    }
  }
  return slot;
}

std::shared_ptr<Allocation> Alloc(const Place& place, size_t bytes) {
  return GetAllocator(place)->Allocate(bytes);
}

}  // namespace memory
}  // namespace phi
