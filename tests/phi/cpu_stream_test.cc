// CPU streams and events: in-order worker streams, events that complete when their point is
// passed, WaitEvent ordering two streams without blocking the host, deadlines, and the
// LaunchPreferInline fast path.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "phi/core/cpu_stream.h"
#include "phi/core/device_context.h"
#include "phi/core/errors.h"
#include "tests/phi/phi_test_util.h"

namespace {

using phi::CpuWorkerStream;
using phi_test::Gate;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(CpuWorkerStreamTest, RunsJobsInSubmissionOrderOnOneThread) {
  CpuWorkerStream s("order");
  constexpr int kJobs = 2000;
  std::vector<int> seen;  // touched only by the worker until Synchronize returns
  std::vector<std::thread::id> threads;
  for (int i = 0; i < kJobs; ++i) {
    s.Launch([&seen, &threads, i] {
      seen.push_back(i);
      threads.push_back(std::this_thread::get_id());
    });
  }
  s.Synchronize(seconds(30));
  EXPECT_TRUE(s.Query());
  ASSERT_EQ(seen.size(), static_cast<size_t>(kJobs));
  for (int i = 0; i < kJobs; ++i) ASSERT_EQ(seen[i], i) << "job " << i << " ran out of order";
  for (const auto& id : threads) {
    EXPECT_EQ(id, threads.front());
    EXPECT_NE(id, std::this_thread::get_id());
  }
}

TEST(CpuWorkerStreamTest, JobThatThrowsDoesNotStopTheStream) {
  CpuWorkerStream s("throws");
  std::atomic<bool> ran_after{false};
  s.Launch([] { PADDLE_THROW(phi::errors::External("job failed on purpose")); });
  s.Launch([&] { ran_after = true; });
  s.Synchronize(seconds(30));
  EXPECT_TRUE(ran_after.load());
}

TEST(CpuEventTest, CompletesOnlyWhenItsPointIsPassed) {
  CpuWorkerStream s("event");
  Gate gate;
  std::atomic<bool> job_done{false};
  s.Launch([&] {
    gate.Wait();
    job_done = true;
  });
  auto event = s.CreateEvent();
  event->Record(&s);
  EXPECT_FALSE(event->Query()) << "the job before the event is still blocked";
  EXPECT_FALSE(s.Query());
  // Work submitted after the record does not move the event's point.
  Gate later_gate;
  s.Launch([&] { later_gate.Wait(); });
  gate.Open();
  event->Synchronize(seconds(30));
  EXPECT_TRUE(job_done.load());
  EXPECT_TRUE(event->Query());
  EXPECT_FALSE(s.Query()) << "the later job is still blocked, the stream is not done";
  later_gate.Open();
  s.Synchronize(seconds(30));
  EXPECT_TRUE(s.Query());
}

TEST(CpuEventTest, NeverRecordedOrRecordedOnHostStreamIsComplete) {
  phi::CpuHostStream host;
  auto e = host.CreateEvent();
  EXPECT_TRUE(e->Query());
  e->Record(&host);
  EXPECT_TRUE(e->Query());
  e->Synchronize(milliseconds(1));  // must not throw
}

TEST(CpuEventTest, ReRecordingMovesTheMark) {
  CpuWorkerStream s("rerecord");
  auto e = s.CreateEvent();
  e->Record(&s);  // nothing submitted: complete
  EXPECT_TRUE(e->Query());
  Gate gate;
  s.Launch([&] { gate.Wait(); });
  e->Record(&s);
  EXPECT_FALSE(e->Query());
  gate.Open();
  e->Synchronize(seconds(30));
  EXPECT_TRUE(e->Query());
}

// Stream B waits on an event of stream A: the host returns at once, and B's later job runs
// only after A's job.
TEST(CpuStreamWaitEventTest, OrdersTwoStreamsWithoutBlockingTheHost) {
  CpuWorkerStream a("A"), b("B");
  Gate gate_a;
  std::atomic<bool> a_done{false};
  std::atomic<bool> host_returned{false};
  std::atomic<bool> b_ran{false};
  std::atomic<bool> b_saw_a_done{false};
  std::atomic<bool> b_saw_host_returned{false};
  using Clock = std::chrono::steady_clock;
  std::atomic<int64_t> a_end_ns{0}, b_start_ns{0};

  a.Launch([&] {
    gate_a.Wait();
    a_end_ns = Clock::now().time_since_epoch().count();
    a_done = true;
  });
  auto e = a.CreateEvent();
  e->Record(&a);

  // The host part runs on its own thread so that a WaitEvent that wrongly blocks the
  // host makes the test fail instead of hang.
  auto host = std::async(std::launch::async, [&] {
    b.WaitEvent(*e);
    b.Launch([&] {
      b_start_ns = Clock::now().time_since_epoch().count();
      b_saw_a_done = a_done.load();
      b_saw_host_returned = host_returned.load();
      b_ran = true;
    });
    host_returned = true;
  });
  if (host.wait_for(seconds(10)) != std::future_status::ready) {
    gate_a.Open();  // let everything finish so the failure is reported cleanly
    host.wait();
    FAIL() << "WaitEvent or Launch blocked the host while stream A was blocked";
  }
  // A is still blocked (the gate is closed), so B cannot have run its job.
  EXPECT_FALSE(b_ran.load()) << "B ran its job before A passed the event";
  EXPECT_FALSE(b.Query());
  EXPECT_FALSE(e->Query());

  gate_a.Open();
  b.Synchronize(seconds(30));
  EXPECT_TRUE(b_ran.load());
  EXPECT_TRUE(b_saw_a_done.load()) << "B's job ran before A's job finished";
  EXPECT_TRUE(b_saw_host_returned.load()) << "the host was still inside WaitEvent/Launch";
  EXPECT_LE(a_end_ns.load(), b_start_ns.load());
  EXPECT_TRUE(a.Query());
}

TEST(CpuStreamWaitEventTest, WaitOnPassedEventAddsNoDependency) {
  CpuWorkerStream a("A"), b("B");
  auto e = a.CreateEvent();
  a.Launch([] {});
  e->Record(&a);
  e->Synchronize(seconds(30));
  b.WaitEvent(*e);
  EXPECT_TRUE(b.Query()) << "a passed event must not queue a wait job";
}

TEST(CpuStreamWaitEventTest, HostStreamWaitEventBlocksTheHostUntilThePoint) {
  CpuWorkerStream a("A");
  phi::CpuHostStream host;
  std::atomic<bool> a_done{false};
  a.Launch([&] {
    std::this_thread::sleep_for(milliseconds(20));  // keep A busy; not used for sync
    a_done = true;
  });
  auto e = a.CreateEvent();
  e->Record(&a);
  host.WaitEvent(*e);  // the host stream is the host: it blocks
  EXPECT_TRUE(a_done.load());
}

TEST(CpuStreamTimeoutTest, SynchronizeOnBlockedWorkRaisesTimeoutNamingTheStream) {
  CpuWorkerStream s("blocked-comm");
  Gate gate;
  s.Launch([&] { gate.Wait(); });
  auto start = std::chrono::steady_clock::now();
  try {
    s.Synchronize(milliseconds(50));
    gate.Open();
    FAIL() << "Synchronize returned although the stream is blocked";
  } catch (const phi::TimeoutError& err) {
    std::string what = err.what();
    EXPECT_NE(what.find("TimeoutError"), std::string::npos) << what;
    EXPECT_NE(what.find("blocked-comm"), std::string::npos) << what;
    EXPECT_NE(what.find("did not complete within 50 ms"), std::string::npos) << what;
    EXPECT_EQ(err.code(), phi::ErrorCode::kTimeout);
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(50));

  auto e = s.CreateEvent();
  e->Record(&s);
  EXPECT_THROW(e->Synchronize(milliseconds(10)), phi::TimeoutError);
  gate.Open();
  s.Synchronize(seconds(30));  // the stream recovers once the work passes
  e->Synchronize(seconds(30));
}

TEST(CpuStreamPreferInlineTest, RunsInlineOnTheCallerWhenIdle) {
  CpuWorkerStream s("inline");
  std::thread::id ran_on;
  bool ran = false;
  s.LaunchPreferInline([&] {
    ran_on = std::this_thread::get_id();
    ran = true;
  });
  EXPECT_TRUE(ran) << "an idle stream runs the job before LaunchPreferInline returns";
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_TRUE(s.Query());
  // The inline job counts as stream work: an event recorded after it is complete.
  auto e = s.CreateEvent();
  e->Record(&s);
  EXPECT_TRUE(e->Query());
}

TEST(CpuStreamPreferInlineTest, QueuesBehindPendingWorkPreservingOrder) {
  CpuWorkerStream s("inline-busy");
  Gate gate;
  std::mutex mu;
  std::vector<int> order;
  std::thread::id second_ran_on;
  auto push = [&](int v) {
    std::lock_guard<std::mutex> lk(mu);
    order.push_back(v);
  };
  s.Launch([&] {
    gate.Wait();
    push(1);
  });
  std::atomic<bool> second_ran{false};
  s.LaunchPreferInline([&] {
    second_ran_on = std::this_thread::get_id();
    push(2);
    second_ran = true;
  });
  EXPECT_FALSE(second_ran.load()) << "the stream was busy: the job must be queued, not inlined";
  s.Launch([&] { push(3); });
  gate.Open();
  s.Synchronize(seconds(30));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_NE(second_ran_on, std::this_thread::get_id());
}

// RunIfIdle (the engine's sync fast path) runs nothing on a busy stream and says so; on an
// idle one it runs the job on the caller and returns true, and the job counts as stream work.
TEST(CpuStreamPreferInlineTest, RunIfIdleRunsOnlyOnAnIdleStream) {
  CpuWorkerStream s("run-if-idle");
  Gate gate;
  s.Launch([&] { gate.Wait(); });
  bool ran = false;
  EXPECT_FALSE(s.RunIfIdle([&] { ran = true; }));
  EXPECT_FALSE(ran) << "a busy stream must not run the job at all";
  gate.Open();
  s.Synchronize(seconds(30));
  std::thread::id ran_on;
  EXPECT_TRUE(s.RunIfIdle([&] {
    ran_on = std::this_thread::get_id();
    ran = true;
  }));
  EXPECT_TRUE(ran);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  auto e = s.CreateEvent();
  e->Record(&s);
  EXPECT_TRUE(e->Query());
  EXPECT_TRUE(phi::CpuEvent::Completed()->Query()) << "the shared completed event";
}

// While an inline job runs on the caller, work launched meanwhile waits for it.
TEST(CpuStreamPreferInlineTest, WorkLaunchedDuringAnInlineJobRunsAfterIt) {
  CpuWorkerStream s("inline-claim");
  std::mutex mu;
  std::vector<std::string> order;
  auto push = [&](const std::string& v) {
    std::lock_guard<std::mutex> lk(mu);
    order.push_back(v);
  };
  s.LaunchPreferInline([&] {
    push("inline-start");
    s.Launch([&] { push("queued"); });
    EXPECT_FALSE(s.Query());
    // Widen the window in which a wrong worker would start the queued job.
    std::this_thread::sleep_for(milliseconds(20));
    push("inline-end");
  });
  s.Synchronize(seconds(30));
  EXPECT_EQ(order, (std::vector<std::string>{"inline-start", "inline-end", "queued"}));
}

// An inline job takes a ticket only when someone records an event while it runs: that
// event, recorded from another thread, must pass only once the job has ended.
TEST(CpuStreamPreferInlineTest, EventRecordedDuringAnInlineJobWaitsForIt) {
  CpuWorkerStream s("inline-ticket");
  std::atomic<bool> started{false}, ended{false}, release{false};
  std::thread runner([&] {
    EXPECT_TRUE(s.RunIfIdle([&] {
      started = true;
      while (!release) std::this_thread::sleep_for(milliseconds(1));
      ended = true;
    }));
  });
  while (!started) std::this_thread::sleep_for(milliseconds(1));
  EXPECT_FALSE(s.Query());
  auto during = s.CreateEvent();
  during->Record(&s);
  EXPECT_FALSE(during->Query());
  EXPECT_THROW(during->Synchronize(milliseconds(20)), phi::TimeoutError);
  release = true;
  during->Synchronize(seconds(30));
  EXPECT_TRUE(ended.load());
  runner.join();
  EXPECT_TRUE(s.Query());
  // The stream goes on numbering its work: a job launched after it and an event behind it.
  std::atomic<bool> later{false};
  s.Launch([&] { later = true; });
  auto after = s.CreateEvent();
  after->Record(&s);
  after->Synchronize(seconds(30));
  EXPECT_TRUE(later.load());
  // An event recorded when nothing runs has passed.
  auto idle = s.CreateEvent();
  idle->Record(&s);
  EXPECT_TRUE(idle->Query());
}

// Threads that run inline jobs, launch jobs and record events on one stream at once: no two
// jobs ever run at a time, and an event a thread records passes only once every job that
// thread submitted before it has run.
TEST(CpuStreamPreferInlineTest, InlineLaunchAndRecordFromManyThreadsKeepOrder) {
  CpuWorkerStream s("inline-stress");
  constexpr int kThreads = 4, kRounds = 2000;
  std::atomic<int> running{0}, overlaps{0}, early{0};
  std::array<std::atomic<int>, kThreads> done{};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto job = [&, t] {
        if (running.fetch_add(1) != 0) ++overlaps;
        done[t].fetch_add(1);
        running.fetch_sub(1);
      };
      int submitted = 0;
      for (int i = 0; i < kRounds; ++i) {
        switch ((i + t) % 3) {
          case 0: s.LaunchPreferInline(job); ++submitted; break;
          case 1: s.Launch(job); ++submitted; break;
          default: {
            auto e = s.CreateEvent();
            e->Record(&s);
            e->Synchronize(seconds(30));
            if (done[t].load() != submitted) ++early;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  s.Synchronize(seconds(30));
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(early.load(), 0);
  for (int t = 0; t < kThreads; ++t) {
    int expected = 0;
    for (int i = 0; i < kRounds; ++i) expected += (i + t) % 3 != 2 ? 1 : 0;
    EXPECT_EQ(done[t].load(), expected) << "thread " << t;
  }
  EXPECT_TRUE(s.Query());
}

TEST(CpuWorkerStreamTest, DestructorDrainsSubmittedWork) {
  std::atomic<int> ran{0};
  {
    CpuWorkerStream s("drain");
    for (int i = 0; i < 100; ++i) s.Launch([&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 100);
}

TEST(CpuWorkerStreamTest, StreamIdsAreUniqueAndNeverReused) {
  uint64_t first;
  {
    CpuWorkerStream s;
    first = s.id();
  }
  CpuWorkerStream t;
  phi::CpuHostStream h;
  EXPECT_NE(t.id(), first);
  EXPECT_NE(h.id(), t.id());
  EXPECT_TRUE(h.IsHostStream());
  EXPECT_FALSE(t.IsHostStream());
}

// ------------------------------------------------------------------ device contexts
TEST(DeviceContextPoolTest, ReturnsTheSameCpuCalcContextEachTime) {
  auto& pool = phi::DeviceContextPool::Instance();
  phi::DeviceContext* a = pool.Get(phi::CPUPlace());
  phi::DeviceContext* b = pool.Get(phi::CPUPlace());
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a, b);
  EXPECT_EQ(&pool, &phi::DeviceContextPool::Instance());
  EXPECT_EQ(a->GetPlace(), phi::CPUPlace());
  EXPECT_TRUE(a->stream()->IsHostStream()) << "the CPU calc stream is the host thread";
  bool ran = false;
  a->stream()->Launch([&] { ran = true; });
  EXPECT_TRUE(ran);
  a->Wait();
}

TEST(DeviceContextPoolTest, CreateCommStreamContextGivesAWorkerStream) {
  auto ctx = phi::CreateCommStreamContext(phi::CPUPlace(), "comm-ctx");
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(ctx->GetPlace(), phi::CPUPlace());
  auto* worker = dynamic_cast<CpuWorkerStream*>(ctx->stream());
  ASSERT_NE(worker, nullptr);
  EXPECT_FALSE(worker->IsHostStream());
  EXPECT_NE(worker->DebugString().find("comm-ctx"), std::string::npos);
  std::thread::id ran_on;
  ctx->stream()->Launch([&] { ran_on = std::this_thread::get_id(); });
  ctx->Wait();
  EXPECT_NE(ran_on, std::this_thread::get_id());
  auto other = phi::CreateCommStreamContext(phi::CPUPlace(), "comm-ctx-2");
  EXPECT_NE(other->stream(), ctx->stream()) << "each comm context owns its stream";
  EXPECT_NE(other->stream(), phi::DeviceContextPool::Instance().Get(phi::CPUPlace())->stream());
}

}  // namespace
