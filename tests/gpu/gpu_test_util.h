// Helpers of the GPU tests. Every test that needs a device starts with
// PADDLE_LIKE_REQUIRE_GPU(): it skips, printing why, when no CUDA device is visible, and
// fails instead when PADDLE_LIKE_REQUIRE_GPU=1 is set (tools/gpu_check.sh sets it on a
// machine whose nvidia-smi shows a GPU, so "all skipped" can never pass as green there).
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "phi/core/cuda_stream.h"
#include "phi/core/dense_tensor.h"
#include "phi/core/device_info.h"

namespace paddle_like {
namespace testing {

inline bool GpuRequired() {
  const char* v = std::getenv("PADDLE_LIKE_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

#define PADDLE_LIKE_REQUIRE_GPU()                                                          \
  do {                                                                                     \
    if (::phi::GetGPUDeviceCount() == 0) {                                                 \
      const std::string why_ = "no CUDA device visible: " + ::phi::GPUUnavailableReason(); \
      if (::paddle_like::testing::GpuRequired()) {                                         \
        FAIL() << why_ << " (PADDLE_LIKE_REQUIRE_GPU=1)";                                  \
      }                                                                                    \
      std::cout << "[ SKIP     ] " << why_ << std::endl;                                   \
      GTEST_SKIP() << why_;                                                                \
    }                                                                                      \
  } while (0)

// Holds a CUDA stream busy until Open(): a host function enqueued on it spins on a flag
// (it calls no CUDA API, which host functions must not). Capped at 60 s so that a failing
// test never hangs the suite. Destruction opens the gate and drains the stream.
class StreamGate {
 public:
  explicit StreamGate(cudaStream_t stream) : stream_(stream), state_(new State) {
    PHI_CUDA_CHECK(cudaLaunchHostFunc(stream_, &StreamGate::Spin, state_));
  }
  ~StreamGate() {
    Open();
    cudaStreamSynchronize(stream_);
    delete state_;  // the host function has returned: the stream passed it
  }
  void Open() { state_->open.store(true); }

 private:
  struct State {
    std::atomic<bool> open{false};
  };
  static void CUDART_CB Spin(void* p) {
    auto* s = static_cast<State*>(p);
    const auto cap = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!s->open.load() && std::chrono::steady_clock::now() < cap) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  cudaStream_t stream_;
  State* state_;
};

inline cudaStream_t RawStream(phi::Stream* s) { return static_cast<cudaStream_t>(s->native_handle()); }

// A host tensor of n elements: 1 + (3i + salt) % 5 (imag = real + 1; bool: (i+salt)%3 != 0).
inline phi::DenseTensor MakeHost(phi::DataType dtype, int64_t n, int salt = 0) {
  phi::DenseTensor t(phi::CPUPlace(), dtype, phi::DDim({n}));
  phi::VisitDataType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(t.data());
    for (int64_t i = 0; i < n; ++i) {
      double v = 1 + (3 * i + salt) % 5;
      if constexpr (std::is_same_v<T, bool>) {
        p[i] = (i + salt) % 3 != 0;
      } else if constexpr (std::is_same_v<T, phi::dtype::complex64>) {
        p[i] = T(static_cast<float>(v), static_cast<float>(v + 1));
      } else if constexpr (std::is_same_v<T, phi::dtype::complex128>) {
        p[i] = T(v, v + 1);
      } else if constexpr (std::is_same_v<T, phi::dtype::float16> ||
                           std::is_same_v<T, phi::dtype::bfloat16>) {
        p[i] = T(static_cast<float>(v));
      } else {
        p[i] = static_cast<T>(v);
      }
    }
  });
  return t;
}

// The elements as complex doubles, read through a (blocking) copy to the host.
inline std::vector<std::complex<double>> Values(const phi::DenseTensor& t) {
  phi::DenseTensor host;
  phi::Copy(t, phi::CPUPlace(), &host);
  std::vector<std::complex<double>> out(static_cast<size_t>(host.numel()));
  phi::VisitDataType(host.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = static_cast<const T*>(host.data());
    for (size_t i = 0; i < out.size(); ++i) {
      if constexpr (std::is_same_v<T, phi::dtype::complex64> ||
                    std::is_same_v<T, phi::dtype::complex128>) {
        out[i] = {static_cast<double>(p[i].real()), static_cast<double>(p[i].imag())};
      } else if constexpr (std::is_same_v<T, phi::dtype::float16> ||
                           std::is_same_v<T, phi::dtype::bfloat16>) {
        out[i] = static_cast<double>(static_cast<float>(p[i]));
      } else {
        out[i] = static_cast<double>(p[i]);
      }
    }
  });
  return out;
}

inline phi::DenseTensor ToDevice(const phi::DenseTensor& host, int device = 0) {
  phi::DenseTensor dev;
  phi::Copy(host, phi::GPUPlace(device), &dev);
  return dev;
}

// Counts mismatches (exact comparison: the tests use values every dtype holds exactly).
inline int CountWrong(const std::vector<std::complex<double>>& got,
                      const std::vector<std::complex<double>>& want, const std::string& what) {
  int wrong = got.size() == want.size() ? 0 : 1;
  EXPECT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (got[i] != want[i]) {
      if (++wrong <= 3) ADD_FAILURE() << what << ": element " << i << " is " << got[i]
                                      << ", expected " << want[i];
    }
  }
  return wrong;
}

}  // namespace testing
}  // namespace paddle_like
