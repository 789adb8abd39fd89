// paddle_like::dist on a group whose only backend is NCCL (world size 1, one device): object
// collectives staged through device memory as the seed stages them, pg_options reaching
// ProcessGroupNCCL (a high-priority comm stream), and the host-blocking NCCL barrier. Needs a
// device; skips without one (tools/gpu_check.sh runs it on a machine that has one).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "distributed/process_group_options.h"
#include "dist_gpu_test_util.h"
#include "gpu_test_util.h"
#include "paddle_like/dist/distributed.h"
#include "paddle_like/dist/object_collectives.h"
#include "phi/core/cuda_stream.h"

namespace paddle_like {
namespace testing {
namespace {


TEST(DistOnNccl, ObjectCollectivesStageThroughTheDevice) {
  PADDLE_LIKE_REQUIRE_GPU();
  InitNcclWorldOfOne();
  std::vector<std::string> objs{"alpha", std::string(3000, 'x')};
  dist::broadcast_object_list(&objs, dist::GroupRank{0});
  ASSERT_EQ(objs.size(), 2u);
  EXPECT_EQ(objs[1], std::string(3000, 'x'));
  std::vector<int64_t> gathered;
  dist::all_gather_object(&gathered, int64_t{17});
  EXPECT_EQ(gathered, std::vector<int64_t>{17});
  std::string mine;
  dist::scatter_object_list(&mine, std::vector<std::string>{"only"}, 0);
  EXPECT_EQ(mine, "only");
  dist::destroy_process_group();
}

TEST(DistOnNccl, PgOptionsGiveAHighPriorityCommStream) {
  PADDLE_LIKE_REQUIRE_GPU();
  InitNcclWorldOfOne();
  auto o = std::make_shared<distributed::ProcessGroupNCCLOptions>();
  o->is_high_priority_stream = true;
  dist::NewGroupOptions go;
  go.pg_options = o;
  go.group_desc = "high priority";
  auto g = dist::new_group({0}, go);
  auto* pg = g->backend_for("cuda");
  auto* stream =
      dynamic_cast<phi::CudaStream*>(pg->GetDeviceContext(phi::GPUPlace(0), false)->stream());
  ASSERT_NE(stream, nullptr);
  int priority = 0, least = 0, greatest = 0;
  PHI_CUDA_CHECK(cudaStreamGetPriority(stream->raw(), &priority));
  PHI_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  EXPECT_EQ(priority, greatest);
  dist::barrier({g, false}, {0});  // the host waits for the device barrier
  dist::destroy_process_group();
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
