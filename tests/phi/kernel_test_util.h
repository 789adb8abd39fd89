// Helpers for the math kernel tests: tensors of any dtype made from and read back as doubles,
// tolerance checks, and typed-error expectations that look into the message.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "phi/core/data_type.h"
#include "phi/core/dense_tensor.h"
#include "phi/core/errors.h"

namespace kernel_test {

using phi::DataType;
using phi::DDim;
using phi::DenseTensor;

constexpr DataType kF16 = DataType::FLOAT16;
constexpr DataType kBF16 = DataType::BFLOAT16;
constexpr DataType kF32 = DataType::FLOAT32;
constexpr DataType kF64 = DataType::FLOAT64;
constexpr DataType kAllFloat[] = {kF32, kF64, kF16, kBF16};
constexpr DataType kFullFloat[] = {kF32, kF64};

template <typename T>
constexpr bool kIsComplex =
    std::is_same_v<T, phi::dtype::complex64> || std::is_same_v<T, phi::dtype::complex128>;

// A CPU tensor of `dims` x `dtype` holding `values` converted to that dtype.
inline DenseTensor Make(const std::vector<double>& values, const DDim& dims, DataType dtype) {
  EXPECT_EQ(static_cast<int64_t>(values.size()), dims.numel()) << dims;
  DenseTensor t(phi::CPUPlace(), dtype, dims);
  phi::VisitDataType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
  });
  return t;
}

inline DenseTensor MakeIds(const std::vector<int64_t>& ids, DDim dims = DDim()) {
  return DenseTensor::FromVector(ids, std::move(dims));
}

// The elements (gathered if strided) as doubles.
inline std::vector<double> Values(const DenseTensor& t) {
  DenseTensor host;
  phi::Copy(t, phi::CPUPlace(), &host);
  std::vector<double> out(static_cast<size_t>(t.numel()));
  phi::VisitDataType(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = host.data<T>();
    for (size_t i = 0; i < out.size(); ++i) {
      if constexpr (kIsComplex<T>) out[i] = static_cast<double>(p[i].real());
      else out[i] = static_cast<double>(p[i]);
    }
  });
  return out;
}

// `v` rounded to what `dtype` holds.
inline double RoundTo(double v, DataType dtype) {
  return Values(Make({v}, DDim({1}), dtype))[0];
}

// Deterministic uniform values in [lo, hi).
inline std::vector<double> Random(int64_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 gen(seed);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) {
    x = lo + (hi - lo) * static_cast<double>(gen() >> 11) * (1.0 / 9007199254740992.0);
  }
  return v;
}

struct Tol {
  double atol;
  double rtol;
};

// Tolerance of a result computed in `dtype` from O(1) inputs through a few operations.
inline Tol TolFor(DataType dtype) {
  switch (dtype) {
    case DataType::FLOAT64: return {1e-12, 1e-12};
    case DataType::FLOAT32: return {1e-5, 1e-5};
    case DataType::FLOAT16: return {1e-2, 1e-2};
    default: return {5e-2, 2e-2};  // bfloat16: 8 significant bits
  }
}

// Every |got - want| <= atol + rtol * |want| (NaN never passes; equal infinities do).
inline void ExpectClose(const std::vector<double>& got, const std::vector<double>& want,
                        Tol tol, const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    bool ok = got[i] == want[i] ||
              std::fabs(got[i] - want[i]) <= tol.atol + tol.rtol * std::fabs(want[i]);
    if (!ok && reported++ < 5) {
      ADD_FAILURE() << what << " element " << i << ": got " << got[i] << ", want " << want[i]
                    << " (atol " << tol.atol << ", rtol " << tol.rtol << ")";
    }
  }
}

// Element (i, j) of op(m) (m itself, or its transpose) for a row-major m of `cols` columns.
inline double OpAt(const std::vector<double>& m, int64_t cols, bool trans, int64_t i,
                   int64_t j) {
  return trans ? m[j * cols + i] : m[i * cols + j];
}

inline bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Runs `fn`, which must raise exactly E with every string of `parts` in its message.
template <typename E>
void ExpectRaises(const std::function<void()>& fn, std::initializer_list<std::string> parts,
                  const char* file, int line) {
  try {
    fn();
  } catch (const E& e) {
    for (const auto& part : parts) {
      if (!Contains(e.what(), part)) {
        ADD_FAILURE_AT(file, line) << "message lacks \"" << part << "\": " << e.what();
      }
    }
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE_AT(file, line) << "raised the wrong type: " << e.what();
    return;
  }
  ADD_FAILURE_AT(file, line) << "nothing was raised";
}

}  // namespace kernel_test

// EXPECT_INVALID(statement, "part", ...): the statement raises phi::InvalidArgumentError whose
// message contains every part.
#define EXPECT_INVALID(stmt, ...)                                                    \
  ::kernel_test::ExpectRaises<::phi::InvalidArgumentError>([&] { stmt; }, {__VA_ARGS__}, \
                                                           __FILE__, __LINE__)
