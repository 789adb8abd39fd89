// Helpers shared by paddle_like::dist's .cc files (not installed).
#pragma once

#include <string>
#include <vector>

#include "phi/core/dense_tensor.h"

namespace paddle_like {
namespace dist {

// "cuda" for a GPU tensor, "cpu" otherwise: the key of a group's backend map.
std::string DeviceOf(const phi::DenseTensor& t);

// A list of `expected_len` tensors as one tensor of as many blocks, each `numel` elements
// (-1: the first tensor's) of one dtype and place, contiguous. Raises InvalidArgument
// naming `op` and the offending entry.
phi::DenseTensor FlattenList(const std::vector<phi::DenseTensor>& list, int expected_len,
                             int64_t numel, const char* op);

}  // namespace dist
}  // namespace paddle_like
