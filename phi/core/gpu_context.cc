// The CUDA device context: a place plus a CudaStream of its own.
#include <cuda_runtime_api.h>

#include "phi/core/cuda_stream.h"
#include "phi/core/device_context.h"
#include "phi/core/device_info.h"
#include "phi/core/errors.h"

namespace phi {

std::unique_ptr<DeviceContext> CreateGPUContext(int device, bool high_priority) {
  const int count = GetGPUDeviceCount();
  if (device < 0 || device >= count) {
    PADDLE_THROW(errors::Unavailable(
        "Cannot create a context on gpu:%d: %d CUDA device(s) visible%s%s.", device, count,
        count == 0 ? ": " : "", count == 0 ? GPUUnavailableReason().c_str() : ""));
  }
  PHI_CUDA_CHECK(cudaSetDevice(device));
  int priority = 0;
  if (high_priority) {
    // The greatest priority is the smallest number (cudaDeviceGetStreamPriorityRange).
    int least = 0;
    PHI_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &priority));
  }
  return std::make_unique<DeviceContext>(
      std::make_unique<CudaStream>(device, "cuda", priority));
}

}  // namespace phi
