// What only the MPI backend has: start-up from mpirun's variables, the backend strings,
// subgroups as MPI communicators of their own, timeouts and aborts as typed errors, and a
// rank that dies (mpi_rank_dies.sh runs that case; it ends the job).
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

#include "distributed/process_group_mpi.h"
#include "paddle_like/dist/distributed.h"
#include "phi/core/distributed/mpi_comm_context.h"
#include "phi/core/distributed/store/prefix_store.h"
#include "phi/core/flags.h"
#include "tests/distributed/collective_test_util.h"
#include "tests/harness/multiprocess.h"
#include "tests/mpi/mpi_test_util.h"

namespace paddle_like {
namespace testing {

void InitMpi(std::chrono::milliseconds timeout) {
  dist::InitOptions o;
  o.backend = "mpi";
  o.store = CurrentRunStore();
  o.rank = phi::distributed::MpiWorldRank();
  o.world_size = phi::distributed::MpiWorldSize();
  o.timeout = timeout;
  dist::init_process_group(o);
}

namespace {

using distributed::AllreduceOptions;
using distributed::ProcessGroupMPI;

// Element i of the sum over `ranks` of (rank + 1) * (i + 1).
std::vector<Val> SumRef(const std::vector<int>& ranks, int64_t n) {
  std::vector<Val> ref(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int r : ranks) ref[i].re += (r + 1) * (i + 1);
  }
  return ref;
}

DenseTensor Filled(int rank, int64_t n) {
  DenseTensor t(phi::CPUPlace(), DataType::FLOAT32, phi::DDim({n}));
  for (int64_t i = 0; i < n; ++i) SetElem(&t, i, Val{double((rank + 1) * (i + 1)), 0});
  return t;
}

class MpiBackend : public ::testing::TestWithParam<int> {};

// Saves an environment variable and unsets it for the scope.
class UnsetEnv {
 public:
  explicit UnsetEnv(const char* name) : name_(name) {
    const char* v = std::getenv(name);
    if (v != nullptr) saved_ = v, had_ = true;
    unsetenv(name);
  }
  ~UnsetEnv() {
    if (had_) setenv(name_, saved_.c_str(), 1);
  }

 private:
  const char* name_;
  std::string saved_;
  bool had_ = false;
};

// env:// under mpirun as a user starts it: no RANK or WORLD_SIZE (the harness unset them)
// and no MASTER_ADDR / MASTER_PORT: mpirun's variables give the ranks and rank 0 hosts a
// store whose address MPI carries. "mpi" and "cpu:mpi".
TEST_P(MpiBackend, InitProcessGroupFromMpirunVariables) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    ASSERT_TRUE(dist::is_mpi_available());
    UnsetEnv addr("MASTER_ADDR"), port("MASTER_PORT"), hosted("PADDLE_STORE_HOSTED");
    EXPECT_TRUE(phi::distributed::MpiJobWithoutStoreAddress());
    dist::InitOptions o;
    o.backend = "mpi";
    o.timeout = std::chrono::seconds(20);
    dist::init_process_group(o);
    EXPECT_EQ(dist::get_rank(), ctx.rank);
    EXPECT_EQ(dist::get_world_size(), ctx.world_size);
    EXPECT_EQ(dist::get_backend_config(), "cpu:mpi");
    const int64_t n = 1000;
    DenseTensor t = Filled(ctx.rank, n);
    dist::all_reduce(&t);
    std::vector<int> all;
    for (int r = 0; r < ctx.world_size; ++r) all.push_back(r);
    ExpectClose(t, SumRef(all, n), "all_reduce on mpi");
    // A subgroup through new_group with the spelled-out config: its own MPI communicator.
    if (ctx.world_size < 2) {
      dist::destroy_process_group();
      return;
    }
    std::vector<int> odd;
    for (int r = 1; r < ctx.world_size; r += 2) odd.push_back(r);
    dist::NewGroupOptions go;
    go.backend = "cpu:mpi";
    auto g = dist::new_group(odd, go);
    if (ctx.rank % 2 == 1) {
      DenseTensor s = Filled(ctx.rank, n);
      dist::CollectiveOptions co;
      co.group = g;
      dist::all_reduce(&s, ReduceOp::SUM, co);
      ExpectClose(s, SumRef(odd, n), "all_reduce on an odd-rank subgroup");
    }
    dist::barrier();
    dist::destroy_process_group();
  });
}

// Two groups alive at once, a subgroup of the last ranks numbered from 0, ops interleaved.
TEST_P(MpiBackend, SubgroupBesideTheWorld) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    const int ws = ctx.world_size;
    auto world = std::make_shared<ProcessGroupMPI>(ctx.store, ctx.rank, ws, 0,
                                                   std::chrono::seconds(20));
    std::shared_ptr<ProcessGroupMPI> tail;
    std::vector<int> members;
    for (int r = ws / 2; r < ws; ++r) members.push_back(r);
    if (ctx.rank >= ws / 2) {
      tail = std::make_shared<ProcessGroupMPI>(
          std::make_shared<phi::distributed::PrefixStore>("tail", ctx.store), ctx.rank - ws / 2,
          static_cast<int>(members.size()), 1, std::chrono::seconds(20));
    }
    for (int k = 0; k < 3; ++k) {
      DenseTensor a = Filled(ctx.rank, 64 + k);
      world->AllReduce(&a, a, AllreduceOptions{}, true);
      std::vector<int> all;
      for (int r = 0; r < ws; ++r) all.push_back(r);
      ExpectClose(a, SumRef(all, 64 + k), "world all_reduce");
      if (tail) {
        DenseTensor b = Filled(ctx.rank, 32);
        tail->AllReduce(&b, b, AllreduceOptions{}, false)->Wait();
        ExpectClose(b, SumRef(members, 32), "subgroup all_reduce");
      }
    }
  });
}

