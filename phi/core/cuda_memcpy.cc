// Copies that touch a GPU. With a CUDA stream the copy is ordered on it (cudaMemcpyAsync).
// Without one it is ordered after the device's calc stream (the DeviceContextPool context,
// where Task::Wait orders finished collectives) and complete when this returns, so
// `task->Wait(); tensor.ToVector()` reads the result.
#include <cuda_runtime_api.h>

#include "phi/core/cuda_stream.h"
#include "phi/core/device_context.h"
#include "phi/core/errors.h"
#include "phi/core/memcpy.h"

namespace phi {
namespace memory {

namespace {
cudaMemcpyKind KindOf(const Place& dst, const Place& src) {
  if (src.is_cpu()) return dst.is_cpu() ? cudaMemcpyHostToHost : cudaMemcpyHostToDevice;
  return dst.is_cpu() ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
}
}  // namespace

void CudaCopy(const Place& dst_place, void* dst, const Place& src_place, const void* src,
              size_t bytes, Stream* stream) {
  if (bytes == 0) return;
  PADDLE_ENFORCE(dst != nullptr && src != nullptr,
                 errors::InvalidArgument("CudaCopy of %zu bytes from %s to %s with a null "
                                         "pointer.",
                                         bytes, src_place.DebugString().c_str(),
                                         dst_place.DebugString().c_str()));
  const int device = dst_place.is_gpu() ? dst_place.GetDeviceId() : src_place.GetDeviceId();
  const cudaMemcpyKind kind = KindOf(dst_place, src_place);

  auto* cuda_stream = dynamic_cast<CudaStream*>(stream);
  const bool blocking = cuda_stream == nullptr;
  if (blocking) {
    // A host stream (or none): complete on return, after the calc stream's earlier work.
    cuda_stream = dynamic_cast<CudaStream*>(DeviceContextPool::Instance().Get(
        GPUPlace(device))->stream());
    PADDLE_ENFORCE_NOT_NULL(cuda_stream,
                            errors::PreconditionNotMet("The calc stream of gpu:%d is not a "
                                                       "CUDA stream.", device));
  }
  CudaDeviceGuard guard(cuda_stream->device());
  if (dst_place.is_gpu() && src_place.is_gpu() &&
      dst_place.GetDeviceId() != src_place.GetDeviceId()) {
    PHI_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_place.GetDeviceId(), src,
                                       src_place.GetDeviceId(), bytes, cuda_stream->raw()));
  } else {
    PHI_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, cuda_stream->raw()));
  }
  if (blocking) PHI_CUDA_CHECK(cudaStreamSynchronize(cuda_stream->raw()));
}

}  // namespace memory
}  // namespace phi
