#include "paddle_like/parallel/device_copy.h"

#include "phi/core/device_context.h"
#include "phi/core/errors.h"
#include "phi/core/memcpy.h"

namespace paddle_like {

void CopyBytes(const phi::DenseTensor& src, phi::DenseTensor* dst) {
  PADDLE_ENFORCE(src.nbytes() == dst->nbytes(),
                 phi::errors::InvalidArgument("CopyBytes: %zu bytes into a tensor of %zu.",
                                              src.nbytes(), dst->nbytes()));
  if (src.nbytes() == 0) return;
  const phi::Place& device = dst->place().is_cpu() ? src.place() : dst->place();
  phi::Stream* stream =
      device.is_cpu() ? nullptr : phi::DeviceContextPool::Instance().Get(device)->stream();
  phi::memory::Copy(dst->place(), dst->data(), src.place(), src.data(), src.nbytes(), stream);
}

phi::DenseTensor OnPlace(const phi::DenseTensor& t, const phi::Place& place) {
  if (t.place() == place) return t;
  phi::DenseTensor out;
  phi::Copy(t, place, &out);
  return out;
}

phi::Place CommonPlace(const std::vector<const phi::DenseTensor*>& tensors, const char* what) {
  PADDLE_ENFORCE(!tensors.empty(), phi::errors::InvalidArgument("%s: no tensors.", what));
  const phi::Place place = tensors[0]->place();
  for (size_t i = 1; i < tensors.size(); ++i) {
    PADDLE_ENFORCE(tensors[i]->place() == place,
                   phi::errors::InvalidArgument(
                       "%s: every tensor must be on one place; tensor 0 is on %s, tensor %zu on "
                       "%s.",
                       what, place.DebugString().c_str(), i,
                       tensors[i]->place().DebugString().c_str()));
  }
  return place;
}

}  // namespace paddle_like
