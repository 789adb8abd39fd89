// Helpers of the paddle_like::dist tests: small int64 tensors and a Gloo world.
#pragma once

#include <chrono>
#include <vector>

#include "paddle_like/dist/distributed.h"

namespace paddle_like {
namespace testing {

using phi::DenseTensor;

inline DenseTensor Ints(std::vector<int64_t> v) { return DenseTensor::FromVector(v); }
inline int64_t At(const DenseTensor& t, int64_t i) { return t.data<int64_t>()[i]; }
inline std::vector<int64_t> Values(const DenseTensor& t) {
  const int64_t* p = t.data<int64_t>();
  return std::vector<int64_t>(p, p + t.numel());
}

// init_process_group over env:// (set by the test harness) with Gloo.
inline void InitGloo(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  dist::InitOptions o;
  o.backend = "gloo";
  o.timeout = timeout;
  dist::init_process_group(o);
}

}  // namespace testing
}  // namespace paddle_like
