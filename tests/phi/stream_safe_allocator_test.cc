// The stream-safe allocator: memory recorded on a busy stream is neither freed nor reused
// until the stream passes; EraseStream removes only the record it was given; the list of
// deferred frees stays bounded, and enforcing the bound cannot deadlock with stream jobs.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <chrono>
#include <algorithm>
#include <future>
#include <thread>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "phi/core/allocator.h"
#include "phi/core/cpu_stream.h"
#include "phi/core/flags.h"
#include "phi/core/stream_safe_allocator.h"
#include "tests/phi/phi_test_util.h"

namespace {

using phi::CpuWorkerStream;
using phi::memory::AllocatorStats;
using phi::memory::EraseStream;
using phi::memory::GetAllocator;
using phi::memory::RecordStream;
using phi_test::Gate;
using std::chrono::seconds;

constexpr size_t kBytes = 4096 + 64 * 3;  // a size no other allocation in the test uses

// A worker stream held busy until Open(): its first job waits at a gate, so whatever is
// recorded on it stays in use until then. The destructor opens the gate, so a failed
// assertion ends the test instead of hanging in the worker's join; the job owns a share of
// the gate because that join (in ~CpuWorkerStream) runs after this class's members are gone.
class HeldStream : public CpuWorkerStream {
 public:
  explicit HeldStream(std::string name) : CpuWorkerStream(std::move(name)) {
    Launch([gate = gate_] { gate->Wait(); });
  }
  ~HeldStream() override { Open(); }
  void Open() { gate_->Open(); }

 private:
  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
};

class StreamSafeAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    alloc_ = GetAllocator(phi::CPUPlace());
    saved_bound_ = FLAGS_max_pending_stream_frees;
  }
  void TearDown() override { FLAGS_max_pending_stream_frees = saved_bound_; }
  AllocatorStats Stats() { return alloc_->stats(); }
  // Stats once `s` has passed everything launched on it and its deferred frees are done.
  AllocatorStats StatsOnceIdle(const phi::Stream& s, seconds timeout = seconds(30)) {
    s.Synchronize(timeout);
    alloc_->ProcessPendingFrees();
    return Stats();
  }
  // Waits (on another thread, so a lock held by a waiting releaser fails the test instead
  // of hanging it) until `n` frees in all have been deferred.
  void WaitUntilDeferred(int64_t n) {
    auto seen = std::async(std::launch::async, [&] {
      return phi_test::PollUntil([&] { return alloc_->stats().frees_deferred >= n; },
                                 std::chrono::seconds(15));
    });
    phi_test::MustFinishWithin(seen, std::chrono::seconds(20),
                               "stats() while a release waits for the bound");
    ASSERT_TRUE(seen.get()) << "expected " << n << " deferred frees";
  }

  std::shared_ptr<phi::memory::StreamSafeAllocator> alloc_;
  int saved_bound_ = 0;
};

TEST_F(StreamSafeAllocatorTest, GetAllocatorIsProcessWideAndAllocatesUsableMemory) {
  EXPECT_EQ(GetAllocator(phi::CPUPlace()), alloc_);
  AllocatorStats before = Stats();
  auto a = phi::memory::Alloc(phi::CPUPlace(), 100);
  ASSERT_NE(a->ptr(), nullptr);
  EXPECT_EQ(a->size(), 100u);
  EXPECT_EQ(a->place(), phi::CPUPlace());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->ptr()) % 64, 0u);
  std::memset(a->ptr(), 0xab, 100);
  EXPECT_EQ(Stats().bytes_live, before.bytes_live + 100);
  a.reset();
  EXPECT_EQ(Stats().bytes_live, before.bytes_live);
  EXPECT_EQ(Stats().frees_deferred, before.frees_deferred) << "no stream record: freed at once";
}

