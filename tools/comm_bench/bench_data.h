// What every rank puts into its input and what every output element must hold: the expected
// value is computed here from the input formula of every rank, independently of the engine.
#pragma once

#include <cstdint>

#include "phi/core/dense_tensor.h"
#include "phi/core/distributed/reduce_op.h"

namespace paddle_like {
namespace bench {

using phi::DataType;
using phi::DenseTensor;
using phi::distributed::ReduceOp;

// How output element j of rank `rank` is defined (c = per-rank block count, n = ranks).
enum class Layout {
  kReduceSame,     // red over r of v(r, j)                  allreduce, reduce
  kReduceBlock,    // red over r of v(r, rank*c + j)         reducescatter
  kConcat,         // v(j / c, j % c)                        allgather, gather
  kFromRoot,       // v(root, j)                             broadcast
  kFromRootBlock,  // v(root, rank*c + j)                    scatter
  kTranspose,      // v(j / c, rank*c + j % c)               alltoall
  kFromPrev,       // v((rank - 1 + n) % n, j)               sendrecv
};

struct CheckSpec {
  Layout layout;
  DataType dtype;
  ReduceOp redop;  // for the reducing layouts
  int rank;
  int world;
  int root;
  int64_t block;  // c
};

// Fills `t` (any place; contiguous) with v(rank, first + j) for every element j. `reducing`
// picks the value family that keeps `redop` exact in every dtype.
void FillInput(DenseTensor* t, DataType dtype, bool reducing, ReduceOp redop, int rank,
               int64_t first = 0);

// Elements of `out` (any place) that differ from the expectation beyond the dtype's
// tolerance.
int64_t CountWrong(const DenseTensor& out, const CheckSpec& spec);

}  // namespace bench
}  // namespace paddle_like
