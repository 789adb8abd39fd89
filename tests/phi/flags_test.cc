// Flags: FLAGS_<name> environment variables are applied by phi::SetFlagsFromEnv().
#include <gtest/gtest.h>

#include <cstdlib>

#include "phi/core/flags.h"

namespace {

TEST(FlagsTest, DefaultsAreTheDocumentedOnes) {
  // Each TEST runs in its own process; ctest does not set FLAGS_* for the phi tests.
  if (std::getenv("FLAGS_default_group_timeout_s") == nullptr) {
    EXPECT_EQ(FLAGS_default_group_timeout_s, 1800);
  }
  if (std::getenv("FLAGS_max_pending_stream_frees") == nullptr) {
    EXPECT_EQ(FLAGS_max_pending_stream_frees, 4096);
  }
  if (std::getenv("FLAGS_comm_blocking_wait") == nullptr) {
    EXPECT_FALSE(FLAGS_comm_blocking_wait);
  }
}

TEST(FlagsTest, SetFlagsFromEnvAppliesEnvironmentVariables) {
  ASSERT_EQ(setenv("FLAGS_comm_blocking_wait", "true", 1), 0);
  ASSERT_EQ(setenv("FLAGS_async_trace_count", "17", 1), 0);
  ASSERT_EQ(setenv("FLAGS_default_group_timeout_s", "42", 1), 0);
  ASSERT_EQ(setenv("FLAGS_max_pending_stream_frees", "9", 1), 0);
  ASSERT_EQ(setenv("FLAGS_benchmark", "1", 1), 0);
  int n = phi::SetFlagsFromEnv();
  EXPECT_GE(n, 5);
  EXPECT_TRUE(FLAGS_comm_blocking_wait);
  EXPECT_EQ(FLAGS_async_trace_count, 17);
  EXPECT_EQ(FLAGS_default_group_timeout_s, 42);
  EXPECT_EQ(FLAGS_max_pending_stream_frees, 9);
  EXPECT_TRUE(FLAGS_benchmark);

  // Changing the environment and calling again re-applies.
  ASSERT_EQ(setenv("FLAGS_comm_blocking_wait", "false", 1), 0);
  phi::SetFlagsFromEnv();
  EXPECT_FALSE(FLAGS_comm_blocking_wait);
}

TEST(FlagsTest, InvalidValueIsIgnoredAndNotCounted) {
  int before = FLAGS_async_trace_count;
  for (const char* name : {"FLAGS_comm_blocking_wait", "FLAGS_async_trace_count",
                           "FLAGS_default_group_timeout_s", "FLAGS_max_pending_stream_frees",
                           "FLAGS_benchmark", "FLAGS_nccl_blocking_wait",
                           "FLAGS_enable_async_trace", "FLAGS_eager_communication_connection"}) {
    unsetenv(name);
  }
  int baseline = phi::SetFlagsFromEnv();  // FLAGS_* the outer environment may set
  ASSERT_EQ(setenv("FLAGS_async_trace_count", "not-a-number", 1), 0);
  EXPECT_EQ(phi::SetFlagsFromEnv(), baseline);
  EXPECT_EQ(FLAGS_async_trace_count, before);
  unsetenv("FLAGS_async_trace_count");
}

TEST(FlagsTest, FlagsAreRegisteredWithGflags) {
  for (const char* name : {"comm_blocking_wait", "nccl_blocking_wait", "enable_async_trace",
                           "async_trace_count", "eager_communication_connection", "benchmark",
                           "default_group_timeout_s", "max_pending_stream_frees"}) {
    gflags::CommandLineFlagInfo info;
    EXPECT_TRUE(gflags::GetCommandLineFlagInfo(name, &info)) << name;
  }
}

}  // namespace