// Large all-reduces run in segments; with tiny segments (set before the group exists: the
// communicator reads them once) every dtype, op, in-place and out-of-place, and a count that
// is not a multiple of the segment still reduce exactly.
TEST_P(MpiBackend, SegmentedAllReduceEqualsTheReference) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    FLAGS_mpi_allreduce_segment_bytes = 64;
    FLAGS_mpi_allreduce_segment_above = 256;
    ProcessGroupMPI pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(20));
    FLAGS_mpi_allreduce_segment_bytes = int64_t{1} << 20;
    FLAGS_mpi_allreduce_segment_above = int64_t{16} << 20;
    const int64_t n = 1001;  // > 256 bytes in every dtype: segmented
    int variant = 0;
    for (DataType dt : AllDtypes()) {
      for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::MAX, ReduceOp::PREMUL_SUM}) {
        if (!OpSupported(op, dt)) continue;
        const double premul = phi::IsIntegral(dt) ? 3.0 : 0.5;
        DenseTensor in = MakeInput(dt, n, ctx.rank, op);
        const bool in_place = variant++ % 2 == 0;
        DenseTensor out = in_place ? in : DenseTensor();
        pg.AllReduce(&out, in, AllreduceOptions{op, premul}, true);
        std::vector<Val> ref(n);
        for (int64_t i = 0; i < n; ++i) ref[i] = ReduceRef(dt, op, ctx.world_size, i, premul);
        ExpectClose(out, ref, std::string("segmented allreduce ") + phi::DataTypeToString(dt) +
                                  "/" + phi::distributed::ReduceOpToString(op));
      }
    }
  });
}

// A receive nobody answers ends at the group's timeout as a Timeout, and leaves the
// communicator broken (Unavailable at once); an aborted group raises at once too.
// The native MPI_Alltoallv: pair sizes that disagree are an InvalidArgument on every rank
// before anything moves, and the group stays usable (the next all-to-all is right).
TEST_P(MpiBackend, AllToAllPairSizesThatDisagreeAreRaisedOnEveryRank) {
  if (GetParam() < 2) GTEST_SKIP() << "needs a peer";
  RunRanks(GetParam(), [](const RankContext& ctx) {
    const int ws = ctx.world_size;
    ProcessGroupMPI pg(ctx.store, ctx.rank, ws, 0, std::chrono::seconds(20));
    std::vector<int64_t> splits(ws, 2);
    DenseTensor in = Filled(ctx.rank, 2 * ws), out = Filled(0, 2 * ws);
    std::vector<int64_t> wrong = splits;
    DenseTensor wrong_out = out;
    if (ctx.rank == 1) {  // rank 1 expects 3 elements from rank 0, which sends 2
      wrong[0] = 3;
      wrong_out = Filled(0, 2 * ws + 1);
    }
    try {
      pg.AllToAll(&wrong_out, in, wrong, splits, true, false);
      ADD_FAILURE() << "rank " << ctx.rank << ": the disagreement was not raised";
    } catch (const phi::InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("split sizes disagree"), std::string::npos)
          << e.what();
      if (ctx.rank == 1) {
        EXPECT_NE(std::string(e.what()).find("rank 0 sends 2 elements to rank 1, which expects 3"),
                  std::string::npos)
            << e.what();
      }
    }
    // Still usable: an agreed all-to-all moves every rank's block r to rank r.
    pg.AllToAll(&out, in, splits, splits, true, false);
    for (int r = 0; r < ws; ++r) {
      for (int k = 0; k < 2; ++k) {
        // Rank r's element at 2 * rank + k is (r + 1) * (2 * rank + k + 1).
        EXPECT_DOUBLE_EQ(GetElem(out, 2 * r + k).re,
                         double((r + 1) * (2 * ctx.rank + k + 1)))
            << "from rank " << r;
      }
    }
  });
}