TEST_F(StreamSafeAllocatorTest, RecordedOnBusyStreamIsNeitherFreedNorReusedUntilItPasses) {
  HeldStream s("busy");
  AllocatorStats before = Stats();
  auto a = alloc_->Allocate(kBytes);
  void* p = a->ptr();
  RecordStream(a, &s);
  a.reset();  // the last reference: the stream may still be using the block

  AllocatorStats deferred = Stats();
  EXPECT_EQ(deferred.frees_deferred, before.frees_deferred + 1);
  EXPECT_EQ(deferred.pending_frees, 1);
  EXPECT_EQ(deferred.deferred_frees_completed, before.deferred_frees_completed);
  EXPECT_EQ(deferred.bytes_live, before.bytes_live + static_cast<int64_t>(kBytes))
      << "the block is still live while the stream may use it";

  auto b = alloc_->Allocate(kBytes);
  EXPECT_NE(b->ptr(), p) << "a block the stream may still use was handed out again";

  s.Open();
  AllocatorStats after = StatsOnceIdle(s);
  EXPECT_EQ(after.deferred_frees_completed, before.deferred_frees_completed + 1);
  EXPECT_EQ(after.pending_frees, 0);
  EXPECT_EQ(after.bytes_live, before.bytes_live + static_cast<int64_t>(kBytes))  // b
      << "the deferred block returned";

  // The host cache is exact-size: the returned block serves the next request of its size.
  auto c = alloc_->Allocate(kBytes);
  EXPECT_EQ(c->ptr(), p);
}

TEST_F(StreamSafeAllocatorTest, RecordOnPassedStreamOrHostStreamDoesNotDefer) {
  CpuWorkerStream s("idle");
  phi::CpuHostStream host;
  AllocatorStats before = Stats();
  auto a = alloc_->Allocate(kBytes);
  void* p = a->ptr();
  s.Launch([] {});
  RecordStream(a, &s);
  auto host_record = RecordStream(a, &host);
  EXPECT_EQ(host_record.token, 0u) << "host-stream work is already done: no record";
  s.Synchronize(seconds(30));
  a.reset();
  AllocatorStats after = Stats();
  EXPECT_EQ(after.frees_deferred, before.frees_deferred);
  EXPECT_EQ(after.bytes_live, before.bytes_live);
  EXPECT_EQ(alloc_->Allocate(kBytes)->ptr(), p);
}

TEST_F(StreamSafeAllocatorTest, EraseStreamOfTheOnlyRecordFreesImmediately) {
  HeldStream s("busy");
  AllocatorStats before = Stats();
  auto a = alloc_->Allocate(kBytes);
  void* p = a->ptr();
  auto record = RecordStream(a, &s);
  EXPECT_EQ(record.stream_id, s.id());
  EXPECT_NE(record.token, 0u);
  EraseStream(a, record);
  a.reset();

  AllocatorStats after = Stats();
  EXPECT_EQ(after.frees_deferred, before.frees_deferred) << "no record left: no deferral";
  EXPECT_EQ(after.pending_frees, 0);
  EXPECT_EQ(after.bytes_live, before.bytes_live);
  auto again = alloc_->Allocate(kBytes);
  EXPECT_EQ(again->ptr(), p) << "freed at once, so reused while the stream is still blocked";
  EXPECT_FALSE(s.Query());
  s.Open();
  s.Synchronize(seconds(30));
}

