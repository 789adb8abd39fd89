// comm_overhead_probe: where does an all-reduce's time go between raw Gloo and our engine?
//
//   launch --nproc_per_node 2 -- comm_overhead_probe [--count N] [--iters I] [--rounds R]
//
// Times the same float32 SUM all-reduce of N elements through six paths, in rounds that rotate
// the order (so load from elsewhere hits every path alike), and prints each path's median:
//   raw-reuse    gloo::allreduce, one AllreduceOptions reused (Gloo's best case)
//   raw-percall  gloo::allreduce, AllreduceOptions built per call (buffers bound per call)
//   context      our GlooCommContext::AllReduce, called directly on this thread
//   engine-calc  ProcessGroupGloo::AllReduce(sync_op, use_calc_stream): the engine, no stream
//   engine-sync  ProcessGroupGloo::AllReduce(sync_op): the comm stream (inline when idle)
//   engine-async ProcessGroupGloo::AllReduce(async) x I, then Wait on every task
// Differences between neighbours locate the overhead: percall - reuse = binding buffers per
// call; context - percall = the comm context; engine-calc - context = the engine's bookkeeping;
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
    using paddle_like::bench::MakeRawGloo;
    auto dt = phi::DataType::FLOAT32;
    auto sum = phi::distributed::ReduceOp::SUM;
    auto reuse = MakeRawGloo(store, rank, world, dt, sum, 300, true);
    auto percall = MakeRawGloo(std::make_shared<phi::distributed::PrefixStore>("probe", store),
                               rank, world, dt, sum, 300, false);
    reuse->Prepare(count, false);
    percall->Prepare(count, false);
    phi::distributed::GlooOptions go;
    go.timeout = timeout;
    // A context of its own (gid 1000), so the barriers on gid 0 never share its connections.
    auto ctx = phi::distributed::CreateGlooCommContext(store, 1000, rank, world, go);
    phi::DenseTensor in(phi::CPUPlace(), dt, phi::DDim({count}));
    phi::DenseTensor out(phi::CPUPlace(), dt, phi::DDim({count}));
    phi::Fill(&in, 1.0);

    struct Path {
      const char* name;
      std::function<void()> run;  // `iters` all-reduces
      std::vector<double> us;
    };
    std::vector<Path> paths = {
        {"raw-reuse", [&] { reuse->Run(iters); }, {}},
        {"raw-percall", [&] { percall->Run(iters); }, {}},
        {"context",
         [&] {
           for (int i = 0; i < iters; ++i) {
             ctx->AllReduce(in.data(), out.data(), count, dt, {}, nullptr);
           }
         },
         {}},
        {"engine-calc",
         [&] {
           for (int i = 0; i < iters; ++i) pg->AllReduce(&out, in, AllreduceOptions{}, true, true);
         },
         {}},
        {"engine-sync",
         [&] {
           for (int i = 0; i < iters; ++i) pg->AllReduce(&out, in, AllreduceOptions{}, true);
         },
         {}},
        {"engine-async",
         [&] {
           std::vector<ProcessGroup::TaskPtr> tasks;
           for (int i = 0; i < iters; ++i) {
             tasks.push_back(pg->AllReduce(&out, in, AllreduceOptions{}, false));
           }
           for (auto& t : tasks) t->Wait();
         },
         {}},
    };
    for (auto& p : paths) p.run();  // warm-up
    for (int r = 0; r < rounds; ++r) {
      for (size_t k = 0; k < paths.size(); ++k) {
        Path& p = paths[(k + r) % paths.size()];
        pg->Barrier()->Wait();
        auto t0 = std::chrono::steady_clock::now();
        p.run();
        auto t1 = std::chrono::steady_clock::now();
        p.us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
      }
    }
    if (rank == 0) {
      std::printf("# %d rank(s), float32 sum, %lld elements, %d iters x %d rounds (median)\n",
                  world, static_cast<long long>(count), iters, rounds);
      double base = 0;
      for (auto& p : paths) {
        std::sort(p.us.begin(), p.us.end());
        double med = p.us[p.us.size() / 2];
        if (base == 0) base = med;
        std::printf("%-13s %10.1f us   x%.3f of raw-reuse   (min %.1f, max %.1f)\n", p.name, med,
                    med / base, p.us.front(), p.us.back());
      }
    }
    pg->Barrier()->Wait();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "comm_overhead_probe: %s\n", e.what());
    return 1;
  }
}
