// DataParallel's helpers on device tensors (world size 1, NCCL, one device): the coalesced
// broadcast packs and unpacks on the device, GradBucket::set_buffer and the comm hooks keep
// the bucket on the device (the compression hooks cast on the host and reduce on the device).
// Needs a device; skips without one (tools/gpu_check.sh runs it where there is one).
#include <gtest/gtest.h>

#include <vector>

#include "dist_gpu_test_util.h"
#include "gpu_test_util.h"
#include "paddle_like/dist/distributed.h"
#include "paddle_like/parallel/data_parallel.h"
#include "paddle_like/parallel/grad_bucket.h"

namespace paddle_like {
namespace testing {
namespace {

phi::DenseTensor OnGpu(const std::vector<float>& v) {
  phi::DenseTensor out;
  phi::Copy(phi::DenseTensor::FromVector(v), phi::GPUPlace(0), &out);
  return out;
}

std::vector<float> Back(const phi::DenseTensor& t) {
  phi::DenseTensor host;
  phi::Copy(t, phi::CPUPlace(), &host);
  return std::vector<float>(host.data<float>(), host.data<float>() + host.numel());
}


TEST(DataParallelOnGpu, BroadcastCoalescedAndBucketHooksStayOnTheDevice) {
  PADDLE_LIKE_REQUIRE_GPU();
  InitNcclWorldOfOne();
  phi::DenseTensor a = OnGpu({1, 2, 3}), b = OnGpu({4, 5});
  BroadcastCoalesced({&a, &b}, 0, /*buffer_size=*/8, dist::world());  // several chunks
  EXPECT_EQ(Back(a), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(Back(b), (std::vector<float>{4, 5}));
  EXPECT_TRUE(a.place().is_gpu());

  phi::DenseTensor buffer = OnGpu({0.5f, -1.25f, 3.0f, 8.0f});
  GradBucket bucket(0, true, &buffer, {0, 2}, {2, 2}, {}, dist::world());
  bucket.set_buffer(phi::DenseTensor::FromVector(std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(Back(buffer), (std::vector<float>{1, 2, 3, 4}));
  comm_hooks::allreduce_hook({}, bucket)->wait();
  EXPECT_EQ(Back(buffer), (std::vector<float>{1, 2, 3, 4}));  // the average of one rank
  comm_hooks::fp16_compress_hook({}, bucket)->wait();
  EXPECT_EQ(Back(buffer), (std::vector<float>{1, 2, 3, 4}));  // exact in fp16
  EXPECT_TRUE(buffer.place().is_gpu());
  dist::destroy_process_group();
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
