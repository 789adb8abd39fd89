#include "tests/framework/framework_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "paddle_like/operators/comm_ring.h"
#include "phi/kernels/math_kernels.h"

namespace paddle_like {
namespace testing {

dist::GroupPtr InitWorldRing(std::chrono::milliseconds timeout) {
  dist::InitOptions o;
  o.backend = "gloo";
  o.timeout = timeout;
  dist::init_process_group(o);
  operators::RegisterCommRing(dist::world(), 0);
  return dist::world();
}

std::vector<double> RandomValues(int64_t n, uint64_t seed) {
  std::vector<double> v(static_cast<size_t>(n));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x1234567ull;
  for (auto& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = static_cast<double>(s >> 11) / static_cast<double>(1ull << 53) * 2.0 - 1.0;
  }
  return v;
}

DenseTensor RandomTensor(const DDim& dims, uint64_t seed) {
  return DenseTensor::FromVector(RandomValues(dims.numel(), seed), dims);
}
DenseTensor Doubles(const std::vector<double>& v, const DDim& dims) {
  return DenseTensor::FromVector(v, dims);
}
DenseTensor Int64s(const std::vector<int64_t>& v, const DDim& dims) {
  return DenseTensor::FromVector(v, dims);
}

std::vector<double> ValuesOf(const DenseTensor& t) {
  DenseTensor d;
  phi::CastKernel(t, phi::DataType::FLOAT64, &d);
  return d.ToVector<double>();
}

DenseTensor Rows(const DenseTensor& t, int64_t r0, int64_t r1) {
  DenseTensor out;
  phi::Copy(t.Slice(r0, r1), phi::CPUPlace(), &out);
  return out;
}

DenseTensor Cols(const DenseTensor& t, int64_t c0, int64_t c1) {
  const int64_t rows = t.dims()[0], cols = t.dims()[1];
  std::vector<double> v;
  const double* p = t.data<double>();
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = c0; j < c1; ++j) v.push_back(p[i * cols + j]);
  }
  return Doubles(v, DDim({rows, c1 - c0}));
}

framework::OpDesc& AddOp(ProgramDesc* p, const std::string& type, VariableNameMap ins,
                         VariableNameMap outs, AttributeMap attrs) {
  framework::OpDesc& op = p->AppendOp(type);
  for (auto& kv : ins) op.SetInput(kv.first, kv.second);
  for (auto& kv : outs) op.SetOutput(kv.first, kv.second);
  for (auto& kv : attrs) op.SetAttr(kv.first, kv.second);
  return op;
}

void ExpectValues(const DenseTensor& got, const std::vector<double>& want, double tol,
                  const std::string& what) {
  std::vector<double> g = ValuesOf(got);
  ASSERT_EQ(g.size(), want.size()) << what << ": " << got.dims().to_str();
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double err = std::fabs(g[i] - want[i]) / std::max(1.0, std::fabs(want[i]));
    if (!(err <= worst)) worst = err, at = i;
  }
  EXPECT_LE(worst, tol) << what << ": element " << at << " is " << g[at] << ", expected "
                        << want[at];
}

void ExpectClose(const DenseTensor& got, const DenseTensor& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.dims(), want.dims()) << what;
  ExpectValues(got, ValuesOf(want), tol, what);
}

}  // namespace testing
}  // namespace paddle_like
