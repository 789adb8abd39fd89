// The host reduction kernels (cpu_reduce.h), which the compiler vectorizes: every length
// around the vector widths (the vector body and the scalar tail), each of the three aliasing
// cases the contract allows (c == a, c == b, c apart), against a scalar reference written
// here. Min and max also check the operand order that decides between +0 and -0.
#include "phi/core/distributed/cpu_reduce.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace phi {
namespace distributed {
namespace {

template <typename T>
T Reference(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::SUM: return static_cast<T>(a + b);
    case ReduceOp::PRODUCT: return static_cast<T>(a * b);
    case ReduceOp::MIN: return b < a ? b : a;
    case ReduceOp::MAX: return a < b ? b : a;
    default: break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case ReduceOp::BAND: return static_cast<T>(a & b);
      case ReduceOp::BOR: return static_cast<T>(a | b);
      case ReduceOp::BXOR: return static_cast<T>(a ^ b);
      default: break;
    }
  }
  ADD_FAILURE() << "no reference for op " << ReduceOpToString(op);
  return T{};
}

// Values with signs, zeros of both signs (floating point) and, for integers, wrap-around.
template <typename T>
std::vector<T> Values(size_t n, int seed) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) {
    const int k = static_cast<int>((i * 7 + static_cast<size_t>(seed) * 13) % 23) - 11;
    if constexpr (std::is_floating_point_v<T>) {
      // Every tenth element a zero, -0 in one input and +0 in the other, at the same index.
      v[i] = i % 10 == 0 ? static_cast<T>(seed % 2 ? -0.0 : 0.0) : static_cast<T>(k) / 4;
    } else {
      v[i] = static_cast<T>(k * 37);
    }
  }
  return v;
}

template <typename T>
bool SameBits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <typename T>
void CheckKernel(DataType dtype, ReduceOp op) {
  CpuReduceFn fn = GetCpuReduceFn(dtype, op);
  for (size_t n : {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000, 1027}) {
    const std::vector<T> a = Values<T>(n, 1), b = Values<T>(n, 2);
    std::vector<T> want(n);
    for (size_t i = 0; i < n; ++i) want[i] = Reference(op, a[i], b[i]);
    std::vector<T> apart(n), into_a = a, into_b = b;
    fn(apart.data(), a.data(), b.data(), n);
    fn(into_a.data(), into_a.data(), b.data(), n);
    fn(into_b.data(), a.data(), into_b.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(SameBits(apart[i], want[i]))
          << DataTypeToString(dtype) << " " << ReduceOpToString(op) << " n=" << n << " [" << i
          << "] c apart: " << +apart[i] << ", expected " << +want[i];
      ASSERT_TRUE(SameBits(into_a[i], want[i]))
          << DataTypeToString(dtype) << " " << ReduceOpToString(op) << " n=" << n << " [" << i
          << "] c == a: " << +into_a[i] << ", expected " << +want[i];
      ASSERT_TRUE(SameBits(into_b[i], want[i]))
          << DataTypeToString(dtype) << " " << ReduceOpToString(op) << " n=" << n << " [" << i
          << "] c == b: " << +into_b[i] << ", expected " << +want[i];
    }
  }
}

TEST(CpuReduce, EveryLengthAndAliasingCaseMatchesTheScalarReference) {
  for (ReduceOp op : {ReduceOp::SUM, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX}) {
    CheckKernel<float>(DataType::FLOAT32, op);
    CheckKernel<double>(DataType::FLOAT64, op);
    CheckKernel<int32_t>(DataType::INT32, op);
    CheckKernel<int64_t>(DataType::INT64, op);
    CheckKernel<int8_t>(DataType::INT8, op);
    CheckKernel<uint8_t>(DataType::UINT8, op);
  }
  for (ReduceOp op : {ReduceOp::BAND, ReduceOp::BOR, ReduceOp::BXOR}) {
    CheckKernel<int32_t>(DataType::INT32, op);
    CheckKernel<int64_t>(DataType::INT64, op);
    CheckKernel<uint8_t>(DataType::UINT8, op);
  }
}

// The gathered all-reduce (the small path on every transport): rank order, then AVG's divide.
TEST(CpuReduce, GatheredAllReduceReducesInRankOrderAndAverages) {
  const int n = 3;
  const int64_t count = 37;  // a vector body and a tail
  const size_t block = 64 * sizeof(float);
  std::vector<char> gathered(block * n);
  for (int r = 0; r < n; ++r) {
    auto* p = reinterpret_cast<float*>(gathered.data() + r * block);
    for (int64_t i = 0; i < count; ++i) p[i] = static_cast<float>((r + 1) * (i + 1)) / 8;
  }
  std::vector<float> sum(count), avg(count);
  CpuAllReduceGathered(DataType::FLOAT32, ReduceOp::SUM, gathered.data(), block, n, count,
                       sum.data());
  CpuAllReduceGathered(DataType::FLOAT32, ReduceOp::AVG, gathered.data(), block, n, count,
                       avg.data());
  for (int64_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) {
      want += reinterpret_cast<const float*>(gathered.data() + r * block)[i];
    }
    ASSERT_TRUE(SameBits(sum[i], want)) << "[" << i << "] " << sum[i] << " vs " << want;
    ASSERT_TRUE(SameBits(avg[i], want / n)) << "[" << i << "] " << avg[i] << " vs " << want / n;
  }
}

}  // namespace
}  // namespace distributed
}  // namespace phi
