#include "phi/core/distributed/cpu_reduce.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "phi/core/errors.h"

namespace phi {
namespace distributed {
namespace {

// c = a (op) b, element by element; c is a, b, or apart from both (CpuReduceFn's contract).
// The compiler vectorizes this loop because the file is built with -O3 (CMakeLists.txt; at
// -O2 GCC vectorizes only trip counts known to divide by the vector width, and this loop
// ran one element at a time). Its overlap test lets c == a and c == b through to the vector
// loop. Each output element is the same single IEEE operation on its two inputs whatever the
// vector width, so every rank, and every build, gets the same bits.
template <typename T, typename Op>
void Apply(void* c, const void* a, const void* b, size_t n) {
  T* out = static_cast<T*>(c);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  Op op;
  for (size_t i = 0; i < n; ++i) out[i] = op(x[i], y[i]);
}

struct Sum { template <typename T> T operator()(T a, T b) const { return static_cast<T>(a + b); } };
struct Prod { template <typename T> T operator()(T a, T b) const { return static_cast<T>(a * b); } };
struct Min { template <typename T> T operator()(T a, T b) const { return b < a ? b : a; } };
struct Max { template <typename T> T operator()(T a, T b) const { return a < b ? b : a; } };
struct And { template <typename T> T operator()(T a, T b) const { return static_cast<T>(a & b); } };
struct Or { template <typename T> T operator()(T a, T b) const { return static_cast<T>(a | b); } };
struct Xor { template <typename T> T operator()(T a, T b) const { return static_cast<T>(a ^ b); } };
struct LogicalAnd { bool operator()(bool a, bool b) const { return a && b; } };
struct LogicalOr { bool operator()(bool a, bool b) const { return a || b; } };
struct LogicalXor { bool operator()(bool a, bool b) const { return a != b; } };

template <typename T>
CpuReduceFn Pick(ReduceOp op) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {
      case ReduceOp::SUM: case ReduceOp::MAX: case ReduceOp::BOR: return &Apply<bool, LogicalOr>;
      case ReduceOp::PRODUCT: case ReduceOp::MIN: case ReduceOp::BAND: return &Apply<bool, LogicalAnd>;
      case ReduceOp::BXOR: return &Apply<bool, LogicalXor>;
      default: return nullptr;
    }
  } else if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case ReduceOp::SUM: case ReduceOp::AVG: case ReduceOp::PREMUL_SUM: return &Apply<T, Sum>;
      case ReduceOp::PRODUCT: return &Apply<T, Prod>;
      case ReduceOp::MIN: return &Apply<T, Min>;
      case ReduceOp::MAX: return &Apply<T, Max>;
      case ReduceOp::BAND: return &Apply<T, And>;
      case ReduceOp::BOR: return &Apply<T, Or>;
      case ReduceOp::BXOR: return &Apply<T, Xor>;
    }
    return nullptr;
  } else if constexpr (std::is_same_v<T, dtype::complex64> ||
                       std::is_same_v<T, dtype::complex128>) {
    switch (op) {
      case ReduceOp::SUM: case ReduceOp::AVG: case ReduceOp::PREMUL_SUM: return &Apply<T, Sum>;
      default: return nullptr;
    }
  } else {  // floating point, including float16 and bfloat16 (Eigen computes in float)
    switch (op) {
      case ReduceOp::SUM: case ReduceOp::AVG: case ReduceOp::PREMUL_SUM: return &Apply<T, Sum>;
      case ReduceOp::PRODUCT: return &Apply<T, Prod>;
      case ReduceOp::MIN: return &Apply<T, Min>;
      case ReduceOp::MAX: return &Apply<T, Max>;
      default: return nullptr;
    }
  }
}

}  // namespace

CpuReduceFn GetCpuReduceFn(DataType dtype, ReduceOp op) {
  CheckReduceSupported(op, dtype);
  CpuReduceFn fn = VisitDataType(dtype, [&](auto tag) {
    return Pick<typename decltype(tag)::type>(op);
  });
  PADDLE_ENFORCE_NOT_NULL(fn, errors::InvalidArgument("Reduce op %s is not defined on %s.",
                                                      ReduceOpToString(op),
                                                      DataTypeToString(dtype)));
  return fn;
}

void CpuScale(DataType dtype, void* dst, const void* src, int64_t n, double factor) {
  VisitDataType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = static_cast<T*>(dst);
    const T* in = static_cast<const T*>(src);
    if constexpr (std::is_same_v<T, bool>) {
      for (int64_t i = 0; i < n; ++i) out[i] = in[i] && factor != 0.0;
    } else if constexpr (std::is_integral_v<T>) {
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(static_cast<double>(in[i]) * factor);
    } else if constexpr (std::is_same_v<T, dtype::float16> || std::is_same_v<T, dtype::bfloat16>) {
      const float f = static_cast<float>(factor);
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(static_cast<float>(in[i]) * f);
    } else if constexpr (std::is_same_v<T, dtype::complex64>) {
      for (int64_t i = 0; i < n; ++i) out[i] = in[i] * static_cast<float>(factor);
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(in[i] * factor);
    }
  });
}

void CpuDivide(DataType dtype, void* dst, int64_t n, int64_t divisor) {
  VisitDataType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = static_cast<T*>(dst);
    if constexpr (std::is_same_v<T, bool>) {
      ThrowUndefinedDataType(DataType::UNDEFINED);  // AVG on bool is rejected earlier
    } else if constexpr (std::is_integral_v<T>) {
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(out[i] / static_cast<T>(divisor));
    } else if constexpr (std::is_same_v<T, dtype::float16> || std::is_same_v<T, dtype::bfloat16>) {
      const float d = static_cast<float>(divisor);
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(static_cast<float>(out[i]) / d);
    } else if constexpr (std::is_same_v<T, dtype::complex64>) {
      for (int64_t i = 0; i < n; ++i) out[i] /= static_cast<float>(divisor);
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(out[i] / static_cast<double>(divisor));
    }
  });
}

CpuReduceInput PrepareCpuReduce(const void* send, int64_t count, DataType dtype,
                                const Reduction& red) {
  CpuReduceInput p{send, count, dtype, {}};
  if (IsComplex(dtype)) {
    p.dtype = ToRealType(dtype);
    p.count = count * 2;
  }
  if (red.op == ReduceOp::PREMUL_SUM) {
    p.scaled.resize(static_cast<size_t>(p.count) * SizeOf(p.dtype));
    CpuScale(p.dtype, p.scaled.data(), send, p.count, red.premul_factor);
    p.data = p.scaled.data();
  }
  return p;
}

void CpuAllReduceGathered(DataType dtype, ReduceOp op, const char* gathered, size_t block_bytes,
                          int n, int64_t count, void* out) {
  if (n <= 0 || count <= 0) return;
  if (n == 1) {
    std::memcpy(out, gathered, static_cast<size_t>(count) * SizeOf(dtype));
  } else {
    CpuReduceFn fn = GetCpuReduceFn(dtype, op);
    fn(out, gathered, gathered + block_bytes, static_cast<size_t>(count));
    for (int r = 2; r < n; ++r) {
      fn(out, out, gathered + static_cast<size_t>(r) * block_bytes, static_cast<size_t>(count));
    }
  }
  if (op == ReduceOp::AVG) CpuDivide(dtype, out, count, n);
}

}  // namespace distributed
}  // namespace phi
