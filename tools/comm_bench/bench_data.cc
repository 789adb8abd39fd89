#include "tools/comm_bench/bench_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

namespace paddle_like {
namespace bench {
namespace {

// Small integers: exact in every dtype (bfloat16 holds integers up to 256 exactly), and sums,
// products and extremes of them stay exact for the world sizes a benchmark runs.
inline int Value(bool reducing, ReduceOp op, int r, int64_t i) {
  if (!reducing) return static_cast<int>((r * 31 + i) % 101);
  switch (op) {
    case ReduceOp::PRODUCT: return ((r + i) % 5 == 0) ? 2 : 1;
    case ReduceOp::MIN:
    case ReduceOp::MAX: return static_cast<int>((r * 7 + i * 3) % 11);
    default: return static_cast<int>((r + i) % 4);  // SUM, AVG
  }
}

template <typename T>
inline T As(int v) {
  if constexpr (std::is_same_v<T, phi::dtype::float16> ||
                std::is_same_v<T, phi::dtype::bfloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
inline double ToDouble(T v) {
  if constexpr (std::is_same_v<T, phi::dtype::float16> ||
                std::is_same_v<T, phi::dtype::bfloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

// The reduction of rank values at index i, in T's own arithmetic (integers wrap like the
// engine's), then AVG's division the way a CPU engine divides.
template <typename T>
T Reduced(ReduceOp op, int world, int64_t i) {
  T acc = As<T>(Value(true, op, 0, i));
  for (int r = 1; r < world; ++r) {
    T v = As<T>(Value(true, op, r, i));
    switch (op) {
      case ReduceOp::PRODUCT: acc = static_cast<T>(acc * v); break;
      case ReduceOp::MIN: acc = v < acc ? v : acc; break;
      case ReduceOp::MAX: acc = acc < v ? v : acc; break;
      default: acc = static_cast<T>(acc + v); break;
    }
  }
  if (op == ReduceOp::AVG) {
    if constexpr (std::is_integral_v<T>) {
      acc = static_cast<T>(acc / static_cast<T>(world));
    } else if constexpr (std::is_same_v<T, phi::dtype::float16> ||
                         std::is_same_v<T, phi::dtype::bfloat16>) {
      acc = T(static_cast<float>(acc) / static_cast<float>(world));
    } else {
      acc = static_cast<T>(acc / static_cast<double>(world));
    }
  }
  return acc;
}

template <typename T>
double Tolerance() {
  if constexpr (std::is_integral_v<T>) return 0.0;
  if constexpr (std::is_same_v<T, phi::dtype::float16>) return 2e-3;
  if constexpr (std::is_same_v<T, phi::dtype::bfloat16>) return 1.6e-2;
  if constexpr (std::is_same_v<T, float>) return 1e-5;
  return 1e-12;
}

template <typename T>
int64_t CountWrongTyped(const T* got, int64_t n, const CheckSpec& s) {
  const double tol = Tolerance<T>();
  const int64_t c = std::max<int64_t>(s.block, 1);
  int64_t wrong = 0;
  for (int64_t j = 0; j < n; ++j) {
    T exp;
    switch (s.layout) {
      case Layout::kReduceSame: exp = Reduced<T>(s.redop, s.world, j); break;
      case Layout::kReduceBlock: exp = Reduced<T>(s.redop, s.world, s.rank * c + j); break;
      case Layout::kConcat: exp = As<T>(Value(false, s.redop, static_cast<int>(j / c), j % c)); break;
      case Layout::kFromRoot: exp = As<T>(Value(false, s.redop, s.root, j)); break;
      case Layout::kFromRootBlock: exp = As<T>(Value(false, s.redop, s.root, s.rank * c + j)); break;
      case Layout::kTranspose:
        exp = As<T>(Value(false, s.redop, static_cast<int>(j / c), s.rank * c + j % c));
        break;
      case Layout::kFromPrev:
      default:
        exp = As<T>(Value(false, s.redop, (s.rank - 1 + s.world) % s.world, j));
        break;
    }
    double e = ToDouble(exp), g = ToDouble(got[j]);
    if (tol == 0.0 ? g != e : !(std::fabs(g - e) <= tol * std::max(1.0, std::fabs(e)))) ++wrong;
  }
  return wrong;
}

}  // namespace

void FillInput(DenseTensor* t, DataType dtype, bool reducing, ReduceOp redop, int rank,
               int64_t first) {
  const int64_t n = t->numel();
  DenseTensor host(phi::CPUPlace(), dtype, phi::DDim({n}));
  phi::VisitDataType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, phi::dtype::complex64> ||
                  std::is_same_v<T, phi::dtype::complex128>) {
      PADDLE_THROW(phi::errors::Unimplemented("comm_bench does not benchmark %s",
                                              phi::DataTypeToString(dtype)));
    } else {
      T* p = static_cast<T*>(host.data());
      for (int64_t j = 0; j < n; ++j) p[j] = As<T>(Value(reducing, redop, rank, first + j));
    }
  });
  if (t->place().is_cpu()) {
    if (n > 0) std::memcpy(t->data(), host.data(), host.nbytes());
  } else {
    phi::Copy(host, t->place(), t);
  }
}

int64_t CountWrong(const DenseTensor& out, const CheckSpec& spec) {
  DenseTensor host;
  const DenseTensor* h = &out;
  if (!out.place().is_cpu()) {
    phi::Copy(out, phi::CPUPlace(), &host);
    h = &host;
  }
  int64_t wrong = 0;
  phi::VisitDataType(spec.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, phi::dtype::complex64> ||
                  std::is_same_v<T, phi::dtype::complex128>) {
      wrong = h->numel();
    } else {
      wrong = CountWrongTyped<T>(static_cast<const T*>(h->data()), h->numel(), spec);
    }
  });
  return wrong;
}

}  // namespace bench
}  // namespace paddle_like
