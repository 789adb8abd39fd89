// ProcessGroupNCCL on one device (world size 1): every op and dtype against a host
// reference, stream ordering, holder tracking, blocking-wait timeouts, and a small timing
// loop (PADDLE_LIKE_GPU_BENCH=1). Needs a device; skips without one.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "distributed/process_group_nccl.h"
#include "gpu_test_util.h"
#include "phi/core/distributed/comm_context_manager.h"
#include "phi/core/distributed/nccl_tools_internal.h"
#include "phi/core/distributed/store/hash_store.h"
#include "phi/core/flags.h"
#include "phi/core/stream_safe_allocator.h"

namespace paddle_like {
namespace testing {
namespace {

using namespace std::chrono_literals;
using distributed::ProcessGroupNCCL;
using distributed::ReduceOp;
using phi::DataType;
using phi::DenseTensor;
using Values_t = std::vector<std::complex<double>>;

std::shared_ptr<ProcessGroupNCCL> MakeGroup(int gid) {
  auto store = std::make_shared<phi::distributed::HashStore>(30s);
  return std::make_shared<ProcessGroupNCCL>(store, 0, 1, gid, 60s, 0);
}

// What a one-rank reduction gives: the input (scaled, for PREMUL_SUM).
Values_t Scaled(const Values_t& v, ReduceOp op, double factor) {
  if (op != ReduceOp::PREMUL_SUM) return v;
  Values_t out(v);
  for (auto& x : out) x *= factor;
  return out;
}

const char* Name(DataType dt) { return phi::DataTypeToString(dt); }

TEST(ProcessGroupNCCL, BasicsAndPlaces) {
  PADDLE_LIKE_REQUIRE_GPU();
  auto pg = MakeGroup(100);
  EXPECT_EQ(pg->GetBackendName(), "NCCL");
  EXPECT_EQ(pg->place(), phi::GPUPlace(0));
  EXPECT_NE(pg->GetCommContext(), nullptr);
  EXPECT_EQ(pg->GetCommContext()->BackendName(), "NCCL");
  EXPECT_TRUE(phi::distributed::CommContextManager::Instance().Has("100"));
  auto* comm = pg->GetDeviceContext(phi::GPUPlace(0), false);
  auto* calc = pg->GetDeviceContext(phi::GPUPlace(0), true);
  EXPECT_NE(comm->stream()->native_handle(), calc->stream()->native_handle());
  // CPU tensors are refused before anything is issued.
  auto cpu = MakeHost(DataType::FLOAT32, 4);
  EXPECT_THROW(pg->AllReduce(&cpu, cpu, {}, true), phi::InvalidArgumentError);
  EXPECT_NO_THROW(pg->Barrier()->Wait());
  pg.reset();
  EXPECT_FALSE(phi::distributed::CommContextManager::Instance().Has("100"));
}

TEST(ProcessGroupNCCL, AllReduceEveryDtypeAndOp) {
  PADDLE_LIKE_REQUIRE_GPU();
  auto pg = MakeGroup(101);
  int checked = 0;
  for (DataType dt : phi::kAllDataTypes) {
    for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::PRODUCT, ReduceOp::MIN,
                        ReduceOp::MAX, ReduceOp::BAND, ReduceOp::BOR, ReduceOp::BXOR,
                        ReduceOp::PREMUL_SUM}) {
      const double factor = phi::IsIntegral(dt) ? 2.0 : 0.5;
      const std::string what = std::string(Name(dt)) + " " +
                               phi::distributed::ReduceOpToString(op);
      distributed::AllreduceOptions opts;
      opts.reduce_op = op;
      opts.premul_factor = factor;
      auto host = MakeHost(dt, 257, 2);
      auto in = ToDevice(host);
      DenseTensor out;
      // What NCCL can do, from the mapping; the engine must agree.
      bool expect_ok = true;
      try {
        phi::distributed::PlanNCCLReduction(dt, 257, {op, factor});
      } catch (const phi::InvalidArgumentError&) {
        EXPECT_THROW(pg->AllReduce(&out, in, opts, true), phi::InvalidArgumentError) << what;
        expect_ok = false;
      } catch (const phi::UnimplementedError&) {
        EXPECT_THROW(pg->AllReduce(&out, in, opts, true), phi::UnimplementedError) << what;
        expect_ok = false;
      }
      if (!expect_ok) continue;
      auto want = Scaled(Values(host), op, factor);
      pg->AllReduce(&out, in, opts, true);
      CountWrong(Values(out), want, "out-of-place " + what);
      pg->AllReduce(&in, in, opts, /*sync_op=*/false)->Wait();
      CountWrong(Values(in), want, "in-place " + what);
      ++checked;
    }
  }
  EXPECT_GT(checked, 50);
}

TEST(ProcessGroupNCCL, EveryOtherOpEveryDtype) {
  PADDLE_LIKE_REQUIRE_GPU();
  auto pg = MakeGroup(102);
  for (DataType dt : phi::kAllDataTypes) {
    const std::string n = Name(dt);
    auto host = MakeHost(dt, 96, 3);
    auto want = Values(host);
    auto in = ToDevice(host);

    DenseTensor b;
    pg->Broadcast(&b, in, {}, true);
    CountWrong(Values(b), want, "Broadcast " + n);

    DenseTensor r;
    pg->Reduce(&r, in, {}, true);
    CountWrong(Values(r), want, "Reduce " + n);

    DenseTensor ag;
    pg->AllGather(&ag, in, true);
    CountWrong(Values(ag), want, "AllGather " + n);
    DenseTensor part;  // elements [10, 30)
    pg->AllGather(&part, in, 10, 20, true);
    CountWrong(Values(part), Values_t(want.begin() + 10, want.begin() + 30),
               "partial AllGather " + n);

    DenseTensor rs;
    pg->ReduceScatter(&rs, in, {}, true);
    CountWrong(Values(rs), want, "ReduceScatter " + n);

    DenseTensor sc;
    pg->Scatter(&sc, in, {}, true);
    CountWrong(Values(sc), want, "Scatter " + n);

    DenseTensor ga;
    pg->Gather(&ga, in, {}, true);
    CountWrong(Values(ga), want, "Gather " + n);
    std::vector<DenseTensor> gl;
    pg->Gather(&gl, in, {}, true);
    ASSERT_EQ(gl.size(), 1u);
    CountWrong(Values(gl[0]), want, "Gather list " + n);

    DenseTensor a2a;
    pg->AllToAll(&a2a, in, {}, {}, true);
    CountWrong(Values(a2a), want, "AllToAll " + n);
    std::vector<DenseTensor> outs(1);
    pg->AllToAll(&outs, {in}, true, false);
    CountWrong(Values(outs[0]), want, "AllToAll list " + n);

    // Send to and receive from oneself: one engine group, as NCCL requires.
    DenseTensor got(phi::GPUPlace(0), dt, in.dims());
    pg->StartCoalescing();
    pg->Send(in, 0, false);
    pg->Recv(&got, 0, false);
    pg->EndCoalescing()->Wait();
    CountWrong(Values(got), want, "Send/Recv " + n);

    // On the calc stream.
    DenseTensor calc;
    pg->AllReduce(&calc, in, {}, true, /*use_calc_stream=*/true);
    CountWrong(Values(calc), want, "AllReduce on calc stream " + n);
  }
  EXPECT_NO_THROW(pg->Barrier()->Wait());
  DenseTensor any(phi::GPUPlace(0), DataType::FLOAT32, phi::DDim({4}));
  EXPECT_THROW(pg->Recv(&any, distributed::kAnySource, true), phi::EnforceNotMet);
}

TEST(ProcessGroupNCCL, CoalescedAllReducesAndPremulInsideAGroup) {
  PADDLE_LIKE_REQUIRE_GPU();
  auto pg = MakeGroup(103);
  std::vector<DenseTensor> ts;
  std::vector<Values_t> want;
  pg->StartCoalescing();
  for (int i = 0; i < 20; ++i) {
    DataType dt = i % 2 ? DataType::FLOAT32 : DataType::BFLOAT16;
    auto host = MakeHost(dt, 1 + i * 37, i);
    want.push_back(Scaled(Values(host), ReduceOp::PREMUL_SUM, 0.5));
    ts.push_back(ToDevice(host));
  }
  std::vector<ProcessGroupNCCL::TaskPtr> tasks;
  for (auto& t : ts) {
    distributed::AllreduceOptions o;
    o.reduce_op = ReduceOp::PREMUL_SUM;
    o.premul_factor = 0.5;
    tasks.push_back(pg->AllReduce(&t, t, o, false));
  }
  auto group = pg->EndCoalescing();
  group->Wait();
  for (auto& t : tasks) EXPECT_TRUE(t->Wait());
  EXPECT_EQ(phi::distributed::NCCLCommContext::GroupDepth(), 0);
  for (size_t i = 0; i < ts.size(); ++i) CountWrong(Values(ts[i]), want[i], "coalesced");
}

TEST(ProcessGroupNCCL, CommStreamWaitsForCalcStream) {
  PADDLE_LIKE_REQUIRE_GPU();
  auto pg = MakeGroup(104);
  auto* calc = pg->GetDeviceContext(phi::GPUPlace(0), true)->stream();
  auto* comm = pg->GetDeviceContext(phi::GPUPlace(0), false)->stream();
  auto host = MakeHost(DataType::FLOAT32, 1024);
  auto in = ToDevice(host);
  DenseTensor out(phi::GPUPlace(0), DataType::FLOAT32, in.dims());
  pg->GetCommContext();  // communicator creation is not what this test times
  ProcessGroupNCCL::TaskPtr task;
  {
    StreamGate gate(RawStream(calc));  // "compute" still producing the input
    task = pg->AllReduce(&out, in, {}, /*sync_op=*/false);
    std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(comm->Query()) << "the comm stream ran ahead of the calc stream";
    EXPECT_FALSE(task->IsCompleted());
    gate.Open();
  }
  task->Wait();
  CountWrong(Values(out), Values(host), "after calc stream");
}

TEST(ProcessGroupNCCL, HolderTrackingKeepsMemoryUntilTheCommStreamPasses) {
  PADDLE_LIKE_REQUIRE_GPU();
  auto pg = MakeGroup(105);
  pg->GetCommContext();
  auto* comm = pg->GetDeviceContext(phi::GPUPlace(0), false)->stream();
  auto alloc = phi::memory::GetAllocator(phi::GPUPlace(0));
  auto in = ToDevice(MakeHost(DataType::FLOAT32, 1 << 16));
  PHI_CUDA_CHECK(cudaDeviceSynchronize());
  auto before = alloc->stats();
  phi::memory::AllocatorStats mid;
  ProcessGroupNCCL::TaskPtr task;
  {
    StreamGate gate(RawStream(comm));
    {
      DenseTensor out;
      task = pg->AllReduce(&out, in, {}, /*sync_op=*/false);
      EXPECT_GE(alloc->stats().bytes_live, before.bytes_live + (1 << 18));
    }  // out released while the comm stream still has to write it
    mid = alloc->stats();
    EXPECT_GE(mid.frees_deferred, before.frees_deferred + 1);
    EXPECT_GE(mid.pending_frees, before.pending_frees + 1);
    EXPECT_GE(mid.bytes_live, before.bytes_live + (1 << 18)) << "freed under the stream";
    EXPECT_FALSE(task->IsCompleted());
    gate.Open();
  }
  task->Synchronize();
  alloc->ProcessPendingFrees();
  auto after = alloc->stats();
  EXPECT_EQ(after.pending_frees, before.pending_frees);
  EXPECT_EQ(after.deferred_frees_completed - before.deferred_frees_completed,
            mid.frees_deferred - before.frees_deferred);
  EXPECT_EQ(after.bytes_live, before.bytes_live);
}

TEST(ProcessGroupNCCL, BlockingWaitTimesOutThenSucceeds) {
  PADDLE_LIKE_REQUIRE_GPU();
  auto pg = MakeGroup(106);
  pg->GetCommContext();
  auto* comm = pg->GetDeviceContext(phi::GPUPlace(0), false)->stream();
  auto* calc = pg->GetDeviceContext(phi::GPUPlace(0), true)->stream();
  auto in = ToDevice(MakeHost(DataType::FLOAT32, 64));
  DenseTensor out(phi::GPUPlace(0), DataType::FLOAT32, in.dims());
  PHI_CUDA_CHECK(cudaDeviceSynchronize());
  {
    // Without blocking wait, Wait only orders the calc stream: the host goes on.
    StreamGate gate(RawStream(comm));
    auto task = pg->AllReduce(&out, in, {}, false);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(task->Wait(100ms));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 100ms);
    EXPECT_FALSE(calc->Query()) << "the calc stream must wait for the comm stream";
    gate.Open();
    task->Synchronize();
  }
  calc->Synchronize(10s);

