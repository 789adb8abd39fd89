// Elementwise reduction kernels on host memory, for CPU engines (Gloo, MPI) that take a
// user reduce function. One table for every dtype x op; complex types are reduced through
// their real view by the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "phi/core/data_type.h"
#include "phi/core/distributed/reduce_op.h"

namespace phi {
namespace distributed {

// c[i] = a[i] (op) b[i] for n elements; c is a, b, or apart from both (no partial
// overlap). Gloo's reduce-function shape.
using CpuReduceFn = void (*)(void* c, const void* a, const void* b, size_t n);

// The kernel combining two partial results under `op`. AVG and PREMUL_SUM combine as SUM
// (the engine scales before or after). bool: SUM/MAX/BOR = or, PRODUCT/MIN/BAND = and,
// BXOR = xor. Raises InvalidArgument for pairs CheckReduceSupported rejects.
CpuReduceFn GetCpuReduceFn(DataType dtype, ReduceOp op);

// dst[i] = src[i] * factor for n elements (dst may equal src), computed in double for
// integers and float for 16-bit floats, then converted back.
void CpuScale(DataType dtype, void* dst, const void* src, int64_t n, double factor);
// dst[i] /= divisor: AVG's final step (integer division for integer types).
void CpuDivide(DataType dtype, void* dst, int64_t n, int64_t divisor);

// The input of a host reduction as the kernels see it: a complex type as its real view
// (twice the elements), PREMUL_SUM's input scaled into a copy it owns. Shared by the CPU
// engines and the engine's fused small all-reduce, so both reduce alike.
struct CpuReduceInput {
  const void* data;
  int64_t count;
  DataType dtype;
  std::vector<char> scaled;  // owns the scaled copy for PREMUL_SUM
};
CpuReduceInput PrepareCpuReduce(const void* send, int64_t count, DataType dtype,
                                const Reduction& red);

// The all-reduce of gathered blocks: out = gathered[0] (op) ... (op) gathered[n-1], block r at
// r * block_bytes, `count` elements of (real, prepared) `dtype` each, always in rank order,
// then AVG's divide. Every rank that reduces the same gathered blocks gets the same bits (a
// ring reduces in a different order on each rank). out may not alias `gathered`.
void CpuAllReduceGathered(DataType dtype, ReduceOp op, const char* gathered, size_t block_bytes,
                          int n, int64_t count, void* out);

}  // namespace distributed
}  // namespace phi
