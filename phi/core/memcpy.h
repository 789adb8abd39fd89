// Byte copies between places. Host to host is memcpy; anything touching a GPU goes
// through the CUDA runtime (cuda_memcpy.cc), ordered on `stream` when one is given
// (nullptr: the copy is complete when this returns).
#pragma once

#include <cstddef>

#include "phi/core/place.h"

namespace phi {
class Stream;
namespace memory {

void Copy(const Place& dst_place, void* dst, const Place& src_place, const void* src,
          size_t bytes, Stream* stream);

#ifdef PADDLE_WITH_CUDA
// Defined in cuda_memcpy.cc; the only place that calls cudaMemcpy*.
void CudaCopy(const Place& dst_place, void* dst, const Place& src_place, const void* src,
              size_t bytes, Stream* stream);
#endif

}  // namespace memory
}  // namespace phi
