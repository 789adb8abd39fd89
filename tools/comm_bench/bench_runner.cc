#include "tools/comm_bench/bench_runner.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
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

// Nearest-rank percentile (p in (0, 100]).
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t k = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::min(v.size(), std::max<size_t>(k, 1)) - 1];
}

class GroupSync : public RankSync {
 public:
  GroupSync(ProcessGroup* pg, phi::Place place) : pg_(pg), place_(place) {}
  void Barrier() override { pg_->Barrier()->Wait(); }
  std::vector<double> SumEachOverRanks(std::vector<double> v) override {
    DenseTensor host = DenseTensor::FromVector<double>(v);
    DenseTensor t;
    if (place_.is_cpu()) {
      t = host;
    } else {
      phi::Copy(host, place_, &t);
    }
    auto task = pg_->AllReduce(&t, t, distributed::AllreduceOptions{}, true);
    task->Synchronize();
    return t.ToVector<double>();
  }

 private:
  ProcessGroup* pg_;
  phi::Place place_;
};

// Every call is a numbered round: each rank posts its value under the round's key and reads
// the others'. Slow (store round trips) but only ever outside the timed regions.
class StoreSync : public RankSync {
 public:
  StoreSync(std::shared_ptr<phi::distributed::Store> store, int rank, int world)
      : store_(std::move(store)), rank_(rank), world_(world) {}
  void Barrier() override { SumOverRanks(0); }
  std::vector<double> SumEachOverRanks(std::vector<double> v) override {
    const std::string round = "comm_bench/sync/" + std::to_string(round_++) + "/";
    const size_t bytes = v.size() * sizeof(double);
    std::vector<uint8_t> mine(bytes);
    std::memcpy(mine.data(), v.data(), bytes);
    store_->set(round + std::to_string(rank_), mine);
    std::vector<double> sum(v.size(), 0.0), x(v.size());
    for (int r = 0; r < world_; ++r) {
      const std::string key = round + std::to_string(r);
      store_->wait({key});
      auto got = store_->get(key);
      std::fill(x.begin(), x.end(), 0.0);
      std::memcpy(x.data(), got.data(), std::min(got.size(), bytes));
      for (size_t i = 0; i < x.size(); ++i) sum[i] += x[i];
    }
    return sum;
  }

 private:
  std::shared_ptr<phi::distributed::Store> store_;
  int rank_, world_;
  int64_t round_ = 0;
};

}  // namespace

std::unique_ptr<RankSync> MakeGroupSync(ProcessGroup* pg, phi::Place place) {
  return std::make_unique<GroupSync>(pg, place);
}

std::unique_ptr<RankSync> MakeStoreSync(std::shared_ptr<phi::distributed::Store> store,
                                        int rank, int world) {
  return std::make_unique<StoreSync>(std::move(store), rank, world);
}

const RawResult* Half::BestRaw() const {
  const RawResult* best = nullptr;
  for (const auto& r : raw) {
    if (r.ours) continue;
    if (best == nullptr || r.t.median < best->t.median) best = &r;
  }
  return best;
}

Runner::Runner(const BenchOptions& opts, ProcessGroup* pg, phi::Place place,
               std::vector<RawAllReduce*> raws, RankSync* sync, int world)
    : opts_(opts), pg_(pg), place_(place), raws_(std::move(raws)), sync_(sync), world_(world) {}

Stats Runner::OverRanks(std::vector<double> samples) {
  std::vector<double> mine(3, 0.0);  // mean, median, p90 of this rank
  if (!samples.empty()) {
    double sum = 0;
    for (double s : samples) sum += s;
    mine[0] = sum / static_cast<double>(samples.size());
    mine[1] = Median(samples);
    mine[2] = Percentile(std::move(samples), 90);
  }
  const std::vector<double> all = sync_->SumEachOverRanks(mine);
  return Stats{all[0] / world_, all[1] / world_, all[2] / world_};
}