// Two tasks record the same block on the same stream; the first task, seen complete,
// erases its record. The second (later) record must survive.
TEST_F(StreamSafeAllocatorTest, ErasingOneTasksTokenKeepsAnotherTasksLaterRecord) {
  HeldStream s("two-tasks");  // held by task 1's op
  Gate gate2;
  AllocatorStats before = Stats();
  auto a = alloc_->Allocate(kBytes);
  void* p = a->ptr();
  auto rec1 = RecordStream(a, &s);
  auto task1_end = s.CreateEvent();
  task1_end->Record(&s);
  s.Launch([&] { gate2.Wait(); });  // task 2's op, later on the same stream
  auto rec2 = RecordStream(a, &s);
  EXPECT_EQ(rec1.stream_id, rec2.stream_id);
  EXPECT_NE(rec1.token, rec2.token);

  s.Open();  // task 1 completes and erases its own record
  task1_end->Synchronize(seconds(30));
  EraseStream(a, rec1);
  a.reset();
  AllocatorStats mid = Stats();
  EXPECT_EQ(mid.frees_deferred, before.frees_deferred + 1)
      << "task 2's record was erased by task 1's token";
  EXPECT_EQ(mid.pending_frees, 1);
  auto other = alloc_->Allocate(kBytes);
  EXPECT_NE(other->ptr(), p) << "reused while task 2's op may still use it";

  gate2.Open();
  AllocatorStats after = StatsOnceIdle(s);
  EXPECT_EQ(after.deferred_frees_completed, before.deferred_frees_completed + 1);
  EXPECT_EQ(after.pending_frees, 0);
  EXPECT_EQ(alloc_->Allocate(kBytes)->ptr(), p);
}

TEST_F(StreamSafeAllocatorTest, ErasingTheLatestTokenRemovesTheRecord) {
  HeldStream s("latest");
  AllocatorStats before = Stats();
  auto a = alloc_->Allocate(kBytes);
  auto rec1 = RecordStream(a, &s);
  auto rec2 = RecordStream(a, &s);  // supersedes rec1: one record per stream
  EraseStream(a, rec2);
  EraseStream(a, rec1);  // stale token: a no-op
  a.reset();
  EXPECT_EQ(Stats().frees_deferred, before.frees_deferred);
  EXPECT_EQ(Stats().bytes_live, before.bytes_live);
}

TEST_F(StreamSafeAllocatorTest, RecordsOnTwoStreamsWaitForBoth) {
  HeldStream s1("s1"), s2("s2");
  AllocatorStats before = Stats();
  auto a = alloc_->Allocate(kBytes);
  RecordStream(a, &s1);
  RecordStream(a, &s2);
  a.reset();
  s1.Open();
  s1.Synchronize(seconds(30));
  EXPECT_EQ(Stats().pending_frees, 1) << "s2 has not passed yet";
  s2.Open();
  s2.Synchronize(seconds(30));
  AllocatorStats after = Stats();
  EXPECT_EQ(after.pending_frees, 0);
  EXPECT_EQ(after.deferred_frees_completed, before.deferred_frees_completed + 1);
  EXPECT_EQ(after.bytes_live, before.bytes_live);
}

// Past FLAGS_max_pending_stream_frees the releasing thread waits for the oldest block's
// streams. It must do so without holding the allocator's lock: other threads keep
// allocating meanwhile (stats() is observable while the releaser waits).
TEST_F(StreamSafeAllocatorTest, PendingListStaysBounded) {
  constexpr int kBound = 4;
  FLAGS_max_pending_stream_frees = kBound;
  HeldStream s("bounded");
  AllocatorStats before = Stats();

  std::vector<std::shared_ptr<phi::Allocation>> blocks;
  for (int i = 0; i < kBound + 1; ++i) {
    blocks.push_back(alloc_->Allocate(kBytes));
    RecordStream(blocks.back(), &s);
  }
  for (int i = 0; i < kBound; ++i) {
    blocks[i].reset();
    AllocatorStats st = Stats();
    EXPECT_EQ(st.pending_frees, i + 1);
    EXPECT_LE(st.pending_frees, kBound);
  }
  // One more deferred free while the stream is still blocked: the releasing thread must
  // wait for the oldest block, so it runs on its own thread.
  std::atomic<bool> released{false};
  auto releaser = std::async(std::launch::async, [&] {
    blocks[kBound].reset();
    released = true;
  });
  WaitUntilDeferred(before.frees_deferred + kBound + 1);
  AllocatorStats waiting = Stats();
  EXPECT_LE(waiting.pending_frees, kBound);
  EXPECT_FALSE(released.load()) << "past the bound the release must wait for the stream";
  auto meanwhile = alloc_->Allocate(64);  // the allocator stays usable
  EXPECT_NE(meanwhile, nullptr);

  s.Open();
  phi_test::MustFinishWithin(releaser, seconds(30), "release past the bound");
  AllocatorStats after = StatsOnceIdle(s);
  EXPECT_TRUE(released.load());
  EXPECT_EQ(after.pending_frees, 0);
  EXPECT_EQ(after.frees_deferred, before.frees_deferred + kBound + 1);
  EXPECT_EQ(after.deferred_frees_completed, before.deferred_frees_completed + kBound + 1);

  // Sustained load: the stream stays behind the host (each job takes 2 ms), so frees are
  // deferred all the time; the list never exceeds the bound.
  AllocatorStats load_before = Stats();
  int64_t max_pending = 0;
  for (int i = 0; i < 50; ++i) {
    s.Launch([] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); });
    auto b = alloc_->Allocate(kBytes);
    RecordStream(b, &s);
    b.reset();
    max_pending = std::max(max_pending, Stats().pending_frees);
  }
  EXPECT_LE(max_pending, kBound);
  EXPECT_GT(Stats().frees_deferred, load_before.frees_deferred);
  s.Synchronize(seconds(30));
}

