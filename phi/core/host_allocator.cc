// Host blocks from malloc, with an exact-size cache: a freed block of size S is handed to
// the next request of size S. This makes reuse deterministic (tests observe it) and saves
// malloc/free of large gradient buffers every step. The cache is bounded; cached blocks
// are poisoned under ASan so a use after free is still caught.
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "phi/core/allocator.h"
#include "phi/core/errors.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define PHI_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define PHI_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define PHI_POISON(p, n) ((void)(p), (void)(n))
#define PHI_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace phi {
namespace memory {
namespace {

constexpr size_t kAlignment = 64;                    // cache line; fine for any dtype
constexpr size_t kMaxCachedBytes = size_t(1) << 30;  // 1 GiB

class HostRawAllocator : public RawAllocator {
 public:
  ~HostRawAllocator() override {
    for (auto& kv : cache_) {
      for (void* p : kv.second) {
        PHI_UNPOISON(p, kv.first);
        std::free(p);
      }
    }
  }
  Place place() const override { return CPUPlace(); }

  void* AllocateRaw(size_t bytes) override {
    size_t n = RoundUp(bytes);
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = cache_.find(n);
      if (it != cache_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_bytes_ -= n;
        PHI_UNPOISON(p, n);
        return p;
      }
    }
    void* p = std::aligned_alloc(kAlignment, n);
    if (p == nullptr) {
      PADDLE_THROW(errors::Unavailable("Host allocation of %zu bytes failed (out of memory).",
                                       bytes));
    }
    return p;
  }

  void FreeRaw(void* ptr, size_t bytes) override {
    size_t n = RoundUp(bytes);
    std::lock_guard<std::mutex> lk(mu_);
    if (cached_bytes_ + n <= kMaxCachedBytes) {
      PHI_POISON(ptr, n);
      cache_[n].push_back(ptr);
      cached_bytes_ += n;
    } else {
      std::free(ptr);
    }
  }

 private:
  static size_t RoundUp(size_t bytes) {
    size_t n = bytes == 0 ? kAlignment : bytes;
    return (n + kAlignment - 1) / kAlignment * kAlignment;
  }
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> cache_;
  size_t cached_bytes_ = 0;
};

}  // namespace

std::unique_ptr<RawAllocator> CreateHostRawAllocator() {
  return std::make_unique<HostRawAllocator>();
}

}  // namespace memory
}  // namespace phi
