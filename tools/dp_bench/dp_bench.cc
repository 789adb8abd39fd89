// dp_bench: what DataParallel's overlap buys on a communication-heavy model (many
// parameters, little compute). Per step (forward + backward + the gradient sync), on every
// rank the launcher started:
//   (a) DataParallel: bucketed all-reduces launched from the gradient hooks, overlapping
//       backward (for each --buckets size; with gradient_as_bucket_view too);
//   (b) one all-reduce of all gradients (flattened) after backward;
//   (c) no communication (the compute alone).
// Reports median / p90 / mean step times, the exposed communication (a - c, b - c) and the
// overlap fraction 1 - (a - c) / (b - c). Rank 0 prints; the numbers are rank 0's.
//
//   build/tools/launch/launch --nproc_per_node 2 -- build/tools/dp_bench/dp_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "paddle_like/dist/distributed.h"
#include "paddle_like/eager/functional.h"
#include "paddle_like/parallel/data_parallel.h"
#include "tools/common/arg_parser.h"

namespace paddle_like {
namespace tools {
namespace {

const char* kUsage =
    "usage: dp_bench [options]   (run under tools/launch)\n"
    "  --layers N       Linear layers (default 16)\n"
    "  --width N        their width (default 512: 1 MiB of float32 weights each)\n"
    "  --batch N        samples per rank (default 8)\n"
    "  --steps N        timed steps per setting (default 30, after 5 warm-up steps)\n"
    "  --buckets LIST   DataParallel bucket sizes in MB for (a) (default 1,5,25)\n";

struct Options {
  int64_t layers = 16, width = 512, batch = 8;
  int steps = 30;
  std::vector<double> buckets_mb{1, 5, 25};
};

Options Parse(int argc, char** argv) {
  Options o;
  ArgParser p(argc, argv, "dp_bench", kUsage);
  auto number = [&](const std::string& v, const std::string& flag) {
    try {
      double d = std::stod(v);
      if (d > 0) return d;
    } catch (...) {
    }
    UsageError("dp_bench", kUsage, flag + " needs a positive number, got '" + v + "'");
  };
  while (p.Next()) {
    const std::string& f = p.flag();
    if (f == "-h" || f == "--help") p.Help();
    else if (f == "--layers") o.layers = static_cast<int64_t>(number(p.Value(), f));
    else if (f == "--width") o.width = static_cast<int64_t>(number(p.Value(), f));
    else if (f == "--batch") o.batch = static_cast<int64_t>(number(p.Value(), f));
    else if (f == "--steps") o.steps = static_cast<int>(number(p.Value(), f));
    else if (f == "--buckets") {
      o.buckets_mb.clear();
      std::stringstream ss(p.Value());
      std::string item;
      while (std::getline(ss, item, ',')) o.buckets_mb.push_back(number(item, f));
    } else {
      UsageError("dp_bench", kUsage, "unknown option '" + p.arg() + "'");
    }
  }
  return o;
}

std::shared_ptr<nn::Sequential> MakeModel(const Options& o) {
  auto net = std::make_shared<nn::Sequential>();
  for (int64_t i = 0; i < o.layers; ++i) {
    net->append(std::make_shared<nn::Linear>(o.width, o.width, 10 + i));
    net->append(std::make_shared<nn::Tanh>());
  }
  return net;
}

struct Stats {
  double median, p90, mean;
};

Stats Summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))]; };
  return {at(0.5), at(0.9), std::accumulate(ms.begin(), ms.end(), 0.0) / ms.size()};
}

