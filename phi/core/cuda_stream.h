// CUDA streams and events: the device implementation of phi::Stream / phi::Event.
//
// A CudaStream owns a non-blocking cudaStream_t on one device. Launch(fn) runs fn on the
// calling thread; fn enqueues device work on native_handle(). Host waits (Synchronize) poll
// with a deadline and raise phi::TimeoutError, so a hung kernel or collective is reported,
// never waited for forever.
//
// Built only with CUDA, but it includes no CUDA header: the handle types are declared here as
// the CUDA runtime declares them (a repeated identical typedef is allowed), and CUDA error
// codes pass as int, so a consumer of the installed headers needs no CUDA include path.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "phi/core/stream.h"

struct CUstream_st;
struct CUevent_st;
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;

namespace phi {

// Raises phi::ExternalError (phi::UnavailableError for "no device"/out-of-memory kinds)
// naming `what` and cudaGetErrorString(err). No-op for cudaSuccess.
void CheckCuda(int err, const char* what);  // err: a cudaError_t
#define PHI_CUDA_CHECK(expr) ::phi::CheckCuda((expr), #expr)

// Makes `device` current for the scope and restores the previous device afterwards.
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int device);
  ~CudaDeviceGuard();
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

class CudaEvent : public Event {
 public:
  explicit CudaEvent(int device);
  ~CudaEvent() override;

  // Records on a CudaStream (InvalidArgument for any other kind of stream).
  void Record(Stream* stream) override;
  bool Query() const override;
  // Polls cudaEventQuery until complete; TimeoutError at the deadline.
  void Synchronize(std::chrono::milliseconds timeout) const override;

  cudaEvent_t native() const { return event_; }
  int device() const { return device_; }
  bool recorded() const { return recorded_; }

 private:
  int device_;
  cudaEvent_t event_ = nullptr;
  bool recorded_ = false;
  std::string stream_name_;
};

class CudaStream : public Stream {
 public:
  // A new non-blocking stream on `device` (cudaStreamNonBlocking: it does not
  // synchronize with the legacy default stream).
  // `priority`: cudaStreamCreateWithPriority's (0: the default; smaller is higher).
  explicit CudaStream(int device, std::string name = "cuda", int priority = 0);
  ~CudaStream() override;  // waits for submitted work, then destroys the stream

  Place place() const override { return GPUPlace(device_); }
  void Launch(std::function<void()> fn) override;
  // cudaStreamWaitEvent: the device waits, the host does not. Accepts a CudaEvent, or a
  // CPU event (which, not being device work, is waited for on the host before returning).
  void WaitEvent(const Event& event) override;
  bool Query() const override;
  void Synchronize(std::chrono::milliseconds timeout = std::chrono::hours(24)) const override;
  std::unique_ptr<Event> CreateEvent() const override;
  void* native_handle() const override { return stream_; }
  std::string DebugString() const override;

  cudaStream_t raw() const { return stream_; }
  int device() const { return device_; }

 private:
  int device_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
};

// Polls `done` (cudaEventQuery / cudaStreamQuery style, returning a cudaError_t) until it
// returns cudaSuccess,
// raising TimeoutError with `what` once `timeout` passes and ExternalError on a CUDA error.
void PollCuda(const std::function<int()>& done, std::chrono::milliseconds timeout,
              const std::string& what);

}  // namespace phi