  const bool saved = FLAGS_nccl_blocking_wait;
  FLAGS_nccl_blocking_wait = true;
  auto pg2 = MakeGroup(107);  // BlockingWait() is read when a task is made
  pg2->GetCommContext();
  auto* comm2 = pg2->GetDeviceContext(phi::GPUPlace(0), false)->stream();
  {
    StreamGate gate(RawStream(comm2));
    auto task = pg2->AllReduce(&out, in, {}, false);
    auto t0 = std::chrono::steady_clock::now();
    try {
      task->Wait(200ms);
      ADD_FAILURE() << "Wait returned while the comm stream was held";
    } catch (const phi::TimeoutError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("ProcessGroupNCCL"), std::string::npos) << msg;
      EXPECT_NE(msg.find("200"), std::string::npos) << msg;
    }
    auto waited = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(waited, 200ms);
    EXPECT_LT(waited, 5s);
    gate.Open();
    EXPECT_TRUE(task->Wait(10s));
  }
  FLAGS_nccl_blocking_wait = saved;
}

TEST(ProcessGroupNCCL, EagerConnectionAndRecreatedGroup) {
  PADDLE_LIKE_REQUIRE_GPU();
  const bool saved = FLAGS_eager_communication_connection;
  FLAGS_eager_communication_connection = true;
  {
    auto pg = MakeGroup(108);
    EXPECT_TRUE(phi::distributed::CommContextManager::Instance().Has("108"));
  }
  FLAGS_eager_communication_connection = saved;
  EXPECT_FALSE(phi::distributed::CommContextManager::Instance().Has("108"));
  // The same gid again, with a config: a fresh unique id, a fresh communicator.
  phi::distributed::NCCLCommOptions options;
  options.use_config = true;
  options.max_ctas = 4;
  auto store = std::make_shared<phi::distributed::HashStore>(30s);
  auto pg = ProcessGroupNCCL::CreateProcessGroupNCCL(store, 0, 1, 108, 60s, 0, options);
  EXPECT_EQ(distributed::ProcessGroupIdMap::GetInstance().Get(108), pg);
  auto host = MakeHost(DataType::FLOAT64, 33);
  DenseTensor out;
  pg->AllReduce(&out, ToDevice(host), {}, true);
  CountWrong(Values(out), Values(host), "config communicator");
  distributed::ProcessGroupIdMap::GetInstance().Erase(108);
}

