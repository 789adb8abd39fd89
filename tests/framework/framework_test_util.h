// Helpers of the framework tests: a Gloo world registered as ring 0, deterministic float64
// tensors, programs built op by op, and comparisons with a stated tolerance.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "paddle_like/dist/distributed.h"
#include "paddle_like/framework/executor.h"
#include "paddle_like/framework/op_desc.h"
#include "paddle_like/framework/scope.h"
#include "paddle_like/framework/var_type.h"
#include "phi/core/dense_tensor.h"

namespace paddle_like {
namespace testing {

using framework::AttributeMap;
using framework::ProgramDesc;
using framework::Scope;
using framework::VariableNameMap;
using phi::DDim;
using phi::DenseTensor;

constexpr int kFP64 = 6;  // VarType numbers of the dtype attributes
constexpr int kINT64 = 3;

// init_process_group (Gloo over env://, set by the harness) and the world registered as
// ring 0. Returns the world.
dist::GroupPtr InitWorldRing(std::chrono::milliseconds timeout = std::chrono::seconds(30));

// n values in [-1, 1), the same for the same seed on every rank.
std::vector<double> RandomValues(int64_t n, uint64_t seed);
DenseTensor RandomTensor(const DDim& dims, uint64_t seed);
DenseTensor Doubles(const std::vector<double>& v, const DDim& dims);
DenseTensor Int64s(const std::vector<int64_t>& v, const DDim& dims);
std::vector<double> ValuesOf(const DenseTensor& t);  // any floating dtype, as double

// Rows [r0, r1) / columns [c0, c1) of a 2-D float64 tensor, as a new tensor.
DenseTensor Rows(const DenseTensor& t, int64_t r0, int64_t r1);
DenseTensor Cols(const DenseTensor& t, int64_t c0, int64_t c1);

// Appends an op.
framework::OpDesc& AddOp(ProgramDesc* p, const std::string& type, VariableNameMap ins,
                         VariableNameMap outs, AttributeMap attrs = {});

// EXPECT that got and want have the same shape and |got - want| <= tol * max(1, |want|)
// everywhere; `what` names the tensor in the failure.
void ExpectClose(const DenseTensor& got, const DenseTensor& want, double tol,
                 const std::string& what);
void ExpectValues(const DenseTensor& got, const std::vector<double>& want, double tol,
                  const std::string& what);

}  // namespace testing
}  // namespace paddle_like
