// train_fashion_mnist: the README's main job. An MLP classifier on Fashion-MNIST, trained
// with DataParallel on every rank the launcher started; each rank takes its contiguous shard
// of every global batch. Prints one progress line per --log_every steps, the test accuracy
// after each epoch, writes a loss/accuracy curve, and ends with a check line: the same
// steps in float64 on all ranks against one process on the whole batches (max |dw|).
//
//   build/tools/launch/launch --nproc_per_node 4 -- build/tools/train_fashion_mnist/train_fashion_mnist
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "paddle_like/dist/distributed.h"
#include "paddle_like/eager/functional.h"
#include "paddle_like/parallel/data_parallel.h"
#include "phi/core/errors.h"
#include "phi/kernels/blas.h"
#include "tools/common/arg_parser.h"
#include "tools/common/gnuplot.h"
#include "tools/train_fashion_mnist/mnist_training.h"

namespace paddle_like {
namespace tools {
namespace {

const char* kUsage =
    "usage: train_fashion_mnist [options]   (run under tools/launch)\n"
    "  --data_dir DIR        IDX .gz files (default /usr/share/datasets/fashion-mnist)\n"
    "  --epochs N            (default 5)\n"
    "  --batch_size N        samples per rank per step (default 32)\n"
    "  --lr X                Adam learning rate (default 1e-3)\n"
    "  --hidden N            first hidden layer width (default 256; the second is half)\n"
    "  --dtype float32|float64  training dtype (default float32)\n"
    "  --max_steps N         steps per epoch at most (default 0: the whole epoch)\n"
    "  --log_every N         progress line interval in steps (default 100)\n"
    "  --bucket_mb X         DataParallel comm_buffer_size in MB (default 25)\n"
    "  --plot FILE.png       loss and accuracy curve (rank 0, needs gnuplot)\n"
    "  --verify_steps N      float64 steps of the N-ranks vs 1-process check (default 20; 0: off)\n"
    "  --min_accuracy X      exit 1 when the final test accuracy is below X (default 0)\n"
    "  --seed N              weights and sample order (default 1)\n"
    "  --elastic             survive ranks that die (DataParallel elastic mode; run under\n"
    "                        launch --elastic): the survivors shrink the group, take over the\n"
    "                        dead ranks' samples (the global batch stays the same) and go on\n"
    "  --kill_rank R --kill_step S   rank R kills itself with SIGKILL at global step S (tests)\n"
    "  --heartbeat_deadline_ms N     elastic: a rank silent this long is dead (default 3000)\n";

struct Options {
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int epochs = 5;
  int64_t batch_size = 32;
  double lr = 1e-3;
  int64_t hidden = 256;
  phi::DataType dtype = phi::DataType::FLOAT32;
  int64_t max_steps = 0;
  int64_t log_every = 100;
  double bucket_mb = 25;
  std::string plot;
  int64_t verify_steps = 20;
  double min_accuracy = 0;
  uint64_t seed = 1;
  bool elastic = false;
  int64_t kill_rank = -1, kill_step = -1;
  int64_t heartbeat_deadline_ms = 3000;
};

Options Parse(int argc, char** argv) {
  Options o;
  ArgParser p(argc, argv, "train_fashion_mnist", kUsage);
  auto positive = [&](const std::string& v, const std::string& flag) {
    long long n = 0;
    try {
      n = std::stoll(v);
    } catch (...) {
      UsageError("train_fashion_mnist", kUsage, flag + " needs an integer, got '" + v + "'");
    }
    if (n < 0) UsageError("train_fashion_mnist", kUsage, flag + " must be >= 0, got " + v);
    return static_cast<int64_t>(n);
  };
  auto real = [&](const std::string& v, const std::string& flag) {
    try {
      return std::stod(v);
    } catch (...) {
      UsageError("train_fashion_mnist", kUsage, flag + " needs a number, got '" + v + "'");
    }
  };
  while (p.Next()) {
    const std::string& f = p.flag();
    if (f == "-h" || f == "--help") p.Help();
    else if (f == "--data_dir") o.data_dir = p.Value();
    else if (f == "--epochs") o.epochs = static_cast<int>(positive(p.Value(), f));
    else if (f == "--batch_size") o.batch_size = positive(p.Value(), f);
    else if (f == "--lr") o.lr = real(p.Value(), f);
    else if (f == "--hidden") o.hidden = positive(p.Value(), f);
    else if (f == "--max_steps") o.max_steps = positive(p.Value(), f);
    else if (f == "--log_every") o.log_every = std::max<int64_t>(1, positive(p.Value(), f));
    else if (f == "--bucket_mb") o.bucket_mb = real(p.Value(), f);
    else if (f == "--plot") o.plot = p.Value();
    else if (f == "--verify_steps") o.verify_steps = positive(p.Value(), f);
    else if (f == "--min_accuracy") o.min_accuracy = real(p.Value(), f);
    else if (f == "--seed") o.seed = static_cast<uint64_t>(positive(p.Value(), f));
    else if (f == "--elastic") o.elastic = true;
    else if (f == "--kill_rank") o.kill_rank = positive(p.Value(), f);
    else if (f == "--kill_step") o.kill_step = positive(p.Value(), f);
    else if (f == "--heartbeat_deadline_ms") o.heartbeat_deadline_ms = positive(p.Value(), f);
    else if (f == "--dtype") {
      std::string v = p.Value();
      if (v == "float32") o.dtype = phi::DataType::FLOAT32;
      else if (v == "float64") o.dtype = phi::DataType::FLOAT64;
      else UsageError("train_fashion_mnist", kUsage, "--dtype is float32 or float64, got " + v);
    } else {
      UsageError("train_fashion_mnist", kUsage, "unknown option '" + p.arg() + "'");
    }
  }
  if (o.batch_size == 0 || o.hidden < 2 || o.epochs == 0) {
    UsageError("train_fashion_mnist", kUsage, "--batch_size, --epochs and --hidden (>= 2) must be positive");
  }
  return o;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// The mean of `value` over the group's ranks.
double GroupMean(double value, const dist::GroupPtr& group) {
  auto t = phi::DenseTensor::FromVector<double>({value});
  dist::all_reduce(&t, dist::ReduceOp::AVG, {group, false});
  return t.data<double>()[0];
}

// Test accuracy: each rank counts its slice of the test set; the counts are summed.
double TestAccuracy(nn::Module& model, const IdxDataset& test, phi::DataType dtype,
                    const dist::GroupPtr& group) {
  int rank = group->rank(), world = group->size();
  int64_t begin = test.count * rank / world, end = test.count * (rank + 1) / world;
  auto correct = phi::DenseTensor::FromVector<int64_t>({CountCorrect(model, test, begin, end, dtype)});
  dist::all_reduce(&correct, dist::ReduceOp::SUM, {group, false});
  return static_cast<double>(correct.data<int64_t>()[0]) / static_cast<double>(test.count);
}

struct CurvePoint {
  int64_t step;
  double loss;
};

void WriteCurve(const std::string& path, const std::vector<CurvePoint>& loss,
                const std::vector<CurvePoint>& accuracy, int world) {
  std::ostringstream s;
  s << "set terminal pngcairo noenhanced size 1000,600\nset output " << GnuplotString(path)
    << "\nset title " << GnuplotString("Fashion-MNIST MLP, DataParallel on " +
                                       std::to_string(world) + " ranks")
    << "\nset xlabel 'step'\nset ylabel 'training loss'\nset y2label 'test accuracy (%)'\n"
    << "set ytics nomirror\nset y2tics\nset grid\nset key center right\n$loss << EOD\n";
  for (const auto& p : loss) s << p.step << " " << p.loss << "\n";
  s << "EOD\n$acc << EOD\n";
  for (const auto& p : accuracy) s << p.step << " " << 100 * p.loss << "\n";
  s << "EOD\nplot $loss using 1:2 with lines title 'loss (mean over ranks)', "
    << "$acc using 1:2 axes x1y2 with linespoints pt 7 title 'test accuracy'\n";
  std::string error;
  if (RunGnuplot(s.str(), &error)) std::printf("curve: %s\n", path.c_str());
  else std::printf("curve: not written (%s)\n", error.c_str());
}

// The same `steps` in float64: DataParallel on every rank, then one process on the whole
// global batches (rank 0); returns max |dw| on rank 0 (0 elsewhere).
double VerifyAgainstOneProcess(const Options& o, const IdxDataset& train) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const auto f64 = phi::DataType::FLOAT64;
  auto net = MakeClassifier(train.pixels(), o.hidden, 0.0, o.seed + 100, f64);
  DataParallel dp(net, {});
  optimizer::Adam opt(dp.parameters(), o.lr);
  std::vector<int64_t> order = EpochOrder(train.count, o.seed, 1000);
  const int64_t global = o.batch_size * world;
  for (int64_t s = 0; s < o.verify_steps; ++s) {
    TrainStep(dp, opt, MakeBatch(train, order, s * global + rank * o.batch_size, o.batch_size, f64));
  }
  if (rank != 0) return 0;
  auto ref = MakeClassifier(train.pixels(), o.hidden, 0.0, o.seed + 100, f64);
  optimizer::Adam ref_opt(ref->parameters(), o.lr);
  for (int64_t s = 0; s < o.verify_steps; ++s) {
    TrainStep(*ref, ref_opt, MakeBatch(train, order, s * global, global, f64));
  }
  double worst = 0;
  auto a = net->parameters(), b = ref->parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    const double* pa = a[i].value().data<double>();
    const double* pb = b[i].value().data<double>();
    for (int64_t k = 0; k < a[i].numel(); ++k) worst = std::max(worst, std::fabs(pa[k] - pb[k]));
  }
  return worst;
}

int Run(const Options& o) {
  dist::InitOptions init;
  init.backend = "gloo";
  dist::init_process_group(init);
  const int rank = dist::get_rank(), world = dist::get_world_size();
  IdxDataset train = ReadIdxDataset(o.data_dir, "train");
  IdxDataset test = ReadIdxDataset(o.data_dir, "t10k");
  const int64_t global = o.batch_size * world;
  int64_t steps_per_epoch = train.count / global;
  if (o.max_steps > 0) steps_per_epoch = std::min(steps_per_epoch, o.max_steps);
  const int64_t total_steps = steps_per_epoch * o.epochs;
  if (rank == 0) {
    std::printf("train_fashion_mnist: %d ranks, %ld train / %ld test images, global batch %ld "
                "(%ld per rank), %ld steps x %d epochs, %s, Adam lr %g\n",
                world, long(train.count), long(test.count), long(global), long(o.batch_size),
                long(steps_per_epoch), o.epochs, phi::DataTypeToString(o.dtype), o.lr);
    std::printf("blas: %s (per rank; FLAGS_blas_num_threads or OPENBLAS_NUM_THREADS to change)\n",
                phi::BlasInfo().c_str());
  }

  auto net = MakeClassifier(train.pixels(), o.hidden, 0.0, o.seed, o.dtype);
  DataParallelOptions dpo;
  dpo.comm_buffer_size = static_cast<size_t>(o.bucket_mb * (1 << 20));
  dpo.elastic = o.elastic;
  // Gradients live in the buckets: backward's matmuls add into them in place, with no copy
  // into a bucket before the all-reduce and none back after it.
  dpo.gradient_as_bucket_view = true;
  dpo.elastic_options.heartbeat_deadline = std::chrono::milliseconds(o.heartbeat_deadline_ms);
  DataParallel dp(net, dpo);
  optimizer::Adam opt(dp.parameters(), o.lr);
  dp.on_rank_lost([&](const ElasticEvent& e) {
    if (dp.rank() != 0) return;
    std::string lost;
    for (int r : e.lost) lost += (lost.empty() ? "" : ", ") + std::to_string(r);
    std::printf("elastic: rank %s died at step %ld; continuing on %d ranks (detected and "
                "shrunk in %.3f s); the step runs again, the global batch is split over the "
                "survivors\n",
                lost.c_str(), long(e.step), e.new_world_size, e.seconds);
    std::fflush(stdout);
  });

  std::vector<CurvePoint> loss_curve, accuracy_curve;
  auto start = std::chrono::steady_clock::now();
  auto interval_start = start;
  double loss_sum = 0;
  int64_t loss_count = 0, step = 0, interval_steps = 0;
  double accuracy = 0;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    std::vector<int64_t> order = EpochOrder(train.count, o.seed, epoch);
    for (int64_t s = 0; s < steps_per_epoch; ++s, ++step) {
      dp.run_step([&] {
        if (rank == o.kill_rank && step == o.kill_step) ::raise(SIGKILL);
        // This rank's share of the global batch, over whoever is left: the shares' losses
        // are weighted so that the average over ranks is the global batch's mean.
        int64_t w = dp.world_size(), r = dp.rank();
        int64_t begin = global * r / w, n = global * (r + 1) / w - begin;
        Batch b = MakeBatch(train, order, s * global + begin, n, o.dtype);
        double weight = static_cast<double>(n * w) / static_cast<double>(global);
        loss_sum += ForwardBackward(dp, b, weight);
      });
      opt.step();
      opt.clear_grad();
      ++loss_count;
      ++interval_steps;
      if ((step + 1) % o.log_every == 0 || step + 1 == total_steps) {
        // Elastic: this rank's own loss (a collective here could meet a death outside
        // run_step).
        double local = loss_sum / static_cast<double>(loss_count);
        double loss = o.elastic ? local : GroupMean(local, dp.group());
        double interval = Seconds(interval_start);
        double elapsed = Seconds(start);
        double eta = elapsed / static_cast<double>(step + 1) * static_cast<double>(total_steps - step - 1);
        if (dp.rank() == 0) {
          std::printf("epoch %d/%d step %5ld/%ld  loss %.4f  %8.0f samples/s  ETA %5.1f s\n",
                      epoch + 1, o.epochs, long(s + 1), long(steps_per_epoch), loss,
                      static_cast<double>(interval_steps * global) / interval, eta);
          std::fflush(stdout);
        }
        loss_curve.push_back({step + 1, loss});
        loss_sum = 0;
        loss_count = 0;
        interval_steps = 0;
        interval_start = std::chrono::steady_clock::now();
      }
    }
    accuracy = TestAccuracy(*net, test, o.dtype, dp.group());
    accuracy_curve.push_back({step, accuracy});
    if (dp.rank() == 0) {
      std::printf("epoch %d/%d done: test accuracy %.2f%% (%.1f s)\n", epoch + 1, o.epochs,
                  100 * accuracy, Seconds(start));
      std::fflush(stdout);
    }
    interval_start = std::chrono::steady_clock::now();  // the test pass is not training time
    interval_steps = 0;
  }
  double train_seconds = Seconds(start);
  const bool leader = dp.rank() == 0;
  if (leader) {
    std::printf("test accuracy: %.2f%% after %ld steps (%.1f s, %.0f samples/s)\n", 100 * accuracy,
                long(total_steps), train_seconds,
                static_cast<double>(total_steps * global) / train_seconds);
    if (!o.plot.empty()) WriteCurve(o.plot, loss_curve, accuracy_curve, dp.world_size());
  }
  int status = 0;
  if (o.verify_steps > 0 && o.elastic) {
    if (leader) std::printf("check: skipped in elastic mode (tests/nn/elastic_test.cc checks it)\n");
  } else if (o.verify_steps > 0) {
    double diff = VerifyAgainstOneProcess(o, train);
    const double tolerance = 1e-10;
    if (rank == 0) {
      bool ok = diff <= tolerance;
      std::printf("check: %d ranks vs 1 process, float64, %ld steps: max |dw| = %.3g "
                  "(tolerance %.0e) %s\n",
                  world, long(o.verify_steps), diff, tolerance, ok ? "OK" : "FAILED");
      if (!ok) status = 1;
    }
  }
  if (leader && accuracy < o.min_accuracy) {
    std::printf("train_fashion_mnist: test accuracy %.2f%% is below --min_accuracy %.2f%%\n",
                100 * accuracy, 100 * o.min_accuracy);
    status = 1;
  }
  dist::destroy_process_group();
  return status;
}

}  // namespace
}  // namespace tools
}  // namespace paddle_like

int main(int argc, char** argv) {
  auto options = paddle_like::tools::Parse(argc, argv);
  try {
    return paddle_like::tools::Run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_fashion_mnist: %s\n", e.what());
    return 1;
  }
}
