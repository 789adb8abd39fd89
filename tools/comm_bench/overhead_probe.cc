// comm_overhead_probe: where does an all-reduce's time go between raw Gloo and our engine?
//
//   launch --nproc_per_node 2 -- comm_overhead_probe [--count N] [--iters I] [--rounds R]
//
// Times the same float32 SUM all-reduce of N elements through six paths, in rounds that rotate
// the order (so load from elsewhere hits every path alike), and prints each path's median:
//   raw-ring      Gloo's AllreduceRing, buffers bound once
//   raw-allreduce gloo::allreduce, one AllreduceOptions reused
//   context      our GlooCommContext::AllReduce, called directly on this thread
//   engine-calc  ProcessGroupGloo::AllReduce(sync_op, use_calc_stream): the engine, no stream
//   engine-sync  ProcessGroupGloo::AllReduce(sync_op): the comm stream (inline when idle)
//   engine-async ProcessGroupGloo::AllReduce(async) x I, then Wait on every task
// Differences between neighbours locate the overhead: context - raw-allreduce = the comm
// context; engine-calc - context = the engine's bookkeeping;
// engine-sync - engine-calc = the CPU comm stream; engine-async - engine-sync = the hand-off
// to the stream's worker thread.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "distributed/process_group_gloo.h"
#include "phi/core/distributed/gloo_comm_context.h"
#include "phi/core/distributed/store/hash_store.h"
#include "phi/core/distributed/store/prefix_store.h"
#include "phi/core/distributed/store/rendezvous.h"
#include "tools/comm_bench/bench_baseline.h"

using paddle_like::distributed::AllreduceOptions;
using paddle_like::distributed::ProcessGroup;
using paddle_like::distributed::ProcessGroupGloo;

int main(int argc, char** argv) {
  int64_t count = 2;
  int iters = 200, rounds = 15;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--count") count = std::atoll(argv[i + 1]);
    if (a == "--iters") iters = std::atoi(argv[i + 1]);
    if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
  }
  try {
    std::shared_ptr<phi::distributed::Store> store;
    int rank = 0, world = 1;
    const char* ws = std::getenv("WORLD_SIZE");
    if (ws != nullptr && *ws) {
      auto r = phi::distributed::Rendezvous("env://");
      store = r.store;
      rank = r.rank;
      world = r.world_size;
    } else {
      store = std::make_shared<phi::distributed::HashStore>();
    }
    const auto timeout = std::chrono::seconds(300);
    auto pg = ProcessGroupGloo::CreateProcessGroupGloo(store, rank, world, 0, timeout);
    pg->Barrier()->Wait();
    using paddle_like::bench::RawGlooAlgorithm;
    auto dt = phi::DataType::FLOAT32;
    auto sum = phi::distributed::ReduceOp::SUM;
    paddle_like::bench::RawGlooContext raw(store, rank, world, 300);
    auto ring = raw.Make(RawGlooAlgorithm::kRing, dt, sum);
    auto reuse = raw.Make(RawGlooAlgorithm::kAllreduce, dt, sum);
    ring->Prepare(count, true);
    reuse->Prepare(count, true);
    phi::distributed::GlooOptions go;
    go.timeout = timeout;
    // A context of its own (gid 1000), so the barriers on gid 0 never share its connections.
    auto ctx = phi::distributed::CreateGlooCommContext(store, 1000, rank, world, go);
    phi::DenseTensor in(phi::CPUPlace(), dt, phi::DDim({count}));
    phi::DenseTensor out(phi::CPUPlace(), dt, phi::DDim({count}));
    phi::Fill(&in, 1.0);

    // Each path's `run` does `iters` ops; every op is timed on its own (async: the batch's
    // mean per op), so the report has the median, p90, p99 and max of single ops.
    struct Path {
      const char* name;
      std::function<void()> one;  // one op; null for the async batch
      std::vector<double> us;
    };
    using Clock = std::chrono::steady_clock;
    auto us_since = [](Clock::time_point t0) {
      return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    };
    std::vector<Path> paths = {
        {"raw-ring", [&] { ring->Run(1); }, {}},
        {"raw-allreduce", [&] { reuse->Run(1); }, {}},
        {"context", [&] { ctx->AllReduce(in.data(), out.data(), count, dt, {}, nullptr); }, {}},
        {"ctx-record+op",
         [&] {
           int64_t rec[8] = {1, 2, 3, 4, 5, 6, 7, 8}, all[64];
           ctx->AllGather(rec, all, 8, phi::DataType::INT64, nullptr);
           ctx->AllReduce(in.data(), out.data(), count, dt, {}, nullptr);
         },
         {}},
        {"engine-calc", [&] { pg->AllReduce(&out, in, AllreduceOptions{}, true, true); }, {}},
        {"engine-sync", [&] { pg->AllReduce(&out, in, AllreduceOptions{}, true); }, {}},
        {"engine-async", nullptr, {}},
    };
    auto run = [&](Path& p, bool record) {
      if (p.one) {
        for (int i = 0; i < iters; ++i) {
          auto t0 = Clock::now();
          p.one();
          if (record) p.us.push_back(us_since(t0));
        }
        return;
      }
      auto t0 = Clock::now();
      std::vector<ProcessGroup::TaskPtr> tasks;
      for (int i = 0; i < iters; ++i) {
        tasks.push_back(pg->AllReduce(&out, in, AllreduceOptions{}, false));
      }
      for (auto& t : tasks) t->Wait();
      if (record) p.us.push_back(us_since(t0) / iters);
    };
    for (auto& p : paths) run(p, false);  // warm-up
    for (int r = 0; r < rounds; ++r) {
      for (size_t k = 0; k < paths.size(); ++k) {
        pg->Barrier()->Wait();
        run(paths[(k + r) % paths.size()], true);
      }
    }
    if (rank == 0) {
      std::printf("# %d rank(s), float32 sum, %lld elements, %d iters x %d rounds; per-op times\n",
                  world, static_cast<long long>(count), iters, rounds);
      double base = 0;
      for (auto& p : paths) {
        std::sort(p.us.begin(), p.us.end());
        auto at = [&](double q) {
          return p.us[std::min(p.us.size() - 1, static_cast<size_t>(q * p.us.size()))];
        };
        double med = at(0.5);
        if (base == 0) base = med;
        std::printf("%-13s median %8.1f us  x%.3f of raw-ring   p90 %8.1f  p99 %8.1f  max %8.1f\n",
                    p.name, med, med / base, at(0.9), at(0.99), p.us.back());
      }
    }
    pg->Barrier()->Wait();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "comm_overhead_probe: %s\n", e.what());
    return 1;
  }
}
