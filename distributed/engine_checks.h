// Argument checks of the collective engine, shared by its op files. Each raises a typed
// error naming what was expected and what came, before anything is issued.
#pragma once

#include <cstdint>
#include <vector>

#include "distributed/types.h"
#include "phi/core/dense_tensor.h"
#include "phi/core/distributed/reduce_op.h"

namespace paddle_like {
namespace distributed {
namespace engine {

void CheckTensor(const phi::DenseTensor& t, const char* what);
void CheckSameDtype(const phi::DenseTensor& a, const char* a_name, const phi::DenseTensor& b,
                    const char* b_name);
void CheckNumel(int64_t got, int64_t expected, const char* what);
void CheckRank(int64_t rank, int size, const char* what);
// An output that is not allocated gets storage of `numel` elements like `like`; an
// allocated one must be contiguous and match dtype, size and place.
void PrepareOutput(phi::DenseTensor* out, const phi::DenseTensor& like, int64_t numel,
                   const char* what);
// The view [offset, offset + numel) of t; numel -1 means "to the end".
phi::DenseTensor PartialView(const phi::DenseTensor& t, int64_t offset, int64_t numel,
                             const char* what);
phi::distributed::Reduction MakeReduction(ReduceOp op, double factor, phi::DataType dtype);

// Dim-0 splits (rows per rank; empty = equal) as element counts and offsets.
struct Splits {
  std::vector<int64_t> counts, offsets;
};
Splits MakeSplits(const std::vector<int64_t>& rows, const phi::DenseTensor& t, int size,
                  const char* what);

// The dims an unallocated AllToAll output gets: dim 0 is the sum of the output split sizes
// (the input's dim 0 when they are empty: equal splits), the other dims the input's.
phi::DDim AllToAllOutputDims(const phi::DenseTensor& in, const std::vector<int64_t>& out_rows);
// Raises when `out`'s memory overlaps `in`'s (an in-place all-to-all would read blocks it
// has already overwritten).
void CheckNoOverlap(const phi::DenseTensor& in, const phi::DenseTensor& out, const char* op);
// A point-to-point peer must be another rank (a message to oneself has no engine to carry
// it), and user tags are >= 0 (negative tags are the engine's own).
void CheckPeer(int peer, int self, int tag, const char* what);

inline char* Bytes(void* p) { return static_cast<char*>(p); }
inline const char* Bytes(const void* p) { return static_cast<const char*>(p); }

}  // namespace engine
}  // namespace distributed
}  // namespace paddle_like
