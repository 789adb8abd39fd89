// The communicator registry and group-id map: keys carry the backend, a communicator is
// never shared by two live groups, a found one must have the asked rank and size, lookups
// are typed, one group's destruction never erases another's communicator, a taken gid
// cannot be inserted twice, and Task::Wait() defaults to the group's timeout.
#include <gtest/gtest.h>

#include "distributed/process_group_gloo.h"
#include "phi/core/distributed/comm_context_manager.h"
#include "phi/core/distributed/gloo_comm_context.h"
#include "phi/core/distributed/store/hash_store.h"
#include "tests/distributed/collective_test_util.h"
#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {
namespace {

using distributed::ProcessGroupGloo;
using phi::distributed::CommContextManager;
using Clock = std::chrono::steady_clock;

std::shared_ptr<phi::distributed::Store> LocalStore() {
  return std::make_shared<phi::distributed::HashStore>(std::chrono::seconds(10));
}

void AllReduceOnce(ProcessGroupGloo* pg) {
  DenseTensor t = MakeInput(DataType::FLOAT32, 4, 0, ReduceOp::SUM);
  pg->AllReduce(&t, t, {}, true);
}

TEST(CommRegistry, KeysCarryTheBackend) {
  EXPECT_EQ(CommContextManager::KeyOf("gloo", 3), "gloo/3");
  EXPECT_NE(CommContextManager::KeyOf("gloo", 3), CommContextManager::KeyOf("nccl", 3));
}

TEST(CommRegistry, TwoLiveGroupsCannotShareAGidAndDestroyingOneKeepsTheOthers) {
  auto store = LocalStore();
  auto a = std::make_unique<ProcessGroupGloo>(store, 0, 1, 21, std::chrono::seconds(10));
  AllReduceOnce(a.get());
  ProcessGroupGloo b(store, 0, 1, 21, std::chrono::seconds(10));
  try {
    AllReduceOnce(&b);
    ADD_FAILURE() << "a second live group shared gid 21's communicator";
  } catch (const phi::PreconditionNotMetError& e) {
    EXPECT_NE(std::string(e.what()).find("another live process group"), std::string::npos)
        << e.what();
  }
  a.reset();  // a's communicator goes; b may now create its own
  AllReduceOnce(&b);
  auto* bs = CommContextManager::Instance().Get(CommContextManager::KeyOf("gloo", 21));
  ASSERT_NE(bs, nullptr);
  {
    ProcessGroupGloo c(store, 0, 1, 21, std::chrono::seconds(10));
    EXPECT_THROW(AllReduceOnce(&c), phi::PreconditionNotMetError);
  }  // c's destruction must not erase b's communicator
  EXPECT_EQ(CommContextManager::Instance().Get(CommContextManager::KeyOf("gloo", 21)), bs);
  AllReduceOnce(&b);
}

class OtherEngine : public phi::distributed::CommContext {
 public:
  OtherEngine() : CommContext(0, 1) {}
  std::string BackendName() const override { return "Other"; }
  void AllReduce(const void*, void*, int64_t, phi::DataType, const phi::distributed::Reduction&,
                 phi::Stream*) override {}
  void Broadcast(const void*, void*, int64_t, phi::DataType, int, phi::Stream*) override {}
  void Reduce(const void*, void*, int64_t, phi::DataType, const phi::distributed::Reduction&,
              int, phi::Stream*) override {}
  void AllGather(const void*, void*, int64_t, phi::DataType, phi::Stream*) override {}
  void ReduceScatter(const void*, void*, int64_t, phi::DataType,
                     const phi::distributed::Reduction&, phi::Stream*) override {}
  void Send(const void*, int64_t, phi::DataType, int, int, phi::Stream*) override {}
  void Recv(void*, int64_t, phi::DataType, int, int, phi::Stream*, int*) override {}
  void GroupStart() override {}
  void GroupEnd() override {}
};

TEST(CommRegistry, LookupsAreTypedAndCheckRankAndSize) {
  auto& manager = CommContextManager::Instance();
  // A Gloo communicator for rank 0 of 2 (creation waits for no one).
  manager.Set("gloo/22", phi::distributed::CreateGlooCommContext(LocalStore(), 22, 0, 2, {}));
  EXPECT_NE(manager.GetAs<phi::distributed::CommContext>("gloo/22"), nullptr);
  try {
    manager.GetAs<OtherEngine>("gloo/22");
    ADD_FAILURE() << "a Gloo communicator was handed out as another engine's";
  } catch (const phi::InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("a Gloo one"), std::string::npos) << e.what();
  }
  EXPECT_EQ(manager.GetAs<OtherEngine>("gloo/404"), nullptr);
  ProcessGroupGloo pg(LocalStore(), 0, 1, 22, std::chrono::seconds(10));
  try {
    AllReduceOnce(&pg);
    ADD_FAILURE() << "a communicator of another size was reused";
  } catch (const phi::PreconditionNotMetError& e) {
    EXPECT_NE(std::string(e.what()).find("is rank 0 of 2, but the group asks for rank 0 of 1"),
              std::string::npos)
        << e.what();
  }
  manager.Erase("gloo/22");
}

TEST(CommRegistry, ATakenGroupIdCannotBeInsertedTwice) {
  auto first = ProcessGroupGloo::CreateProcessGroupGloo(LocalStore(), 0, 1, 23);
  EXPECT_THROW(ProcessGroupGloo::CreateProcessGroupGloo(LocalStore(), 0, 1, 23),
               phi::PreconditionNotMetError);
  distributed::ProcessGroupIdMap::GetInstance().Erase(23);
}

TEST(CommRegistry, TaskWaitDefaultsToTheGroupTimeout) {
  RunRanks(2, [](const RankContext& ctx) {
    ProcessGroupGloo pg(ctx.store, ctx.rank, ctx.world_size, 0, std::chrono::seconds(1));
    pg.Barrier()->Wait();
    if (ctx.rank == 1) {
      ctx.store->wait({"rank0_done"}, std::chrono::seconds(30));
      return;  // never joins the all-reduce
    }
    DenseTensor t = MakeInput(DataType::FLOAT32, 4, 0, ReduceOp::SUM);
    auto task = pg.AllReduce(&t, t, {}, /*sync_op=*/false);
    auto start = Clock::now();
    EXPECT_THROW(task->Wait(), phi::EnforceNotMet);  // no timeout given: the group's 1 s
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(6));
    ctx.store->set("rank0_done", "1");
  });
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
