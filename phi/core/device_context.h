// DeviceContext = place + stream. DeviceContextPool hands out the calc context of each
// place (the stream framework compute runs on); process groups own their comm contexts.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>

#include "phi/core/place.h"
#include "phi/core/stream.h"

namespace phi {

class DeviceContext {
 public:
  explicit DeviceContext(std::unique_ptr<Stream> stream) : stream_(std::move(stream)) {}
  virtual ~DeviceContext() = default;
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  Place GetPlace() const { return stream_->place(); }
  Stream* stream() const { return stream_.get(); }
  void Wait() const { stream_->Synchronize(); }

 private:
  std::unique_ptr<Stream> stream_;
};

// The CPU calc context (host stream) or, with a worker stream, a CPU comm context.
class CPUContext : public DeviceContext {
 public:
  CPUContext();                                   // calc: the host stream
  explicit CPUContext(const std::string& worker_name);  // comm: an in-order worker thread
};

// Creates a device context (not a communicator: that is a phi::distributed::CommContext)
// with a stream of its own for `place`: a worker thread on CPU, a new non-blocking
// cudaStream on GPU. Process groups use it for their comm streams.
// `high_priority`: a GPU stream of the device's greatest priority (ignored on CPU).
std::unique_ptr<DeviceContext> CreateCommStreamContext(const Place& place,
                                                       const std::string& name,
                                                       bool high_priority = false);

class DeviceContextPool {
 public:
  static DeviceContextPool& Instance();
  // The calc context of `place`, created on first use.
  DeviceContext* Get(const Place& place);

 private:
  std::mutex mu_;
  std::map<Place, std::unique_ptr<DeviceContext>> contexts_;
  // The CPU context once created: every CPU op asks for it, without the lock (contexts are
  // never destroyed).
  std::atomic<DeviceContext*> cpu_{nullptr};
};

#ifdef PADDLE_WITH_CUDA
// gpu_context.cc: a context owning a new cudaStream on `device` (calc or comm).
// `high_priority`: the device's greatest stream priority (an NCCL group's comm stream with
// ProcessGroupNCCLOptions::is_high_priority_stream).
std::unique_ptr<DeviceContext> CreateGPUContext(int device, bool high_priority = false);
#endif

}  // namespace phi
