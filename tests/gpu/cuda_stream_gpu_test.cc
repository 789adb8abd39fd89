// CUDA streams and events, the cudaMalloc allocator and CUDA copies (needs a device).
#include <gtest/gtest.h>

#include <chrono>

#include "gpu_test_util.h"
#include "phi/core/cpu_stream.h"
#include "phi/core/device_context.h"
#include "phi/core/memcpy.h"
#include "phi/core/stream_safe_allocator.h"

namespace paddle_like {
namespace testing {
namespace {

using namespace std::chrono_literals;
using phi::CudaEvent;
using phi::CudaStream;

TEST(CudaStream, EventOrdersOneStreamAfterAnother) {
  PADDLE_LIKE_REQUIRE_GPU();
  const size_t n = 1 << 20;
  auto src = phi::memory::Alloc(phi::GPUPlace(0), n);
  auto mid = phi::memory::Alloc(phi::GPUPlace(0), n);
  auto dst = phi::memory::Alloc(phi::GPUPlace(0), n);
  PHI_CUDA_CHECK(cudaMemset(src->ptr(), 0x5a, n));
  PHI_CUDA_CHECK(cudaMemset(mid->ptr(), 0, n));
  PHI_CUDA_CHECK(cudaMemset(dst->ptr(), 0, n));
  PHI_CUDA_CHECK(cudaDeviceSynchronize());

  CudaStream a(0, "a"), b(0, "b");
  {
    StreamGate gate(a.raw());
    PHI_CUDA_CHECK(cudaMemcpyAsync(mid->ptr(), src->ptr(), n, cudaMemcpyDeviceToDevice, a.raw()));
    CudaEvent on_a(0);
    on_a.Record(&a);
    b.WaitEvent(on_a);  // the host does not wait here
    PHI_CUDA_CHECK(cudaMemcpyAsync(dst->ptr(), mid->ptr(), n, cudaMemcpyDeviceToDevice, b.raw()));
    CudaEvent on_b(0);
    on_b.Record(&b);

    std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(on_a.Query());
    EXPECT_FALSE(on_b.Query());
    EXPECT_FALSE(a.Query());
    EXPECT_FALSE(b.Query());  // b is held by a's gate through the event
    gate.Open();
    on_b.Synchronize(10s);
    EXPECT_TRUE(on_a.Query());
    EXPECT_TRUE(b.Query());
  }
  std::vector<uint8_t> host(n);
  PHI_CUDA_CHECK(cudaMemcpy(host.data(), dst->ptr(), n, cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (uint8_t v : host) wrong += v != 0x5a;
  EXPECT_EQ(wrong, 0);
}

TEST(CudaStream, HostWaitsHaveDeadlines) {
  PADDLE_LIKE_REQUIRE_GPU();
  CudaStream s(0);
  StreamGate gate(s.raw());
  CudaEvent e(0);
  e.Record(&s);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(e.Synchronize(100ms), phi::TimeoutError);
  EXPECT_THROW(s.Synchronize(100ms), phi::TimeoutError);
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, 200ms);
  EXPECT_LT(waited, 5s);
  gate.Open();
  EXPECT_NO_THROW(e.Synchronize(10s));
  EXPECT_NO_THROW(s.Synchronize(10s));
}

TEST(CudaStream, EventBasicsAndMisuse) {
  PADDLE_LIKE_REQUIRE_GPU();
  CudaStream s(0);
  EXPECT_NE(s.native_handle(), nullptr);
  EXPECT_EQ(s.place(), phi::GPUPlace(0));
  CudaEvent never(0);
  EXPECT_TRUE(never.Query());  // never recorded: complete
  EXPECT_NO_THROW(never.Synchronize(1ms));
  phi::CpuWorkerStream cpu("cpu");
  EXPECT_THROW(never.Record(&cpu), phi::InvalidArgumentError);
  auto e = s.CreateEvent();
  e->Record(&s);
  e->Synchronize(10s);
  EXPECT_TRUE(e->Query());
  // A CUDA stream can be ordered after a CPU worker's event (the host waits for it).
  auto ce = cpu.CreateEvent();
  std::atomic<bool> ran{false};
  cpu.Launch([&] {
    std::this_thread::sleep_for(30ms);
    ran = true;
  });
  ce->Record(&cpu);
  s.WaitEvent(*ce);
  EXPECT_TRUE(ran.load());
  int launched = 0;
  s.Launch([&] { ++launched; });  // runs on the caller
  EXPECT_EQ(launched, 1);
}

TEST(CudaContext, PoolAndCommContextsAreCudaStreams) {
  PADDLE_LIKE_REQUIRE_GPU();
  auto* calc = phi::DeviceContextPool::Instance().Get(phi::GPUPlace(0));
  ASSERT_NE(calc->stream()->native_handle(), nullptr);
  EXPECT_EQ(calc->GetPlace(), phi::GPUPlace(0));
  auto comm = phi::CreateCommStreamContext(phi::GPUPlace(0), "comm");
  EXPECT_NE(comm->stream()->native_handle(), calc->stream()->native_handle());
  EXPECT_THROW(phi::CreateGPUContext(phi::GetGPUDeviceCount()), phi::UnavailableError);
}

TEST(CudaAllocator, RawAllocateFreeAndOutOfMemory) {
  PADDLE_LIKE_REQUIRE_GPU();
  auto raw = phi::memory::CreateCudaRawAllocator(0);
  EXPECT_EQ(raw->place(), phi::GPUPlace(0));
  void* p = raw->AllocateRaw(1 << 20);
  ASSERT_NE(p, nullptr);
  cudaPointerAttributes attr;
  PHI_CUDA_CHECK(cudaPointerGetAttributes(&attr, p));
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  EXPECT_EQ(attr.device, 0);
  raw->FreeRaw(p, 1 << 20);
  EXPECT_EQ(raw->AllocateRaw(0), nullptr);
  EXPECT_THROW(raw->AllocateRaw(size_t(1) << 52), phi::UnavailableError);  // 4 PiB
  // The failure is not sticky: the device still works.
  void* q = raw->AllocateRaw(256);
  EXPECT_NE(q, nullptr);
  raw->FreeRaw(q, 256);
}

TEST(CudaAllocator, StatsAndDeferredFreeOnABusyStream) {
  PADDLE_LIKE_REQUIRE_GPU();
  auto alloc = phi::memory::GetAllocator(phi::GPUPlace(0));
  auto before = alloc->stats();
  CudaStream s(0);
  {
    StreamGate gate(s.raw());
    auto block = alloc->Allocate(4096);
    EXPECT_EQ(alloc->stats().bytes_live, before.bytes_live + 4096);
    phi::memory::RecordStream(block, &s);
    block.reset();  // the stream still "uses" it: the free waits
    auto mid = alloc->stats();
    EXPECT_EQ(mid.frees_deferred, before.frees_deferred + 1);
    EXPECT_EQ(mid.pending_frees, before.pending_frees + 1);
    EXPECT_EQ(mid.bytes_live, before.bytes_live + 4096);
    gate.Open();
    s.Synchronize(10s);
  }
  auto after = alloc->stats();
  EXPECT_EQ(after.pending_frees, before.pending_frees);
  EXPECT_EQ(after.deferred_frees_completed, before.deferred_frees_completed + 1);
  EXPECT_EQ(after.bytes_live, before.bytes_live);
}

TEST(CudaCopy, RoundTripsWithAndWithoutStream) {
  PADDLE_LIKE_REQUIRE_GPU();
  for (phi::DataType dt : phi::kAllDataTypes) {
    auto host = MakeHost(dt, 1000, 1);
    auto want = Values(host);
    auto dev = ToDevice(host);  // H2D, blocking
    EXPECT_TRUE(dev.place().is_gpu());
    CountWrong(Values(dev), want, std::string("blocking ") + phi::DataTypeToString(dt));

    CudaStream s(0);
    phi::DenseTensor dev2, back;
    phi::Copy(dev, phi::GPUPlace(0), &dev2, &s);  // D2D on s
    phi::Copy(dev2, phi::CPUPlace(), &back, &s);  // D2H on s (pageable: done on return)
    s.Synchronize(10s);
    CountWrong(Values(back), want, std::string("on stream ") + phi::DataTypeToString(dt));
  }
  EXPECT_NO_THROW(phi::memory::CudaCopy(phi::GPUPlace(0), nullptr, phi::CPUPlace(), nullptr, 0,
                                        nullptr));
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
