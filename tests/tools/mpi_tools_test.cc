// The tools on the MPI backend: `launch --backend mpi` hands the job to mpirun, and
// comm_bench --backend mpi runs every collective correctly with the raw MPI_Allreduce
// baseline, the store found through MPI (no MASTER_ADDR).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/tools/tools_test_util.h"

namespace paddle_like {
namespace testing {
namespace {

#if defined(LAUNCH_BIN) && defined(COMM_BENCH_BIN) && defined(PADDLE_WITH_MPI)
const std::string kLaunch = LAUNCH_BIN;
const std::string kBench = COMM_BENCH_BIN;
#else
const std::string kLaunch, kBench;
#endif

TEST(MpiTools, LaunchBackendMpiRunsCommBenchOnEveryCollective) {
  if (kBench.empty()) GTEST_SKIP() << "needs launch, comm_bench and an MPI build";
#if defined(__SANITIZE_ADDRESS__)
  // OpenMPI's leaks at exit are matched by library (tests/sanitizers/lsan.supp), which needs
  // whole stacks through its frame-pointer-less code.
  const char* asan = std::getenv("ASAN_OPTIONS");
  setenv("ASAN_OPTIONS",
         (std::string(asan ? asan : "") + ":fast_unwind_on_malloc=0").c_str(), 1);
#endif
  TempDir dir;
  const std::string json = dir.path() + "/out.json";
  auto r = RunProc({kLaunch, "--backend", "mpi", "--nproc_per_node", "3", "--", kBench,
                    "--backend", "mpi", "-c", "all", "-b", "8", "-e", "4K", "-f", "16", "-n",
                    "3", "-w", "1", "-r", "1", "--baseline", "--json", json},
                   std::chrono::seconds(120));
  ASSERT_EQ(r.exit_code(), 0) << r.output;
  EXPECT_NE(r.output.find("launch: MPI job: mpirun -np 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("# Out of bounds values : 0 OK"), std::string::npos) << r.output;
  Json doc = ParseJson(ReadFile(json));
  EXPECT_EQ(doc["backend"].str, "MPI");
  EXPECT_EQ(doc["world_size"].num, 3);
  EXPECT_EQ(doc["wrong_total"].num, 0);
  for (const Json& row : doc["results"].arr) {
    if (row["op"].str == "allreduce") {
      const Json& oop = row["out_of_place"];
      ASSERT_EQ(oop["raw"].arr.size(), 1u) << "--baseline times MPI_Allreduce";
      EXPECT_GT(oop["raw"].arr[0]["median_us"].num, 0);
      EXPECT_EQ(oop["best_raw"].str, oop["raw"].arr[0]["name"].str);
    }
  }
}

TEST(MpiTools, LaunchBackendMpiRefusesWhatMpirunMustDo) {
  if (kLaunch.empty()) GTEST_SKIP() << "needs launch and an MPI build";
  auto r = RunProc({kLaunch, "--backend", "mpi", "--nnodes", "2", "--master_addr", "h",
                    "--master_port", "1", "--", "true"},
                   std::chrono::seconds(20));
  EXPECT_NE(r.exit_code(), 0);
  EXPECT_NE(r.output.find("start the job with mpirun yourself"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
