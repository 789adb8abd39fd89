// The backend factory: built-in backends, case-insensitive names, a user's backend, and
// typed errors for unknown or duplicate names; a group created through it works across
// real processes.
#include <gtest/gtest.h>

#include "distributed/backend_registry.h"
#include "distributed/process_group_gloo.h"
#include "phi/core/distributed/store/hash_store.h"
#include "tests/distributed/collective_test_util.h"
#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

using distributed::BackendOptions;
using distributed::BackendRegistry;

TEST(BackendRegistry, BuiltInsAreThereAndNamesIgnoreCase) {
  auto& registry = BackendRegistry::Instance();
  EXPECT_TRUE(registry.Has("gloo"));
  EXPECT_TRUE(registry.Has("GLOO"));
  EXPECT_EQ(registry.Devices("Gloo"), std::vector<std::string>{"cpu"});
#ifdef PADDLE_WITH_NCCL
  EXPECT_EQ(registry.Devices("NCCL"), std::vector<std::string>{"cuda"});
#else
  EXPECT_FALSE(registry.Has("nccl"));
#endif
}

TEST(BackendRegistry, UnknownAndDuplicateNamesAreTypedErrors) {
  auto& registry = BackendRegistry::Instance();
  try {
    registry.Create("tpu", BackendOptions{});
    ADD_FAILURE() << "an unknown backend was created";
  } catch (const phi::NotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find("No backend 'tpu'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("gloo"), std::string::npos) << e.what();
  }
  auto creator = [](const BackendOptions&) { return std::shared_ptr<distributed::ProcessGroup>(); };
  EXPECT_THROW(registry.Register("Gloo", creator, {"cpu"}), phi::InvalidArgumentError);
  EXPECT_THROW(registry.Register("", creator, {"cpu"}), phi::InvalidArgumentError);
  EXPECT_THROW(registry.Register("nodevices", creator, {}), phi::InvalidArgumentError);
}

TEST(BackendRegistry, AUsersBackendIsCreatedByName) {
  auto& registry = BackendRegistry::Instance();
  int created = 0;
  registry.Register("MyGloo",
                    [&created](const BackendOptions& o) -> std::shared_ptr<distributed::ProcessGroup> {
                      ++created;
                      return std::make_shared<distributed::ProcessGroupGloo>(
                          o.store, o.rank, o.size, o.gid, o.timeout);
                    },
                    {"CPU"});
  EXPECT_EQ(registry.Devices("mygloo"), std::vector<std::string>{"cpu"});
  BackendOptions o;
  o.store = std::make_shared<phi::distributed::HashStore>(std::chrono::seconds(10));
  o.gid = 31;
  auto group = registry.Create("MYGLOO", o);
  EXPECT_EQ(created, 1);
  EXPECT_EQ(group->GetBackendName(), "Gloo");
  EXPECT_EQ(group->GetSize(), 1);
}

TEST(BackendRegistry, AGroupCreatedByNameRunsAcrossProcesses) {
  RunRanks(3, [](const RankContext& ctx) {
    BackendOptions o;
    o.store = ctx.store;
    o.rank = ctx.rank;
    o.size = ctx.world_size;
    o.gid = 0;
    o.timeout = std::chrono::seconds(10);
    auto group = BackendRegistry::Instance().Create("gloo", o);
    DenseTensor t = MakeInput(DataType::INT64, 6, ctx.rank, ReduceOp::SUM);
    group->AllReduce(&t, t, {}, true);
    std::vector<Val> ref(6);
    for (int64_t i = 0; i < 6; ++i) ref[i] = ReduceRef(DataType::INT64, ReduceOp::SUM, 3, i, 1.0);
    ExpectClose(t, ref, "all-reduce on a group made by name");
  });
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
