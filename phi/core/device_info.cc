#include "phi/core/device_info.h"

namespace phi {

namespace {
struct DeviceInfo {
  int count = 0;
  std::string reason;
};

const DeviceInfo& Info() {
  static const DeviceInfo info = [] {
    DeviceInfo i;
#ifdef PADDLE_WITH_CUDA
    i.count = detail::QueryCudaDeviceCount(&i.reason);
#else
    i.reason = "this build has no CUDA support (built without the toolkit or with "
               "-DWITH_GPU=OFF)";
#endif
    if (i.count > 0) i.reason.clear();
    return i;
  }();
  return info;
}
}  // namespace

bool IsCompiledWithCuda() {
#ifdef PADDLE_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int GetGPUDeviceCount() { return Info().count; }

std::string GPUUnavailableReason() { return Info().reason; }

}  // namespace phi
