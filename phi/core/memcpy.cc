#include "phi/core/memcpy.h"

#include <cstring>

#include "phi/core/errors.h"

namespace phi {
namespace memory {

void Copy(const Place& dst_place, void* dst, const Place& src_place, const void* src,
          size_t bytes, Stream* stream) {
  if (bytes == 0 || dst == src) return;
  if (dst_place.is_cpu() && src_place.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef PADDLE_WITH_CUDA
  CudaCopy(dst_place, dst, src_place, src, bytes, stream);
#else
  PADDLE_THROW(errors::Unavailable("Copy from %s to %s needs CUDA, and this build has none.",
                                   src_place.DebugString().c_str(),
                                   dst_place.DebugString().c_str()));
#endif
}

}  // namespace memory
}  // namespace phi
