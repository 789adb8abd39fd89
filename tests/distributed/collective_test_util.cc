#include "tests/distributed/collective_test_util.h"

#include <type_traits>

namespace paddle_like {
namespace testing {

namespace {
template <typename T>
constexpr bool kIsComplex = std::is_same_v<T, phi::dtype::complex64> ||
                            std::is_same_v<T, phi::dtype::complex128>;
}

void SetElem(DenseTensor* t, int64_t i, Val v) {
  phi::VisitDataType(t->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(t->data());
    if constexpr (kIsComplex<T>) {
      p[i] = T(static_cast<typename T::value_type>(v.re), static_cast<typename T::value_type>(v.im));
    } else if constexpr (std::is_same_v<T, bool>) {
      p[i] = v.re != 0;
    } else {
      p[i] = static_cast<T>(v.re);
    }
  });
}

Val GetElem(const DenseTensor& t, int64_t i) {
  Val v;
  phi::VisitDataType(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = static_cast<const T*>(t.data());
    if constexpr (kIsComplex<T>) {
      v.re = p[i].real();
      v.im = p[i].imag();
    } else if constexpr (std::is_same_v<T, bool>) {
      v.re = p[i] ? 1 : 0;
    } else {
      v.re = static_cast<double>(p[i]);
    }
  });
  return v;
}

Val InputVal(DataType dtype, int rank, int64_t i, ReduceOp op, int salt) {
  if (dtype == DataType::BOOL) return Val{GenBool(rank, i, salt) ? 1.0 : 0.0, 0};
  double re = Gen(rank, i, op, salt);
  return Val{re, phi::IsComplex(dtype) ? re + 1 : 0};
}

DenseTensor MakeInput(DataType dtype, int64_t n, int rank, ReduceOp op, int salt) {
  DenseTensor t(phi::CPUPlace(), dtype, phi::DDim({n}));
  for (int64_t i = 0; i < n; ++i) SetElem(&t, i, InputVal(dtype, rank, i, op, salt));
  return t;
}

bool OpSupported(ReduceOp op, DataType dtype) {
  try {
    phi::distributed::CheckReduceSupported(op, dtype);
    return true;
  } catch (const phi::InvalidArgumentError&) {
    return false;
  }
}

Val ReduceRef(DataType dtype, ReduceOp op, int world, int64_t i, double premul, int salt) {
  if (dtype == DataType::BOOL) {
    bool acc = GenBool(0, i, salt);
    for (int r = 1; r < world; ++r) {
      bool x = GenBool(r, i, salt);
      switch (op) {
        case ReduceOp::SUM: case ReduceOp::MAX: case ReduceOp::BOR: acc = acc || x; break;
        case ReduceOp::PRODUCT: case ReduceOp::MIN: case ReduceOp::BAND: acc = acc && x; break;
        case ReduceOp::BXOR: acc = acc != x; break;
        default: ADD_FAILURE() << "no bool reference for op";
      }
    }
    return Val{acc ? 1.0 : 0.0, 0};
  }
  auto in = [&](int r) { return InputVal(dtype, r, i, op, salt); };
  Val acc = in(0);
  if (op == ReduceOp::PREMUL_SUM) {
    acc.re *= premul;
    acc.im *= premul;
    if (phi::IsIntegral(dtype)) acc.re = std::trunc(acc.re);
  }
  for (int r = 1; r < world; ++r) {
    Val x = in(r);
    int64_t a = static_cast<int64_t>(acc.re), b = static_cast<int64_t>(x.re);
    switch (op) {
      case ReduceOp::SUM: case ReduceOp::AVG: acc.re += x.re; acc.im += x.im; break;
      case ReduceOp::PREMUL_SUM: {
        double xr = x.re * premul, xi = x.im * premul;
        if (phi::IsIntegral(dtype)) xr = std::trunc(xr);
        acc.re += xr;
        acc.im += xi;
        break;
      }
      case ReduceOp::PRODUCT: acc.re *= x.re; break;
      case ReduceOp::MIN: acc.re = std::min(acc.re, x.re); break;
      case ReduceOp::MAX: acc.re = std::max(acc.re, x.re); break;
      case ReduceOp::BAND: acc.re = static_cast<double>(a & b); break;
      case ReduceOp::BOR: acc.re = static_cast<double>(a | b); break;
      case ReduceOp::BXOR: acc.re = static_cast<double>(a ^ b); break;
    }
  }
  if (op == ReduceOp::AVG) {
    if (phi::IsIntegral(dtype)) {
      acc.re = std::trunc(acc.re / world);
    } else {
      acc.re /= world;
      acc.im /= world;
    }
  }
  return acc;
}

int ExpectClose(const DenseTensor& t, const std::vector<Val>& expected, const std::string& what) {
  EXPECT_EQ(t.numel(), static_cast<int64_t>(expected.size())) << what;
  double tol = 1e-6;
  if (t.dtype() == DataType::FLOAT16 || t.dtype() == DataType::BFLOAT16) tol = 1e-2;
  if (t.dtype() == DataType::FLOAT32 || t.dtype() == DataType::COMPLEX64) tol = 1e-5;
  int wrong = 0;
  for (int64_t i = 0; i < t.numel() && i < static_cast<int64_t>(expected.size()); ++i) {
    Val got = GetElem(t, i);
    const Val& e = expected[i];
    double scale = std::max(1.0, std::abs(e.re) + std::abs(e.im));
    if (std::abs(got.re - e.re) > tol * scale || std::abs(got.im - e.im) > tol * scale) {
      if (++wrong <= 3) {
        ADD_FAILURE() << what << " [" << phi::DataTypeToString(t.dtype()) << "] element " << i
                      << ": expected (" << e.re << ", " << e.im << ") got (" << got.re << ", "
                      << got.im << ")";
      }
    }
  }
  return wrong;
}

}  // namespace testing
}  // namespace paddle_like
