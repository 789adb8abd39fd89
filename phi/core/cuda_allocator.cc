// The raw CUDA block source under the stream-safe allocator: cudaMalloc / cudaFree.
#include <cuda_runtime_api.h>

#include <glog/logging.h>

#include "phi/core/allocator.h"
#include "phi/core/cuda_stream.h"
#include "phi/core/errors.h"

namespace phi {
namespace memory {
namespace {

class CudaRawAllocator : public RawAllocator {
 public:
  explicit CudaRawAllocator(int device) : device_(device) {}

  Place place() const override { return GPUPlace(device_); }

  void* AllocateRaw(size_t bytes) override {
    if (bytes == 0) return nullptr;
    CudaDeviceGuard guard(device_);
    void* ptr = nullptr;
    cudaError_t err = cudaMalloc(&ptr, bytes);
    if (err == cudaSuccess) return ptr;
    cudaGetLastError();  // out-of-memory is not sticky: clear it
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) cudaGetLastError();
    auto summary =
        err == cudaErrorMemoryAllocation
            ? errors::Unavailable("Out of memory on gpu:%d allocating %zu bytes (%zu of %zu "
                                  "bytes free): cudaMalloc: %s",
                                  device_, bytes, free_bytes, total_bytes,
                                  cudaGetErrorString(err))
            : errors::External("cudaMalloc of %zu bytes on gpu:%d failed: %s (%s)", bytes,
                               device_, cudaGetErrorString(err), cudaGetErrorName(err));
    PADDLE_THROW(summary);
  }

  // Runs from a shared_ptr deleter: reports, never throws.
  void FreeRaw(void* ptr, size_t bytes) override {
    if (ptr == nullptr) return;
    int previous = -1;
    bool restore = cudaGetDevice(&previous) == cudaSuccess && previous != device_;
    if (restore) cudaSetDevice(device_);
    cudaError_t err = cudaFree(ptr);
    if (err != cudaSuccess) {
      cudaGetLastError();
      LOG(ERROR) << "cudaFree(" << ptr << ", " << bytes << " B) on gpu:" << device_
                 << " failed: " << cudaGetErrorString(err);
    }
    if (restore) cudaSetDevice(previous);
  }

 private:
  int device_;
};

}  // namespace

std::unique_ptr<RawAllocator> CreateCudaRawAllocator(int device) {
  return std::make_unique<CudaRawAllocator>(device);
}

}  // namespace memory
}  // namespace phi