// A timing loop in nccl-tests' shape (world size 1: busbw factor 0, so algbw is what
// speaks). Runs only with PADDLE_LIKE_GPU_BENCH=1 (tools/gpu_check.sh sets it).
TEST(NCCLBench, AllReduceFloat32) {
  PADDLE_LIKE_REQUIRE_GPU();
  const char* on = std::getenv("PADDLE_LIKE_GPU_BENCH");
  if (on == nullptr || std::string(on) != "1") GTEST_SKIP() << "set PADDLE_LIKE_GPU_BENCH=1";
  auto pg = MakeGroup(109);
  auto* nccl = pg->GetCommContext();
  auto* comm = pg->GetDeviceContext(phi::GPUPlace(0), false)->stream();
  std::printf("#%12s %12s %6s %6s | %10s %10s | %10s %10s\n", "size(B)", "count", "type",
              "redop", "engine(us)", "algbw", "raw(us)", "algbw");
  for (int64_t bytes = 8; bytes <= (int64_t(256) << 20); bytes *= 8) {
    const int64_t count = bytes / 4;
    DenseTensor in(phi::GPUPlace(0), DataType::FLOAT32, phi::DDim({count}));
    DenseTensor out(phi::GPUPlace(0), DataType::FLOAT32, phi::DDim({count}));
    phi::Fill(&in, 1.0);
    const int iters = bytes >= (int64_t(64) << 20) ? 10 : 50;
    auto time_us = [&](const std::function<void()>& once, const std::function<void()>& sync) {
      for (int i = 0; i < 5; ++i) once();
      sync();
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) once();
      sync();
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                 .count() / iters;
    };
    ProcessGroupNCCL::TaskPtr last;
    double engine = time_us([&] { last = pg->AllReduce(&out, in, {}, false); },
                            [&] { last->Synchronize(); });
    double raw = time_us(
        [&] {
          nccl->AllReduce(in.data(), out.data(), count, DataType::FLOAT32, {}, comm);
        },
        [&] { comm->Synchronize(60s); });
    std::printf(" %12lld %12lld %6s %6s | %10.2f %10.3f | %10.2f %10.3f\n",
                static_cast<long long>(bytes), static_cast<long long>(count), "float", "sum",
                engine, bytes / engine / 1e3, raw, bytes / raw / 1e3);
  }
  std::printf("# algbw in GB/s; world size 1 (busbw = 0 by nccl-tests' factor 2(n-1)/n)\n");
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
