#include "phi/core/device_context.h"

#include "phi/core/cpu_stream.h"
#include "phi/core/errors.h"

namespace phi {

CPUContext::CPUContext() : DeviceContext(std::make_unique<CpuHostStream>()) {}
CPUContext::CPUContext(const std::string& worker_name)
    : DeviceContext(std::make_unique<CpuWorkerStream>(worker_name)) {}

std::unique_ptr<DeviceContext> CreateCommStreamContext(const Place& place,
                                                       const std::string& name,
                                                       bool high_priority) {
  if (place.is_cpu()) return std::make_unique<CPUContext>(name);
#ifdef PADDLE_WITH_CUDA
  return CreateGPUContext(place.GetDeviceId(), high_priority);
#else
  (void)high_priority;
  PADDLE_THROW(errors::Unavailable("No comm context for %s: this build has no CUDA support.",
                                   place.DebugString().c_str()));
#endif
}

DeviceContextPool& DeviceContextPool::Instance() {
  static auto* pool = new DeviceContextPool();  // never destroyed: outlives static users
  return *pool;
}

DeviceContext* DeviceContextPool::Get(const Place& place) {
  if (place.is_cpu()) {
    if (DeviceContext* c = cpu_.load(std::memory_order_acquire)) return c;
  }
  std::lock_guard<std::mutex> lk(mu_);
  auto& slot = contexts_[place];
  if (!slot) {
    if (place.is_cpu()) {
      slot = std::make_unique<CPUContext>();
      cpu_.store(slot.get(), std::memory_order_release);
    } else {
#ifdef PADDLE_WITH_CUDA
      slot = CreateGPUContext(place.GetDeviceId());
#else
      PADDLE_THROW(errors::Unavailable(
          "No device context for %s: this build has no CUDA support.",
          place.DebugString().c_str()));
#endif
    }
  }
  return slot.get();
}

}  // namespace phi
