// The MPI tests' harness: the processes are mpirun's, not forked. RunRanks(n, fn) runs fn in
// this process as rank OMPI_COMM_WORLD_RANK when the job has n ranks, and is skipped
// otherwise; ctest runs the executable under `mpirun -np N` for N = 1..4, so each world size
// of a matrix runs once. Rank 0 hosts the store (on a free port it sends to the others with
// MPI_Bcast); every RunRanks call gets a fresh prefix of it, so the groups of one test never
// see another's keys.
#include <mpi.h>

#include <cstdlib>
#include <memory>

#include <gtest/gtest.h>

#include "paddle_like/dist/distributed.h"
#include "phi/core/distributed/mpi_comm_context.h"
#include "phi/core/distributed/store/prefix_store.h"
#include "phi/core/distributed/store/tcp_store.h"
#include "phi/core/distributed/store/tcp_store_server.h"
#include "tests/harness/multiprocess.h"
#include "tests/mpi/mpi_test_util.h"

namespace paddle_like {
namespace testing {
namespace {

std::shared_ptr<phi::distributed::Store> g_store;
std::shared_ptr<phi::distributed::Store> g_run_store;
int g_port = 0;
int g_runs = 0;

}  // namespace

std::shared_ptr<phi::distributed::Store> MpiTestStore() { return g_store; }
std::shared_ptr<phi::distributed::Store> CurrentRunStore() { return g_run_store; }
int MpiTestStorePort() { return g_port; }

std::string ChildResult::Describe() const {
  return "rank " + std::to_string(rank) + ": exit code " + std::to_string(exit_code);
}

std::vector<ChildResult> SpawnRanks(int, const std::function<void(const RankContext&)>&,
                                    const SpawnOptions&) {
  ADD_FAILURE() << "SpawnRanks forks processes: not available in the MPI tests";
  return {};
}

void RunRanks(int world_size, const std::function<void(const RankContext&)>& fn,
              const SpawnOptions&) {
  const int run = g_runs++;  // advanced on every rank, run or skipped, so prefixes agree
  const int mpi_size = phi::distributed::MpiWorldSize();
  if (world_size != mpi_size) {
    GTEST_SKIP() << "this case needs " << world_size << " MPI ranks; the job has " << mpi_size;
  }
  RankContext ctx;
  ctx.rank = phi::distributed::MpiWorldRank();
  ctx.world_size = mpi_size;
  ctx.host = "127.0.0.1";
  ctx.port = g_port;
  ctx.store = std::make_shared<phi::distributed::PrefixStore>("run" + std::to_string(run),
                                                               g_store);
  g_run_store = ctx.store;
  try {
    fn(ctx);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "rank " << ctx.rank << " raised: " << e.what();
  }
  // A case that raised before destroy_process_group (the fork harness's process ends
  // there; this one goes on to the next case).
  if (dist::is_initialized()) {
    try {
      dist::destroy_process_group();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "destroy_process_group after the case: " << e.what();
    }
  }
  g_run_store.reset();
  // The next case starts together on every rank (its groups' creation waits otherwise).
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace testing
}  // namespace paddle_like

#if defined(__SANITIZE_ADDRESS__)
// OpenMPI's libraries have no frame pointers: ASan's fast unwinder stops in them, and the
// leaks they keep until exit (tests/sanitizers/lsan.supp) could not be matched by library.
// ASAN_OPTIONS from the environment still applies on top of this.
extern "C" const char* __asan_default_options() { return "fast_unwind_on_malloc=0"; }
#endif

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  phi::distributed::EnsureMpiInitialized();
  const int rank = phi::distributed::MpiWorldRank();
  std::unique_ptr<phi::distributed::TCPStoreServer> server;
  int port = 0;
  if (rank == 0) {
    server = std::make_unique<phi::distributed::TCPStoreServer>();
    server->Start("127.0.0.1", 0);
    port = server->port();
  }
  MPI_Bcast(&port, 1, MPI_INT, 0, MPI_COMM_WORLD);
  paddle_like::testing::g_port = port;
  phi::distributed::TCPStoreOptions so;
  so.host = "127.0.0.1";
  so.port = static_cast<uint16_t>(port);
  so.timeout = std::chrono::seconds(60);
  paddle_like::testing::g_store = std::make_shared<phi::distributed::TCPStore>(so);
  // env:// inside a test joins this server; rank and size come from OpenMPI's variables.
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  setenv("PADDLE_STORE_HOSTED", "1", 1);
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  const int rc = RUN_ALL_TESTS();
  // Rank 0's server stays until every rank is done with the store.
  MPI_Barrier(MPI_COMM_WORLD);
  paddle_like::testing::g_store.reset();
  server.reset();
  return rc;
}
