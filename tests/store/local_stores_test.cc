// HashStore (threads), FileStore (processes sharing a file) and PrefixStore over both.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "phi/core/distributed/store/file_store.h"
#include "phi/core/distributed/store/hash_store.h"
#include "phi/core/distributed/store/prefix_store.h"
#include "tests/harness/multiprocess.h"
#include "tests/store/store_conformance.h"
#include "tests/store/store_test_util.h"

namespace paddle_like {
namespace testing {
namespace {

using phi::distributed::FileStore;
using phi::distributed::HashStore;
using phi::distributed::PrefixStore;
using std::chrono::milliseconds;

TEST(HashStoreTest, AllOps) {
  HashStore store(std::chrono::seconds(5));
  ExerciseStore(store, "hash", /*exclusive=*/true);
}

TEST(HashStoreTest, ThreadsAddExactlyAndWaitWakesOnSet) {
  HashStore store(std::chrono::seconds(10));
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) store.add("n", 1);
    });
  }
  auto t0 = std::chrono::steady_clock::now();
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(200));
    store.set("late", "x");
  });
  EXPECT_EQ(store.get_string("late"), "x");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  setter.join();
  for (auto& t : threads) t.join();
  EXPECT_EQ(store.add("n", 0), 8000);
}

TEST(PrefixStoreTest, AllOpsOverHashStoreAndIsolation) {
  auto base = std::make_shared<HashStore>(std::chrono::seconds(5));
  PrefixStore a("a", base), b("b", base);
  ExerciseStore(a, "ops", /*exclusive=*/true);
  a.set("k", "in-a");
  b.set("k", "in-b");
  EXPECT_EQ(a.get_string("k"), "in-a");
  EXPECT_EQ(b.get_string("k"), "in-b");
  EXPECT_EQ(base->get_string("a/k"), "in-a");
  EXPECT_FALSE(b.check({"ops/str"}));
  // Nested prefixes compose.
  PrefixStore inner("inner", std::make_shared<PrefixStore>("outer", base));
  inner.set("x", "1");
  EXPECT_EQ(base->get_string("outer/inner/x"), "1");
}

TEST(FileStoreTest, AllOpsSingleProcess) {
  ScopedTempFile file("single");
  FileStore store(file.path(), std::chrono::seconds(5));
  ExerciseStore(store, "file", /*exclusive=*/true);
  // A second handle on the same file sees everything.
  FileStore other(file.path(), std::chrono::seconds(5));
  EXPECT_EQ(other.get_string("file/log"), "abcd");
  EXPECT_EQ(other.num_keys(), store.num_keys());
}

TEST(FileStoreTest, ProcessesShareOneFile) {
  ScopedTempFile file("multi");
  const std::string& path = file.path();
  constexpr int kRanks = 8, kAdds = 100;
  RunRanks(kRanks, [path](const RankContext& ctx) {
    FileStore store(path, std::chrono::seconds(20));
    ExerciseStore(store, "rank" + std::to_string(ctx.rank), /*exclusive=*/false);
    for (int i = 0; i < kAdds; ++i) store.add("counter", 1);
    store.append("members", {static_cast<uint8_t>('a' + ctx.rank)});
    store.set("done/" + std::to_string(ctx.rank), "1");
    std::vector<std::string> keys;
    for (int r = 0; r < ctx.world_size; ++r) keys.push_back("done/" + std::to_string(r));
    store.wait(keys);  // woken by other processes' writes
    EXPECT_EQ(store.add("counter", 0), kRanks * kAdds);
    auto members = store.get_string("members");
    EXPECT_EQ(members.size(), static_cast<size_t>(kRanks)) << members;
    PrefixStore group("g", std::make_shared<FileStore>(path, std::chrono::seconds(20)));
    group.set("r" + std::to_string(ctx.rank), "x");
  });
  FileStore check(path, milliseconds(500));
  PrefixStore group("g", std::make_shared<FileStore>(path, milliseconds(500)));
  for (int r = 0; r < kRanks; ++r) EXPECT_TRUE(group.check({"r" + std::to_string(r)}));
}

TEST(FileStoreTest, TornTailFromADeadWriterIsDropped) {
  ScopedTempFile file("torn");
  const std::string& path = file.path();
  {
    FileStore store(path, milliseconds(300));
    store.set("good", "1");
  }
  {  // A writer that died half-way through a record.
    FILE* f = std::fopen(path.c_str(), "ab");
    const char torn[] = {'S', 10, 0, 0, 0, 'p', 'a'};
    std::fwrite(torn, 1, sizeof(torn), f);
    std::fclose(f);
  }
  FileStore store(path, milliseconds(300));
  EXPECT_EQ(store.get_string("good"), "1");
  store.set("after", "2");  // truncates the torn tail, then appends
  FileStore fresh(path, milliseconds(300));
  EXPECT_EQ(fresh.get_string("after"), "2");
  EXPECT_EQ(fresh.num_keys(), 2);
}

}  // namespace
}  // namespace testing
}  // namespace paddle_like
