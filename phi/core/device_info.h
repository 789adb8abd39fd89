// Which GPUs this process can use. CUDA-free: any code may include it; without CUDA (built
// with -DWITH_GPU=OFF or without the toolkit) it reports no device.
#pragma once

#include <string>

namespace phi {

// Whether this build has the CUDA/NCCL code paths.
bool IsCompiledWithCuda();
// Number of visible CUDA devices; 0 when built without CUDA, when there is no driver
// (cudaErrorInsufficientDriver), or when no device is visible. Queried once per process.
int GetGPUDeviceCount();
// Why GetGPUDeviceCount() is 0 ("built without CUDA", "cudaGetDeviceCount: ..."); empty
// when a device is visible.
std::string GPUUnavailableReason();

namespace detail {
#ifdef PADDLE_WITH_CUDA
// gpu_info.cc: cudaGetDeviceCount, with the reason filled in when it finds none.
int QueryCudaDeviceCount(std::string* reason);
#endif
}  // namespace detail

}  // namespace phi
