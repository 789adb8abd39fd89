// Helpers for collective tests: deterministic per-rank inputs and an independent host
// reference (computed in double from the same generator, never through the engine).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <string>
#include <vector>

#include "distributed/process_group_gloo.h"
#include "phi/core/dense_tensor.h"
#include "phi/core/distributed/reduce_op.h"

namespace paddle_like {
namespace testing {

using distributed::ReduceOp;
using phi::DataType;
using phi::DenseTensor;

// Small integers so that every dtype (int8 products, float16 sums) is exact.
inline double Gen(int rank, int64_t i, ReduceOp op, int salt = 0) {
  if (op == ReduceOp::PRODUCT) return 1 + (rank + i + salt) % 2;
  return 1 + (rank * 7 + i * 3 + salt) % 5;
}
inline bool GenBool(int rank, int64_t i, int salt = 0) { return ((rank * 5 + i * 3 + salt) % 3) != 0; }

// A value of one element as (real, imag) doubles.
struct Val {
  double re = 0, im = 0;
};

// Writes element i of a tensor of `dtype` from v.
void SetElem(DenseTensor* t, int64_t i, Val v);
Val GetElem(const DenseTensor& t, int64_t i);
// A CPU tensor of n elements where element i = Gen(rank, i, op, salt) (imag = real + 1 for
// complex; bool from GenBool).
DenseTensor MakeInput(DataType dtype, int64_t n, int rank, ReduceOp op, int salt = 0);
// The reference of reducing element i over all ranks (double arithmetic, then the same
// conversion the dtype applies).
Val ReduceRef(DataType dtype, ReduceOp op, int world, int64_t i, double premul, int salt = 0);
// Expects t[i] == expected[i] within the dtype's tolerance; returns mismatch count and
// records at most a few failures with context.
int ExpectClose(const DenseTensor& t, const std::vector<Val>& expected, const std::string& what);
// Element i as Val straight from the generator (what rank `rank` contributed).
Val InputVal(DataType dtype, int rank, int64_t i, ReduceOp op, int salt = 0);

// The dtypes every collective is tested on.
inline std::vector<DataType> AllDtypes() {
  return std::vector<DataType>(std::begin(phi::kAllDataTypes), std::end(phi::kAllDataTypes));
}
inline std::vector<ReduceOp> AllReduceOps() {
  return {ReduceOp::SUM,  ReduceOp::AVG, ReduceOp::PRODUCT, ReduceOp::MIN,       ReduceOp::MAX,
          ReduceOp::BAND, ReduceOp::BOR, ReduceOp::BXOR,    ReduceOp::PREMUL_SUM};
}
bool OpSupported(ReduceOp op, DataType dtype);

}  // namespace testing
}  // namespace paddle_like
