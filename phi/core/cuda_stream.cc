#include "phi/core/cuda_stream.h"

#include <cuda_runtime_api.h>

#include <thread>

#include <glog/logging.h>

#include "phi/core/errors.h"

namespace phi {

void CheckCuda(int code, const char* what) {
  const auto err = static_cast<cudaError_t>(code);
  if (err == cudaSuccess) return;
  // Clear the (non-sticky) error so that it is not reported again by an unrelated call.
  cudaGetLastError();
  std::string msg = std::string("CUDA error ") + std::to_string(static_cast<int>(err)) + " (" +
                    cudaGetErrorName(err) + ") in " + what + ": " + cudaGetErrorString(err);
  switch (err) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorMemoryAllocation:
      PADDLE_THROW(errors::Unavailable(msg));
    default:
      PADDLE_THROW(errors::External(msg));
  }
}

void PollCuda(const std::function<int()>& done, std::chrono::milliseconds timeout,
              const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout;
  auto sleep = std::chrono::microseconds(20);
  for (int spins = 0;; ++spins) {
    const auto err = static_cast<cudaError_t>(done());
    if (err == cudaSuccess) return;
    if (err != cudaErrorNotReady) CheckCuda(err, what.c_str());
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      PADDLE_THROW(errors::Timeout(
          "%s did not complete within %lld ms (waited %lld ms).", what.c_str(),
          static_cast<long long>(timeout.count()),
          static_cast<long long>(
              std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count())));
    }
    // Short waits spin (latency of small collectives); long ones back off to 1 ms polls.
    if (spins < 200) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(sleep);
      sleep = std::min(sleep * 2, std::chrono::microseconds(1000));
    }
  }
}

// ------------------------------------------------------------------ CudaDeviceGuard
CudaDeviceGuard::CudaDeviceGuard(int device) {
  PHI_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) {
    PHI_CUDA_CHECK(cudaSetDevice(device));
    changed_ = true;
  }
}

CudaDeviceGuard::~CudaDeviceGuard() {
  if (changed_) cudaSetDevice(previous_);
}

// ------------------------------------------------------------------ CudaEvent
CudaEvent::CudaEvent(int device) : device_(device) {
  CudaDeviceGuard guard(device_);
  PHI_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) {
    cudaError_t err = cudaEventDestroy(event_);  // safe while pending: freed on completion
    if (err != cudaSuccess) {
      cudaGetLastError();
      LOG(WARNING) << "cudaEventDestroy: " << cudaGetErrorString(err);
    }
  }
}

void CudaEvent::Record(Stream* stream) {
  auto* cuda = dynamic_cast<CudaStream*>(stream);
  PADDLE_ENFORCE_NOT_NULL(
      cuda, errors::InvalidArgument("CudaEvent can only be recorded on a CUDA stream, got %s",
                                    stream == nullptr ? "null" : stream->DebugString().c_str()));
  PADDLE_ENFORCE_EQ(cuda->device(), device_,
                    errors::InvalidArgument("CudaEvent of gpu:%d recorded on %s", device_,
                                            cuda->DebugString().c_str()));
  CudaDeviceGuard guard(device_);
  PHI_CUDA_CHECK(cudaEventRecord(event_, cuda->raw()));
  recorded_ = true;
  stream_name_ = cuda->DebugString();
}

namespace {
// A cudaEventQuery/cudaStreamQuery result as done (true) / not yet (false); raises on errors.
bool Done(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  if (err != cudaErrorNotReady) CheckCuda(err, what);
  return false;
}
}  // namespace

bool CudaEvent::Query() const {
  return !recorded_ || Done(cudaEventQuery(event_), "cudaEventQuery");
}

void CudaEvent::Synchronize(std::chrono::milliseconds timeout) const {
  if (!recorded_) return;
  cudaEvent_t e = event_;
  PollCuda([e] { return cudaEventQuery(e); }, timeout, "Event on " + stream_name_);
}

// ------------------------------------------------------------------ CudaStream
CudaStream::CudaStream(int device, std::string name, int priority)
    : device_(device), name_(std::move(name)) {
  CudaDeviceGuard guard(device_);
  PHI_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priority));
}

CudaStream::~CudaStream() {
  if (stream_ == nullptr) return;
  CudaDeviceGuard guard(device_);
  cudaError_t err = cudaStreamSynchronize(stream_);
  if (err != cudaSuccess) {
    cudaGetLastError();
    LOG(WARNING) << DebugString() << ": synchronize before destroy: " << cudaGetErrorString(err);
  }
  cudaStreamDestroy(stream_);
}

void CudaStream::Launch(std::function<void()> fn) {
  CudaDeviceGuard guard(device_);
  fn();
}

void CudaStream::WaitEvent(const Event& event) {
  if (auto* cuda = dynamic_cast<const CudaEvent*>(&event)) {
    if (!cuda->recorded()) return;
    CudaDeviceGuard guard(device_);
    PHI_CUDA_CHECK(cudaStreamWaitEvent(stream_, cuda->native(), 0));
    return;
  }
  // A host-side event (CPU stream): the device cannot wait on it; the host does, so that
  // everything enqueued here afterwards is ordered after it.
  event.Synchronize(std::chrono::hours(24 * 365));
}

bool CudaStream::Query() const { return Done(cudaStreamQuery(stream_), "cudaStreamQuery"); }

void CudaStream::Synchronize(std::chrono::milliseconds timeout) const {
  // Poll an event recorded now rather than the stream, so that work submitted by other
  // threads after this call does not extend the wait.
  CudaEvent e(device_);
  e.Record(const_cast<CudaStream*>(this));
  cudaEvent_t raw = e.native();
  PollCuda([raw] { return cudaEventQuery(raw); }, timeout, DebugString());
}

std::unique_ptr<Event> CudaStream::CreateEvent() const {
  return std::make_unique<CudaEvent>(device_);
}

std::string CudaStream::DebugString() const {
  return "CudaStream(" + name_ + ", gpu:" + std::to_string(device_) + ", id " +
         std::to_string(id()) + ")";
}

}  // namespace phi
