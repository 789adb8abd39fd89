// comm_bench: collective benchmark in the manner of nccl-tests, on the project's process
// groups. Under `launch` (env://) or standalone as world size 1. See bench_options.cc.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "distributed/process_group_gloo.h"
#include "phi/core/distributed/store/hash_store.h"
#include "phi/core/distributed/store/rendezvous.h"
#include "tools/comm_bench/bench_baseline.h"
#include "tools/comm_bench/bench_options.h"
#include "tools/comm_bench/bench_report.h"
#include "tools/comm_bench/bench_runner.h"
#ifdef PADDLE_WITH_NCCL
#include "distributed/process_group_nccl.h"
#endif
#ifdef PADDLE_WITH_MPI
#include "distributed/process_group_mpi.h"
#include "phi/core/distributed/mpi_comm_context.h"
#endif

namespace paddle_like {
namespace bench {
namespace {

struct Job {
  std::shared_ptr<phi::distributed::Store> store;
  int rank = 0, world = 1, local_rank = 0;
};

Job Connect(const BenchOptions& o) {
  Job job;
  auto timeout = std::chrono::seconds(o.timeout_s);
  auto set = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0';
  };
  // mpirun's variables make a job too (the rendezvous reads them).
  const bool env_job =
      set("WORLD_SIZE") || set("PADDLE_TRAINERS_NUM") || set("OMPI_COMM_WORLD_SIZE");
#ifdef PADDLE_WITH_MPI
  if (o.backend == "mpi" && o.init_method == "env://" &&
      phi::distributed::MpiJobWithoutStoreAddress()) {
    auto r = phi::distributed::MpiRendezvous(timeout);  // rank 0's store, sent over MPI
    job.store = r.store;
    job.rank = r.rank;
    job.world = r.world_size;
    job.local_rank = r.local_rank;
    return job;
  }
#endif
  if (o.init_method == "env://" && !env_job) {
    job.store = std::make_shared<phi::distributed::HashStore>(timeout);  // standalone
    return job;
  }
  auto r = phi::distributed::Rendezvous(o.init_method, -1, -1, timeout);
  job.store = r.store;
  job.rank = r.rank;
  job.world = r.world_size;
  job.local_rank = r.local_rank;
  return job;
}

int Main(int argc, char** argv) {
  BenchOptions o = ParseBenchOptions(argc, argv);
  Job job = Connect(o);
  auto timeout = std::chrono::seconds(o.timeout_s);

  std::shared_ptr<distributed::ProcessGroup> pg;
  phi::Place place = phi::CPUPlace();
  std::unique_ptr<RawGlooContext> raw_gloo;
  std::vector<std::unique_ptr<RawAllReduce>> raws;
  Report rep;
  if (o.backend == "nccl") {
#ifdef PADDLE_WITH_NCCL
    auto nccl = distributed::ProcessGroupNCCL::CreateProcessGroupNCCL(job.store, job.rank,
                                                                      job.world, 0, timeout);
    place = nccl->place();
    pg = nccl;
    if (o.baseline) {
      raws.push_back(
          MakeRawNccl(job.store, job.rank, job.world, place.GetDeviceId(), o.dtype, o.redop));
    }
#else
    std::fprintf(stderr, "comm_bench: --backend nccl needs a build with CUDA and NCCL\n");
    return 2;
#endif
  } else if (o.backend == "mpi") {
#ifdef PADDLE_WITH_MPI
    pg = std::make_shared<distributed::ProcessGroupMPI>(job.store, job.rank, job.world, 0,
                                                        timeout);
    if (o.baseline) raws.push_back(MakeRawMpi(o.dtype, o.redop));
#else
    std::fprintf(stderr, "comm_bench: --backend mpi needs a build with MPI\n");
    return 2;
#endif
  } else {
    if (!o.raw_only) {
      pg = distributed::ProcessGroupGloo::CreateProcessGroupGloo(job.store, job.rank, job.world,
                                                                 0, timeout);
    }
    if (o.baseline || o.raw_only) {
      raw_gloo = std::make_unique<RawGlooContext>(job.store, job.rank, job.world, o.timeout_s);
      for (RawGlooAlgorithm a : SelectedRawGlooAlgorithms(o.raw_algos)) {
        raws.push_back(raw_gloo->Make(a, o.dtype, o.redop));
      }
    }
  }
  if (o.check_ab && pg && place.is_cpu()) {
    raws.insert(raws.begin(), MakeEngineWithoutCheck(pg.get(), o.dtype, o.redop));
  }
  std::unique_ptr<RankSync> sync = pg ? MakeGroupSync(pg.get(), place)
                                      : MakeStoreSync(job.store, job.rank, job.world);
  sync->Barrier();  // every rank connected before anything is timed

  const bool lead = job.rank == 0;
  FILE* out = stdout;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  rep.backend = pg ? pg->GetBackendName() : "none (raw Gloo only)";
  rep.world = job.world;
  rep.mode = o.sync || o.raw_only ? "sync" : "async";
  rep.dtype = phi::DataTypeToString(o.dtype);
  rep.redop = phi::distributed::ReduceOpToString(o.redop);
  rep.iters = o.iters;
  rep.warmup = o.warmup;
  rep.rounds = o.rounds;
  rep.table = !o.ops.empty();
  rep.baseline = !raws.empty();
  for (const auto& r : raws) {
    rep.baseline_name += (rep.baseline_name.empty() ? "" : ", ") + r->Name();
  }
  rep.host = host;
  if (lead) PrintHeader(out, rep);

  std::vector<RawAllReduce*> raw_ptrs;
  for (const auto& r : raws) raw_ptrs.push_back(r.get());
  Runner runner(o, pg.get(), place, raw_ptrs, sync.get(), job.world);
  for (const auto& name : o.ops) {
    const OpInfo* info = FindOp(name);
    if (job.world < info->min_ranks) {
      rep.notes.push_back(name + ": skipped (needs " + std::to_string(info->min_ranks) +
                          " ranks)");
      continue;
    }
    if (info->rooted && o.root >= job.world) {
      rep.notes.push_back(name + ": skipped (root " + std::to_string(o.root) +
                          " is not a rank)");
      continue;
    }
    std::unique_ptr<BenchOp> op;
    if (pg) op = std::make_unique<BenchOp>(*info, o, pg.get(), place);
    int64_t last_bytes = -1;
    for (int64_t b = o.min_bytes; b <= o.max_bytes;) {
      SizePlan plan = PlanSize(*info, b, phi::SizeOf(o.dtype), job.world);
      if (plan.bytes != last_bytes) {
        last_bytes = plan.bytes;
        Row row = runner.RunSize(op.get(), *info, plan);
        if (lead) PrintRow(out, rep, row);
        rep.rows.push_back(std::move(row));
      }
      int64_t next = o.step_bytes > 0 ? b + o.step_bytes
                                      : static_cast<int64_t>(static_cast<double>(b) * o.step_factor);
      b = next > b ? next : b + 1;
    }
  }
  if (o.coalesce) {
    rep.coalesce = runner.RunCoalesce();
    if (lead) PrintCoalesce(out, rep.coalesce);
  }
  bool files_ok = true;
  if (lead) {
    PrintFooter(out, rep);
    if (!o.csv_path.empty()) files_ok &= WriteCsv(o.csv_path, rep);
    if (!o.json_path.empty()) files_ok &= WriteJson(o.json_path, rep);
    if (!o.plot_path.empty()) files_ok &= WritePlot(o.plot_path, rep);
    std::fflush(out);
  }
  sync->Barrier();  // nobody tears the group down under a peer still timing
  if (rep.TotalWrong() != 0) {
    if (lead) std::fprintf(stderr, "comm_bench: %lld wrong values\n",
                           static_cast<long long>(rep.TotalWrong()));
    return 1;
  }
  return files_ok ? 0 : 1;
}

}  // namespace
}  // namespace bench
}  // namespace paddle_like

int main(int argc, char** argv) {
  try {
    return paddle_like::bench::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "comm_bench: %s\n", e.what());
    return 1;
  }
}
