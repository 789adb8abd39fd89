// Copies and staging for DataParallel's buckets on any place: the bytes of one contiguous
// tensor into another of the same size, ordered on the calc stream of the device they are
// on (a CPU place copies at once). Buckets, gradients and parameters share one place, so the
// copies never cross the host-device boundary except where a caller stages on purpose.
#pragma once

#include <vector>

#include "phi/core/dense_tensor.h"

namespace paddle_like {

// dst's bytes become src's (same byte size, contiguous); on a GPU place ordered on that
// device's calc stream, where the gradients are produced and consumed.
void CopyBytes(const phi::DenseTensor& src, phi::DenseTensor* dst);

// `t` on `place` (a copy when it is elsewhere; a device copy completes before this returns).
phi::DenseTensor OnPlace(const phi::DenseTensor& t, const phi::Place& place);

// The one place every tensor of `tensors` is on; InvalidArgument naming `what` and the first
// tensor elsewhere when they differ.
phi::Place CommonPlace(const std::vector<const phi::DenseTensor*>& tensors, const char* what);

}  // namespace paddle_like