// A stream job drops the last reference to a block it captured (the worker releases
// captures after running the job) while the host waits on that same stream to enforce
// the bound. The worker's release must not need a lock the waiting host holds.
TEST_F(StreamSafeAllocatorTest, BoundEnforcementDoesNotDeadlockWithAWorkerRelease) {
  constexpr int kBound = 2;
  FLAGS_max_pending_stream_frees = kBound;
  CpuWorkerStream s("captures");
  Gate gate;
  auto captured = alloc_->Allocate(kBytes);
  s.Launch([&gate, held = captured] { gate.Wait(); });  // the job holds a reference
  std::vector<std::shared_ptr<phi::Allocation>> blocks;
  for (int i = 0; i < kBound + 1; ++i) {
    blocks.push_back(alloc_->Allocate(kBytes));
    RecordStream(blocks.back(), &s);
  }
  captured.reset();  // now the job's capture is the last reference
  for (int i = 0; i < kBound; ++i) blocks[i].reset();
  AllocatorStats before = Stats();
  auto releaser = std::async(std::launch::async, [&] { blocks[kBound].reset(); });
  WaitUntilDeferred(before.frees_deferred + 1);  // the releaser now waits on the stream
  gate.Open();
  phi_test::MustFinishWithin(releaser, seconds(20),
                             "host release waiting on a stream whose job releases memory");
  EXPECT_EQ(StatsOnceIdle(s, seconds(20)).pending_frees, 0);
}

// The job itself drops, on the worker thread, the last reference to a block recorded on
// its own stream while the pending list is full. The worker cannot wait for its own
// stream; it must not try.
TEST_F(StreamSafeAllocatorTest, WorkerReleasePastTheBoundDoesNotWaitForItself) {
  constexpr int kBound = 1;
  FLAGS_max_pending_stream_frees = kBound;
  CpuWorkerStream s("self");
  Gate gate;
  auto captured = alloc_->Allocate(kBytes);
  s.Launch([&gate, held = captured] { gate.Wait(); });
  RecordStream(captured, &s);  // marked at the job that holds it
  auto pending = alloc_->Allocate(kBytes);
  RecordStream(pending, &s);
  pending.reset();  // the list is now full
  captured.reset();
  EXPECT_EQ(Stats().pending_frees, 1);
  gate.Open();
  std::promise<void> synced;
  auto done = synced.get_future();
  std::thread waiter([&] {
    s.Synchronize(seconds(60));
    synced.set_value();
  });
  phi_test::MustFinishWithin(done, seconds(20), "a worker job releasing past the bound");
  waiter.join();
  alloc_->ProcessPendingFrees();
  EXPECT_EQ(Stats().pending_frees, 0);
}

}  // namespace