void Runner::TimeOp(const BenchOp& op, OpBuffers* b, int iters, std::vector<double>* samples) {
  std::vector<ProcessGroup::TaskPtr> tasks;
  tasks.reserve(static_cast<size_t>(iters));
  sync_->Barrier();
  if (opts_.sync) {
    for (int i = 0; i < iters; ++i) {
      auto t0 = Clock::now();
      // A device op is done when its stream is.
      for (auto& t : op.Issue(b, true)) {
        if (t && !place_.is_cpu()) t->Synchronize();
      }
      auto t1 = Clock::now();
      if (samples != nullptr) samples->push_back(Us(t0, t1));
    }
    return;
  }
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    for (auto& t : op.Issue(b, false)) {
      if (t) tasks.push_back(std::move(t));
    }
  }
  WaitAll(tasks);
  auto t1 = Clock::now();
  if (samples != nullptr) samples->push_back(Us(t0, t1) / iters);
}

void Runner::TimeRaw(RawAllReduce* raw, int iters, std::vector<double>* samples) {
  sync_->Barrier();
  for (int i = 0; i < iters; ++i) {
    auto t0 = Clock::now();
    raw->Run(1);
    auto t1 = Clock::now();
    if (samples != nullptr) samples->push_back(Us(t0, t1));
  }
}

Half Runner::RunHalf(const BenchOp* op, const OpInfo& info, const SizePlan& plan,
                     bool in_place) {
  Half h;
  h.present = true;
  h.ours = op != nullptr;
  OpBuffers b;
  if (op != nullptr) {
    b = op->MakeBuffers(plan, in_place);
    op->Fill(&b, plan);
    if (opts_.warmup > 0) TimeOp(*op, &b, opts_.warmup, nullptr);
  }
  const bool raw = !raws_.empty() && info.name == "allreduce";
  std::vector<std::vector<double>> raw_samples(raw ? raws_.size() : 0);
  if (raw) {
    for (RawAllReduce* r : raws_) {
      r->Prepare(plan.count, in_place);
      if (opts_.warmup > 0) r->Run(opts_.warmup);
    }
  }
  // Rounds alternate ours and each raw engine, so load from elsewhere hits all alike.
  std::vector<double> ours;
  for (int round = 0; round < opts_.rounds; ++round) {
    if (op != nullptr) TimeOp(*op, &b, opts_.iters, &ours);
    for (size_t k = 0; k < raw_samples.size(); ++k) {
      TimeRaw(raws_[k], opts_.iters, &raw_samples[k]);
    }
  }
  if (op != nullptr) {
    h.t = OverRanks(std::move(ours));
    h.algbw = h.t.mean > 0 ? static_cast<double>(plan.bytes) / (h.t.mean * 1e3) : 0;
    h.busbw = h.algbw * info.BusFactor(world_);
  }
  for (size_t k = 0; k < raw_samples.size(); ++k) {
    h.raw.push_back(RawResult{raws_[k]->Name(), OverRanks(std::move(raw_samples[k])),
                              raws_[k]->IsOurEngine()});
  }
  if (opts_.check && op != nullptr) {
    op->Fill(&b, plan);  // in-place runs overwrote the input
    std::vector<ProcessGroup::TaskPtr> tasks;
    for (auto& t : op->Issue(&b, opts_.sync)) {
      if (t) tasks.push_back(std::move(t));
    }
    WaitAll(tasks);
    const double wrong = static_cast<double>(op->Check(b, plan));
    h.wrong = static_cast<int64_t>(sync_->SumOverRanks(wrong));
  }
  return h;
}

Row Runner::RunSize(const BenchOp* op, const OpInfo& info, const SizePlan& plan) {
  Row row;
  row.op = info.name;
  row.bytes = plan.bytes;
  row.count = plan.count;
  row.type = phi::DataTypeToString(opts_.dtype);
  row.redop = "none";
  if (info.reduces) {
    row.redop = phi::distributed::ReduceOpToString(opts_.redop);
    for (char& ch : row.redop) ch = static_cast<char>(std::tolower(ch));
  }
  row.root = info.rooted ? opts_.root : -1;
  const bool in_place = info.has_in_place && opts_.in_place && op != nullptr;
  if (opts_.out_of_place || !in_place) row.oop = RunHalf(op, info, plan, false);
  if (in_place) {
    row.ip = RunHalf(op, info, plan, true);
  }
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
    sync_->Barrier();
    auto t0 = Clock::now();
    for (int i = 0; i < opts_.iters; ++i) fn();
    auto t1 = Clock::now();
    return sync_->SumOverRanks(Us(t0, t1) / opts_.iters) / world_;
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
  r.wrong = static_cast<int64_t>(sync_->SumOverRanks(static_cast<double>(wrong)));
  return r;
}

}  // namespace bench
}  // namespace paddle_like
