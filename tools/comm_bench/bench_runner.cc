#include "tools/comm_bench/bench_runner.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <functional>
#include <vector>

namespace paddle_like {
namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

double Us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// Waits for every task, then makes the host wait for the last one's stream (a device stream
// is not waited by Task::Wait alone).
void WaitAll(const std::vector<ProcessGroup::TaskPtr>& tasks) {
  for (const auto& t : tasks) t->Wait();
  if (!tasks.empty()) tasks.back()->Synchronize();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

Runner::Runner(const BenchOptions& opts, ProcessGroup* pg, phi::Place place, RawAllReduce* raw)
    : opts_(opts), pg_(pg), place_(place), raw_(raw), world_(pg->GetSize()) {}

void Runner::Barrier() { pg_->Barrier()->Wait(); }

double Runner::SumOverRanks(double v) {
  DenseTensor host = DenseTensor::FromVector<double>({v});
  DenseTensor t;
  if (place_.is_cpu()) {
    t = host;
  } else {
    phi::Copy(host, place_, &t);
  }
  auto task = pg_->AllReduce(&t, t, distributed::AllreduceOptions{}, true);
  task->Synchronize();
  return t.ToVector<double>()[0];
}

double Runner::TimeOp(const BenchOp& op, OpBuffers* b, int iters) {
  std::vector<ProcessGroup::TaskPtr> tasks;
  tasks.reserve(static_cast<size_t>(iters));
  Barrier();
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    auto task = op.Issue(b, opts_.sync);
    if (!opts_.sync || i + 1 == iters) tasks.push_back(std::move(task));
  }
  WaitAll(tasks);
  auto t1 = Clock::now();
  return Us(t0, t1) / iters;
}

double Runner::TimeRaw(int iters) {
  Barrier();
  auto t0 = Clock::now();
  raw_->Run(iters);
  auto t1 = Clock::now();
  return SumOverRanks(Us(t0, t1) / iters) / world_;
}

Half Runner::RunHalf(const BenchOp& op, const SizePlan& plan, bool in_place) {
  Half h;
  h.present = true;
  OpBuffers b = op.MakeBuffers(plan, in_place);
  op.Fill(&b, plan);
  const bool raw = raw_ != nullptr && op.info().name == "allreduce";
  if (opts_.warmup > 0) TimeOp(op, &b, opts_.warmup);
  if (raw) {
    raw_->Prepare(plan.count, in_place);
    if (opts_.warmup > 0) raw_->Run(opts_.warmup);
  }
  // Rounds alternate ours and raw; each round's time is the mean over ranks.
  std::vector<double> ours, raws;
  for (int r = 0; r < opts_.rounds; ++r) {
    ours.push_back(SumOverRanks(TimeOp(op, &b, opts_.iters)) / world_);
    if (raw) raws.push_back(TimeRaw(opts_.iters));
  }
  h.time_us = Median(ours);
  if (raw) h.raw_us = Median(raws);
  h.algbw = h.time_us > 0 ? static_cast<double>(plan.bytes) / (h.time_us * 1e3) : 0;
  h.busbw = h.algbw * op.info().BusFactor(world_);
  if (opts_.check) {
    op.Fill(&b, plan);  // in-place runs overwrote the input
    WaitAll({op.Issue(&b, opts_.sync)});
    h.wrong = static_cast<int64_t>(SumOverRanks(static_cast<double>(op.Check(b, plan))));
  }
  return h;
}

Row Runner::RunSize(const BenchOp& op, const SizePlan& plan) {
  Row row;
  row.op = op.info().name;
  row.bytes = plan.bytes;
  row.count = plan.count;
  row.type = phi::DataTypeToString(opts_.dtype);
  row.redop = "none";
  if (op.info().reduces) {
    row.redop = phi::distributed::ReduceOpToString(opts_.redop);
    for (char& ch : row.redop) ch = static_cast<char>(std::tolower(ch));
  }
  row.root = op.root();
  row.oop = RunHalf(op, plan, false);
  if (op.info().has_in_place && opts_.in_place) row.ip = RunHalf(op, plan, true);
  return row;
}

CoalesceResult Runner::RunCoalesce() {
  CoalesceResult r;
  r.present = true;
  r.ops = opts_.coalesce_ops;
  const size_t es = phi::SizeOf(opts_.dtype);
  const int64_t count = std::max<int64_t>(1, opts_.coalesce_bytes / static_cast<int64_t>(es));
  r.bytes = count * static_cast<int64_t>(es);
  std::vector<DenseTensor> ins, outs;
  for (int j = 0; j < r.ops; ++j) {
    ins.emplace_back(place_, opts_.dtype, phi::DDim({count}));
    outs.emplace_back(place_, opts_.dtype, phi::DDim({count}));
    FillInput(&ins.back(), opts_.dtype, true, opts_.redop, pg_->GetRank());
  }
  const distributed::AllreduceOptions ar{opts_.redop, 1.0};
  auto one_by_one = [&] {
    std::vector<ProcessGroup::TaskPtr> tasks;
    for (int j = 0; j < r.ops; ++j) {
      auto t = pg_->AllReduce(&outs[j], ins[j], ar, opts_.sync);
      if (!opts_.sync || j + 1 == r.ops) tasks.push_back(std::move(t));
    }
    WaitAll(tasks);
  };
  auto coalesced = [&] {
    pg_->StartCoalescing();
    for (int j = 0; j < r.ops; ++j) pg_->AllReduce(&outs[j], ins[j], ar, opts_.sync);
    WaitAll({pg_->EndCoalescing()});
  };
  auto time = [&](const std::function<void()>& fn) {
    Barrier();
    auto t0 = Clock::now();
    for (int i = 0; i < opts_.iters; ++i) fn();
    auto t1 = Clock::now();
    return SumOverRanks(Us(t0, t1) / opts_.iters) / world_;
  };
  auto check = [&] {
    int64_t wrong = 0;
    CheckSpec s{Layout::kReduceSame, opts_.dtype, opts_.redop, pg_->GetRank(), world_, 0, count};
    for (auto& o : outs) {
      wrong += CountWrong(o, s);
      phi::Fill(&o, 127.0);
    }
    return wrong;
  };
  for (int i = 0; i < opts_.warmup; ++i) {
    one_by_one();
    coalesced();
  }
  // Rounds alternate the two forms; each reports its median round.
  std::vector<double> a, c;
  for (int i = 0; i < std::max(opts_.rounds, 3); ++i) {
    a.push_back(time(one_by_one));
    c.push_back(time(coalesced));
  }
  r.one_by_one_us = Median(a);
  r.coalesced_us = Median(c);
  int64_t wrong = 0;
  if (opts_.check) {
    check();  // resets the outputs
    one_by_one();
    wrong += check();
    coalesced();
    wrong += check();
  }
  r.wrong = static_cast<int64_t>(SumOverRanks(static_cast<double>(wrong)));
  return r;
}

}  // namespace bench
}  // namespace paddle_like
