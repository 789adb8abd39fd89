// Python objects that expose the buffer protocol (numpy arrays, and DLPack tensors once the
// Python layer has viewed them as numpy arrays) seen as phi::DenseTensor without a copy.
#pragma once

#include <pybind11/pybind11.h>

#include <vector>

#include "phi/core/dense_tensor.h"

namespace paddle_like {
namespace python {

// A CPU tensor over `obj`'s memory. The tensor's allocation holds the Python buffer, so the
// memory stays valid while any op (or task of a stream) still holds the tensor, also after
// the program dropped its last reference to the array. `writable`: the op writes it (a
// read-only buffer is a ValueError naming `what`). A non-contiguous buffer is a ValueError.
phi::DenseTensor TensorFromBuffer(const pybind11::handle& obj, bool writable, const char* what);
// `obj` may also be a DLPack capsule (a producer's __dlpack__()), or a (capsule, dtype name)
// pair where the name corrects what DLPack cannot say (torch 1.13 sends bool as uint8).
std::vector<phi::DenseTensor> TensorsFromList(const pybind11::handle& list, bool writable,
                                              const char* what);

// Copies src's bytes into dst (same dtype and element count): the copy-back of the ops that
// communicate through a staging buffer.
void CopyInto(const pybind11::handle& dst, const pybind11::handle& src);

}  // namespace python
}  // namespace paddle_like
