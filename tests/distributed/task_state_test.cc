// TaskState: the op it holds for every observer, and its times (the kernel's coarse clock
// unless the op is traced).
#include "distributed/stream_task.h"

#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <regex>
#include <thread>

#include "distributed/flight_recorder.h"
#include "phi/core/flags.h"

namespace paddle_like {
namespace distributed {
namespace {

using Clock = std::chrono::steady_clock;

OpDesc AllReduceOf(int64_t n, uint64_t seq) {
  OpDesc d{CommType::ALLREDUCE, seq, n, n, phi::DataType::FLOAT32, -1};
  d.name = "bucket " + std::to_string(seq);
  return d;
}

int64_t TickUs() {
  timespec res;
  EXPECT_EQ(::clock_getres(CLOCK_MONOTONIC_COARSE, &res), 0);
  return (res.tv_sec * 1000000000 + res.tv_nsec) / 1000;
}

TEST(TaskState, UntracedOpsTakeCoarseTimesOnSteadyClocksScale) {
  ASSERT_TRUE(FLAGS_comm_trace_dir.empty());
  const auto before = Clock::now();
  TaskState s(AllReduceOf(8, 3));
  const auto after = Clock::now();
  EXPECT_FALSE(s.precise_times);
  // The coarse clock is CLOCK_MONOTONIC as of its last update: never ahead, and behind by
  // about two ticks at most (3-8 ms measured on a 4 ms tick); bounded loosely here.
  const auto tick = std::chrono::microseconds(TickUs());
  EXPECT_LE(s.issued_at, after);
  EXPECT_GE(s.issued_at + 4 * tick + std::chrono::milliseconds(10), before);
  EXPECT_GE(s.Age().count(), 0);
  EXPECT_LT(s.Age(), std::chrono::seconds(1));
  EXPECT_EQ(s.desc.seq, 3u);
  EXPECT_EQ(s.desc.name, "bucket 3");

  EXPECT_EQ(s.TookText(), "");  // not finished
  s.MarkFinished(TaskStatus::kCompleted);
  EXPECT_GE(s.finished_us.load(), 1);
  // Quick: under one tick. (A tick may pass between the two reads: then "about N ms".)
  EXPECT_TRUE(std::regex_match(s.TookText(), std::regex("in (under|about) [0-9]+ ms")))
      << s.TookText();
}

TEST(TaskState, ASlowUntracedOpSaysAboutHowManyMilliseconds) {
  TaskState s(AllReduceOf(8, 1));
  const int64_t tick_us = TickUs();
  std::this_thread::sleep_for(std::chrono::microseconds(3 * tick_us + 2000));
  s.MarkFinished(TaskStatus::kCompleted);
  const int64_t us = s.finished_us.load();
  EXPECT_GE(us, 2 * tick_us);
  std::smatch m;
  const std::string took = s.TookText();
  ASSERT_TRUE(std::regex_match(took, m, std::regex("in about ([0-9]+) ms"))) << took;
  EXPECT_EQ(std::stoll(m[1]), (us + 500) / 1000);
}

TEST(TaskState, TracedOpsTakePreciseTimes) {
  FLAGS_comm_trace_dir = "/nonexistent-never-written";  // only read at exit, by the tracer
  TaskState s(AllReduceOf(8, 2));
  FLAGS_comm_trace_dir = "";
  EXPECT_TRUE(s.precise_times);
  const auto now = Clock::now();
  EXPECT_LE(s.issued_at, now);
  EXPECT_LT(now - s.issued_at, std::chrono::seconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  s.MarkFinished(TaskStatus::kCompleted);
  EXPECT_GE(s.finished_us.load(), 2000);
  EXPECT_EQ(s.TookText(), "in " + std::to_string(s.finished_us.load()) + " us");
}

TEST(FlightRecorder, KeepsTheLastOpsThroughTheirStates) {
  FlightRecorder recorder(2);
  auto first = std::make_shared<TaskState>(AllReduceOf(4, 1));
  auto second = std::make_shared<TaskState>(AllReduceOf(5, 2));
  auto third = std::make_shared<TaskState>(AllReduceOf(6, 3));
  std::weak_ptr<TaskState> first_alive = first;
  recorder.Record(first);
  recorder.Record(second);
  first->MarkFinished(TaskStatus::kCompleted);
  first.reset();
  EXPECT_FALSE(first_alive.expired());  // the ring holds it
  recorder.Record(third);
  EXPECT_TRUE(first_alive.expired());  // dropped when the ring wrapped

  const auto entries = recorder.Snapshot();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0]->desc.seq, 2u);  // oldest first
  EXPECT_EQ(entries[1]->desc.seq, 3u);
  second->MarkFinished(TaskStatus::kCompleted);
  const std::string dump = recorder.Dump();
  EXPECT_NE(dump.find("AllReduce seq 2 [NumelIn 5"), std::string::npos) << dump;
  EXPECT_NE(dump.find("'bucket 2' completed in "), std::string::npos) << dump;
  EXPECT_NE(dump.find("'bucket 3' issued\n"), std::string::npos) << dump;
  EXPECT_EQ(dump.find("seq 1 "), std::string::npos) << dump;
}

}  // namespace
}  // namespace distributed
}  // namespace paddle_like