// Times `steps` calls of step() after 5 warm-up calls; every rank starts each setting
// together (barrier) so no rank's warm-up overlaps another's timed steps.
Stats Time(int steps, const std::function<void()>& step) {
  for (int i = 0; i < 5; ++i) step();
  dist::barrier();
  std::vector<double> ms;
  for (int i = 0; i < steps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return Summarize(ms);
}

Tensor Input(const Options& o) {
  Tensor x = nn::MakeParameter({o.batch, o.width}, phi::DataType::FLOAT32, 99, 1.0);
  x.set_requires_grad(false);
  return x;
}

// (b): plain backward, then every gradient in one flat buffer, one all-reduce, copy back.
void AllReduceAfterBackward(nn::Module& model) {
  std::vector<Tensor> params = model.parameters();
  int64_t total = 0;
  for (auto& p : params) total += p.numel();
  phi::DenseTensor flat(phi::CPUPlace(), phi::DataType::FLOAT32, phi::DDim({total}));
  auto* bytes = static_cast<char*>(flat.data());
  size_t at = 0;
  for (auto& p : params) {
    std::memcpy(bytes + at, p.grad().data(), p.grad().nbytes());
    at += p.grad().nbytes();
  }
  dist::all_reduce(&flat, dist::ReduceOp::AVG);
  at = 0;
  for (auto& p : params) {
    phi::DenseTensor g = p.grad();
    std::memcpy(g.data(), bytes + at, g.nbytes());
    at += g.nbytes();
  }
}

int Run(const Options& o) {
  dist::InitOptions init;
  init.backend = "gloo";
  dist::init_process_group(init);
  const int rank = dist::get_rank(), world = dist::get_world_size();
  Tensor x = Input(o);
  auto model = MakeModel(o);
  double mb = 0;
  for (auto& p : model->parameters()) mb += p.value().nbytes() / 1048576.0;

  auto plain_step = [&] {
    functional::mean(model->forward(x)).backward();
    model->clear_gradients();
  };
  Stats none = Time(o.steps, plain_step);
  Stats after = Time(o.steps, [&] {
    functional::mean(model->forward(x)).backward();
    AllReduceAfterBackward(*model);
    model->clear_gradients();
  });
  struct Overlapped {
    std::string name;
    Stats stats;
  };
  std::vector<Overlapped> overlapped;
  for (bool view : {false, true}) {
    for (double bucket : o.buckets_mb) {
      DataParallelOptions dpo;
      dpo.comm_buffer_size = static_cast<size_t>(bucket * 1048576);
      dpo.gradient_as_bucket_view = view;
      DataParallel dp(model, dpo);
      char name[64];
      std::snprintf(name, sizeof(name), "(a) DataParallel, %g MB%s", bucket,
                    view ? ", views" : "");
      overlapped.push_back({name, Time(o.steps, [&] {
                              functional::mean(dp(x)).backward();
                              model->clear_gradients();
                            })});
      model->clear_gradients(/*set_to_zero=*/false);  // drop views into this dp's buckets
    }
  }
  if (rank == 0) {
    double comm_b = after.median - none.median;
    std::printf("dp_bench: %d ranks, %ld x Linear(%ld, %ld) + tanh, %.1f MiB of float32 "
                "gradients, batch %ld per rank, %d timed steps (ms per step)\n",
                world, long(o.layers), long(o.width), long(o.width), mb, long(o.batch), o.steps);
    std::printf("%-34s %8s %8s %8s %10s %8s %8s\n", "setting", "median", "p90", "mean",
                "exposed", "overlap", "a/b");
    auto row = [&](const std::string& name, const Stats& s, bool overlap_cols) {
      double exposed = s.median - none.median;
      std::printf("%-34s %8.2f %8.2f %8.2f %10.2f", name.c_str(), s.median, s.p90, s.mean,
                  exposed);
      if (overlap_cols && comm_b > 0) {
        std::printf(" %7.0f%% %8.2f", 100 * (1 - exposed / comm_b), s.median / after.median);
      }
      std::printf("\n");
    };
    row("(c) no communication (compute)", none, false);
    row("(b) one all-reduce after backward", after, false);
    for (auto& a : overlapped) row(a.name, a.stats, true);
    std::printf("exposed = median - compute median; overlap = 1 - exposed(a) / exposed(b)\n");
  }
  dist::destroy_process_group();
  return 0;
}

}  // namespace
}  // namespace tools
}  // namespace paddle_like

int main(int argc, char** argv) {
  auto o = paddle_like::tools::Parse(argc, argv);
  try {
    return paddle_like::tools::Run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dp_bench: %s\n", e.what());
    return 1;
  }
}