TEST_P(MpiBackend, TimeoutAndAbortAreTypedErrors) {
  RunRanks(GetParam(), [](const RankContext& ctx) {
    FLAGS_comm_watchdog = false;  // this case wants the error, not the watchdog's abort
    if (ctx.world_size >= 2) {
      ProcessGroupMPI pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::milliseconds(800));
      if (ctx.rank == 1) {
        DenseTensor t(phi::CPUPlace(), DataType::FLOAT32, phi::DDim({4}));
        const auto start = std::chrono::steady_clock::now();
        EXPECT_THROW(pg.Recv(&t, 0, true)->Wait(), phi::TimeoutError);
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
        EXPECT_THROW(pg.Recv(&t, 0, true)->Wait(), phi::UnavailableError);
      }
    }
    ProcessGroupMPI pg(std::make_shared<phi::distributed::PrefixStore>("abort", ctx.store),
                       ctx.rank, ctx.world_size, 2, std::chrono::seconds(20));
    pg.AbortComm("test");
    DenseTensor t = Filled(ctx.rank, 4);
    EXPECT_ANY_THROW(pg.AllReduce(&t, t, AllreduceOptions{}, true)->Wait());
    FLAGS_comm_watchdog = true;
  });
}

// Point-to-point ops in flight cost no thread each: the MPI engine posts them (MPI_Isend /
// MPI_Irecv) and one progress thread per process completes them all. Per process the threads
// are the test's and MPI's own, plus per group its comm stream and future-completion thread,
// plus 1 MPI progress thread, whatever number of sends, receives and tags are in flight: here
// 4 groups with 50 distinct tags each, 200 receives pending at once, then 200 sends, in a
// ring. The old design ran each (peer, tag, direction) on a thread of its own: 400 more.
TEST_P(MpiBackend, PointToPointInFlightAddsNoThreads) {
  if (GetParam() < 2) GTEST_SKIP() << "needs a peer";
  RunRanks(GetParam(), [](const RankContext& ctx) {
    const int ws = ctx.world_size, next = (ctx.rank + 1) % ws, prev = (ctx.rank + ws - 1) % ws;
    std::vector<std::shared_ptr<ProcessGroupMPI>> groups;
    for (int g = 0; g < 4; ++g) {
      groups.push_back(std::make_shared<ProcessGroupMPI>(
          std::make_shared<phi::distributed::PrefixStore>("g" + std::to_string(g), ctx.store),
          ctx.rank, ws, 10 + g, std::chrono::seconds(30)));
      // Its streams exist, and the progress thread: a receive posted before its message is
      // sent (an op done when posted never reaches the thread).
      DenseTensor out = Filled(ctx.rank, 1), in = Filled(-1, 1);
      auto r = groups[g]->Recv(&in, prev, false);
      groups[g]->Barrier()->Wait();
      groups[g]->Send(out, next, false)->Wait();
      r->Wait();
    }
    const int before = ThreadsOfThisProcess();
    constexpr int kTags = 50;
    std::vector<DenseTensor> in, out;
    for (int i = 0; i < 4 * kTags; ++i) {
      in.push_back(Filled(-1, 3));
      out.push_back(Filled(1000 * ctx.rank + i, 3));
    }
    std::vector<ProcessGroupMPI::TaskPtr> recvs, sends;
    for (int g = 0; g < 4; ++g) {
      for (int tag = 0; tag < kTags; ++tag) {
        recvs.push_back(groups[g]->Recv(&in[g * kTags + tag], prev, 0, -1, false, false, {tag}));
      }
    }
    EXPECT_LE(ThreadsOfThisProcess(), before) << "200 pending receives started threads";
    for (int g = 3; g >= 0; --g) {  // groups and tags in the opposite order of the receives
      for (int tag = kTags - 1; tag >= 0; --tag) {
        sends.push_back(groups[g]->Send(out[g * kTags + tag], next, 0, -1, false, false, {tag}));
      }
    }
    EXPECT_LE(ThreadsOfThisProcess(), before) << "200 sends in flight started threads";
    for (auto& t : sends) t->Wait();
    for (auto& t : recvs) t->Wait();
    for (int i = 0; i < 4 * kTags; ++i) {  // Filled: element j is (value + 1) * (j + 1)
      const double v = 1000.0 * prev + i + 1;
      ExpectClose(in[i], {Val{v, 0}, Val{2 * v, 0}, Val{3 * v, 0}}, "message " + std::to_string(i));
    }
  });
}

// Run by mpi_rank_dies.sh only (PADDLE_MPI_RANK_DIES=1): the last rank leaves the job with
// _exit in the middle of a loop of all-reduces. OpenMPI's mpirun then ends the whole job
// (the survivors are killed, mpirun exits non-zero and says which rank exited); the script
// checks that this happens well before the group's timeout.
TEST(MpiRankDies, TheJobEndsWithoutWaitingForTheTimeout) {
  if (std::getenv("PADDLE_MPI_RANK_DIES") == nullptr) {
    GTEST_SKIP() << "run by tests/mpi/mpi_rank_dies.sh (it ends the job)";
  }
  const int ws = phi::distributed::MpiWorldSize();
  RunRanks(ws, [](const RankContext& ctx) {
    ProcessGroupMPI pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(60));
    for (int k = 0;; ++k) {
      if (k == 50 && ctx.rank == ctx.world_size - 1) {
        std::fprintf(stderr, "rank %d exits now\n", ctx.rank);
        _exit(7);
      }
      DenseTensor t = Filled(ctx.rank, 1024);
      pg.AllReduce(&t, t, AllreduceOptions{}, true);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, MpiBackend, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "world" + std::to_string(i.param);
                         });

}  // namespace
}  // namespace testing
}  // namespace paddle_like
