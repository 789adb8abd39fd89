// The CUDA half of device_info.h.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>

#include "phi/core/device_info.h"

namespace phi {
namespace detail {

int QueryCudaDeviceCount(std::string* reason) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    // cudaErrorInsufficientDriver / cudaErrorNoDevice: a machine without a GPU (or driver).
    *reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(err) + ": " +
              cudaGetErrorString(err);
    return 0;
  }
  if (count == 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    *reason = std::string("cudaGetDeviceCount found no device (CUDA_VISIBLE_DEVICES=") +
              (visible ? visible : "<unset>") + ")";
  }
  return count;
}

}  // namespace detail
}  // namespace phi
