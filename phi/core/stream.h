// Streams and events: the ordering model of the runtime.
//
// A Stream runs work in submission order. An Event marks a point in a stream. The same
// interface has a CUDA implementation (cudaStream_t / cudaEvent_t, in cuda_stream.h) and a
// CPU one (cpu_stream.h): there the calc stream is the calling host thread and a comm
// stream is an in-order worker thread, so overlap and wait chains behave the same on a
// machine without a GPU.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "phi/core/place.h"

namespace phi {

class Event;

class Stream {
 public:
  Stream();
  virtual ~Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  virtual Place place() const = 0;
  // Unique within the process and never reused, unlike the object's address.
  uint64_t id() const { return id_; }
  // True when work "on" this stream runs on the calling thread before Launch returns.
  virtual bool IsHostStream() const { return false; }

  // Runs `fn` in stream order. A CPU worker stream queues it; the host stream runs it now;
  // a CUDA stream runs it now on the caller, and `fn` enqueues device work on the stream.
  virtual void Launch(std::function<void()> fn) = 0;
  // When the stream has nothing pending and can run work on the calling thread, runs `fn`
  // here (it has completed when this returns true) and returns true; otherwise runs nothing
  // and returns false. The CPU fast path for small sync ops: a caller that gets true issued
  // no stream work at all (no job object, no event to record). `fn` is borrowed, not kept.
  virtual bool RunIfIdle(const std::function<void()>& fn) {
    (void)fn;
    return false;
  }
  // Like Launch, but runs `fn` on the calling thread when the stream is idle (RunIfIdle).
  void LaunchPreferInline(std::function<void()> fn) {
    if (!RunIfIdle(fn)) Launch(std::move(fn));
  }

  // The stream waits for `event`; the host does not (except on the host stream, which is
  // the host).
  virtual void WaitEvent(const Event& event) = 0;
  // True when all work submitted so far has completed.
  virtual bool Query() const = 0;
  // The host waits for all work submitted so far; TimeoutError at the deadline.
  virtual void Synchronize(std::chrono::milliseconds timeout = std::chrono::hours(24)) const = 0;
  // An event of the kind this stream records.
  virtual std::unique_ptr<Event> CreateEvent() const = 0;
  // cudaStream_t for CUDA streams, nullptr otherwise.
  virtual void* native_handle() const { return nullptr; }
  virtual std::string DebugString() const;

 private:
  uint64_t id_;
};

class Event {
 public:
  virtual ~Event() = default;
  // Marks the current end of `stream`'s submitted work. Re-recording moves the mark.
  virtual void Record(Stream* stream) = 0;
  // True when the marked point has passed (an event never recorded is complete).
  virtual bool Query() const = 0;
  // The host waits for the point; raises phi::TimeoutError when `timeout` passes first.
  virtual void Synchronize(std::chrono::milliseconds timeout) const = 0;
};

}  // namespace phi
