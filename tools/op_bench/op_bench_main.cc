// op_bench: what running c_allreduce_sum through the Executor costs over calling
// ProcessGroup::AllReduce directly on the same group, per op.
//
//   build/tools/launch/launch --nproc_per_node 2 build/tools/op_bench/op_bench
//       [--bytes 8] [--iters 2000] [--rounds 10]
//
// Both paths run the same in-place float32 SUM all-reduce on the calc stream
// (use_calc_stream=true, i.e. sync_op and use_calc_stream for the direct call). Each op is
// timed on its own; the paths alternate in rounds (so load from elsewhere hits both alike),
// and rank 0 prints the median and p90 of every op's time for each path and their ratio.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "paddle_like/dist/distributed.h"
#include "paddle_like/framework/executor.h"
#include "paddle_like/operators/comm_ring.h"
#include "tools/common/arg_parser.h"

namespace {

using paddle_like::framework::Executor;
using paddle_like::framework::ProgramDesc;
using paddle_like::framework::Scope;
using Clock = std::chrono::steady_clock;
namespace dist = paddle_like::dist;

const char* kUsage =
    "usage: op_bench [--bytes N] [--iters I] [--rounds R]   (under launch, or alone)\n"
    "  --bytes   all-reduce size in bytes, a multiple of 4 (default 8)\n"
    "  --iters   ops per path per round (default 2000)\n"
    "  --rounds  rounds; the paths alternate within each (default 10)\n";

int PositiveInt(const char* flag, const std::string& v) {
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || x <= 0) {
    paddle_like::tools::UsageError(
        "op_bench", kUsage, std::string(flag) + " needs a positive integer, got '" + v + "'");
  }
  return static_cast<int>(x);
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  int bytes = 8, iters = 2000, rounds = 10;
  paddle_like::tools::ArgParser args(argc, argv, "op_bench", kUsage);
  while (args.Next()) {
    if (args.flag() == "-h" || args.flag() == "--help") args.Help();
    if (args.flag() == "--bytes") {
      bytes = PositiveInt("--bytes", args.Value());
    } else if (args.flag() == "--iters") {
      iters = PositiveInt("--iters", args.Value());
    } else if (args.flag() == "--rounds") {
      rounds = PositiveInt("--rounds", args.Value());
    } else {
      paddle_like::tools::UsageError("op_bench", kUsage, "unknown option '" + args.arg() + "'");
    }
  }
  if (bytes % 4 != 0) {
    paddle_like::tools::UsageError("op_bench", kUsage, "--bytes must be a multiple of 4");
  }
  try {
    dist::InitOptions o;
    o.backend = "gloo";
    if (std::getenv("WORLD_SIZE") == nullptr) {
      o.init_method = "tcp://127.0.0.1:0";
      o.world_size = 1;
      o.rank = 0;
    }
    dist::init_process_group(o);
    const int ring = paddle_like::operators::RegisterCommRing(dist::world(), 0);
    auto pg = paddle_like::distributed::ProcessGroupIdMap::GetInstance().Get(ring);
    const int rank = dist::get_rank(), world = dist::get_world_size();

    Scope scope;
    phi::DenseTensor* x = scope.Var("x");
    *x = phi::DenseTensor(phi::CPUPlace(), phi::DataType::FLOAT32, phi::DDim({bytes / 4}));
    phi::Fill(x, 1.0);
    ProgramDesc program;
    program.AppendOp("c_allreduce_sum")
        .SetInput("X", {"x"})
        .SetOutput("Out", {"x"})
        .SetAttr("ring_id", ring)
        .SetAttr("use_calc_stream", true);
    Executor exe;
    paddle_like::distributed::AllreduceOptions opts;

    struct Path {
      const char* name;
      std::function<void()> op;
      std::vector<double> us;
    };
    std::vector<Path> paths = {
        {"ProcessGroup::AllReduce", [&] { pg->AllReduce(x, *x, opts, true, true); }, {}},
        {"Executor c_allreduce_sum", [&] { exe.Run(program, &scope); }, {}},
    };
    for (auto& p : paths) {
      for (int i = 0; i < iters / 10 + 1; ++i) p.op();  // warm-up
    }
    for (int r = 0; r < rounds; ++r) {
      for (size_t k = 0; k < paths.size(); ++k) {
        Path& p = paths[(k + r) % paths.size()];
        pg->Barrier()->Wait();
        for (int i = 0; i < iters; ++i) {
          const auto t0 = Clock::now();
          p.op();
          p.us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        }
      }
    }
    if (rank == 0) {
      std::printf("# c_allreduce_sum, %d B float32, %d rank(s), %d ops x %d rounds per path\n",
                  bytes, world, iters, rounds);
      std::printf("%-26s %10s %10s\n", "path", "median us", "p90 us");
      for (auto& p : paths) {
        std::printf("%-26s %10.2f %10.2f\n", p.name, Percentile(p.us, 0.5), Percentile(p.us, 0.9));
      }
      std::printf("ratio (executor / direct): median %.3f, p90 %.3f\n",
                  Percentile(paths[1].us, 0.5) / Percentile(paths[0].us, 0.5),
                  Percentile(paths[1].us, 0.9) / Percentile(paths[0].us, 0.9));
    }
    pg->Barrier()->Wait();
    dist::destroy_process_group();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "op_bench: %s\n", e.what());
    return 1;
  }
}
