#include "distributed/process_group_with_stream.h"

#include <numeric>

#include <glog/logging.h>

#include "distributed/collective_fingerprint.h"
#include "distributed/engine_checks.h"
#include "distributed/flight_recorder.h"
#include "distributed/stream_task.h"
#include "phi/core/errors.h"
#include "phi/core/flags.h"
#include "phi/core/memcpy.h"

namespace paddle_like {
namespace distributed {

using phi::DataType;
using phi::DenseTensor;
using phi::distributed::CommContext;
using phi::distributed::CommGroupGuard;
using phi::distributed::Reduction;

// Ops issued between StartCoalescing and EndCoalescing, run as one engine group.
struct CoalescingState {
  struct Job {
    std::function<void(CommContext*, phi::Stream*, TaskState*)> fn;
    std::shared_ptr<StreamTask> task;
    std::vector<std::shared_ptr<phi::Allocation>> holders;
  };
  bool has_place = false;
  phi::Place place;
  bool use_calc_stream = false;
  bool any_sync = false;
  std::vector<Job> jobs;
};

using namespace engine;  // NOLINT: the engine's own checks


// ------------------------------------------------------------------ group basics
ProcessGroupWithStream::ProcessGroupWithStream(std::shared_ptr<phi::distributed::Store> store,
                                               int rank, int size, int gid,
                                               std::chrono::milliseconds timeout)
    : ProcessGroup(rank, size, gid),
      store_(std::move(store)),
      timeout_(timeout > std::chrono::milliseconds::zero()
                   ? timeout
                   : std::chrono::milliseconds(int64_t{FLAGS_default_group_timeout_s} * 1000)),
      recorder_(std::make_shared<FlightRecorder>(
          FLAGS_enable_async_trace ? static_cast<size_t>(FLAGS_async_trace_count) : 0)) {
  PADDLE_ENFORCE(size > 0 && rank >= 0 && rank < size,
                 phi::errors::InvalidArgument(
                     "A process group needs 0 <= rank < size, got rank %d, size %d.", rank,
                     size));
  if (FLAGS_check_collective_mismatch && store_) {
    checker_ = std::make_unique<CollectiveFingerprintChecker>(store_, gid, rank, size, timeout_);
  }
}

ProcessGroupWithStream::~ProcessGroupWithStream() { ShutdownStreams(); }

void ProcessGroupWithStream::ShutdownStreams() {
  std::map<phi::Place, std::unique_ptr<phi::DeviceContext>> doomed;
  {
    std::lock_guard<std::mutex> lk(mu_);
    doomed.swap(comm_contexts_);
  }
  // A CPU comm stream drains its queue before its thread joins; a CUDA one synchronizes.
  for (auto& kv : doomed) {
    try {
      kv.second->stream()->Synchronize(timeout_);
    } catch (const std::exception& e) {
      LOG(WARNING) << "process group " << GetGid() << ": comm stream did not drain at shutdown: "
                   << e.what();
    }
  }
}

uint64_t ProcessGroupWithStream::seq() const {
  std::lock_guard<std::mutex> lk(mu_);
  return seq_;
}

std::string ProcessGroupWithStream::DumpRecentOps() const { return recorder_->Dump(); }

const std::shared_ptr<const std::string>& ProcessGroupWithStream::DescribePtr() const {
  std::call_once(describe_once_, [this] {
    describe_ = std::make_shared<const std::string>(
        "ProcessGroup" + GetBackendName() + "(gid " + std::to_string(GetGid()) + ", rank " +
        std::to_string(GetRank()) + "/" + std::to_string(GetSize()) + ")");
  });
  return describe_;
}

bool ProcessGroupWithStream::BlockingWait() const { return FLAGS_comm_blocking_wait; }

phi::DeviceContext* ProcessGroupWithStream::CommDeviceContext(const phi::Place& place) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto& slot = comm_contexts_[place];
  if (!slot) {
    slot = phi::CreateCommContext(place, GetBackendName() + "-comm-g" + std::to_string(GetGid()));
  }
  return slot.get();
}

phi::DeviceContext* ProcessGroupWithStream::GetDeviceContext(const phi::Place& place,
                                                             bool use_calc_stream) const {
  return use_calc_stream ? phi::DeviceContextPool::Instance().Get(place)
                         : CommDeviceContext(place);
}

// A failed op is logged where it fails, so that it is never silent, even when nobody waits
// on its task (the error is also kept for Wait to raise).
static void LogFailure(const std::string& group, const OpDesc& desc, std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    LOG(ERROR) << group << ": " << desc.ToString() << " failed: " << ex.what();
  } catch (...) {
    LOG(ERROR) << group << ": " << desc.ToString() << " failed with a non-standard exception";
  }
}

// Puts `job` on `stream` and returns the event marking its end. A sync op on an idle CPU
// comm stream runs right here: no thread hand-off.
static std::shared_ptr<phi::Event> LaunchJob(phi::Stream* stream, std::function<void()> job,
                                             bool prefer_inline) {
  if (prefer_inline) {
    stream->LaunchPreferInline(std::move(job));
  } else {
    stream->Launch(std::move(job));
  }
  std::shared_ptr<phi::Event> end = stream->CreateEvent();
  end->Record(stream);
  return end;
}

std::shared_ptr<StreamTask> ProcessGroupWithStream::NewTask(const OpDesc& desc, bool sync_op,
                                                            phi::Stream* calc) {
  auto task = std::make_shared<StreamTask>(GetRank(), desc, sync_op, DescribePtr(), calc,
                                           BlockingWait(),
                                           [recorder = recorder_] { return recorder->Dump(); });
  recorder_->Record(desc, task->state());
  return task;
}

// ------------------------------------------------------------------ the one engine
ProcessGroup::TaskPtr ProcessGroupWithStream::Run(OpDesc desc, const phi::Place& place,
                                                  std::vector<const DenseTensor*> tensors,
                                                  CommFn fn, bool sync_op,
                                                  bool use_calc_stream) {
  CheckPlace(place);
  if (checker_) {  // before the communicator exists, so a missing rank is named here
    std::lock_guard<std::mutex> lk(mu_);
    OpDesc next = desc;
    next.seq = seq_ + 1;
    checker_->Check(next, Describe());
  }
  CommContext* comm = GetOrCreateCommContext(place);
  phi::Stream* calc = phi::DeviceContextPool::Instance().Get(place)->stream();
  phi::Stream* stream = use_calc_stream ? calc : CommDeviceContext(place)->stream();

  // The comm stream starts the op only after the compute already submitted on the calc
  // stream (which produced the inputs). The host calc stream is always up to date.
  if (!use_calc_stream && !calc->IsHostStream()) {
    auto ready = calc->CreateEvent();
    ready->Record(calc);
    stream->WaitEvent(*ready);
  }

  std::vector<std::shared_ptr<phi::Allocation>> holders;
  holders.reserve(tensors.size());
  for (const DenseTensor* t : tensors) {
    if (t != nullptr && t->initialized()) holders.push_back(t->Holder());
  }

  std::unique_lock<std::mutex> lk(mu_);
  if (coalescing_) {  // checked before the op takes a sequence number
    auto& c = *coalescing_;
    if (!c.has_place) {
      c.has_place = true;
      c.place = place;
      c.use_calc_stream = use_calc_stream;
    }
    PADDLE_ENFORCE(c.place == place && c.use_calc_stream == use_calc_stream,
                   phi::errors::InvalidArgument(
                       "%s: all ops of one coalesced group must use one place and stream; "
                       "the group is on %s but %s is on %s.",
                       Describe().c_str(), c.place.DebugString().c_str(),
                       CommTypeToString(desc.type), place.DebugString().c_str()));
  }
  desc.seq = ++seq_;
  auto task = NewTask(desc, sync_op, calc);
  VLOG(3) << Describe() << " issue " << (VLOG_IS_ON(3) ? desc.ToString() : "");

  if (coalescing_) {
    coalescing_->any_sync |= sync_op;
    coalescing_->jobs.push_back(CoalescingState::Job{std::move(fn), task, std::move(holders)});
    return task;
  }
  lk.unlock();

  std::shared_ptr<TaskState> state = task->state();
  auto job = [comm, stream, fn = std::move(fn), state, group = DescribePtr(), desc] {
    state->status.store(TaskStatus::kStarted);
    try {
      fn(comm, stream, state.get());
      state->MarkFinished(TaskStatus::kCompleted);
    } catch (...) {
      state->SetError(std::current_exception());
      LogFailure(*group, desc, state->error());
    }
  };
  task->Issue(LaunchJob(stream, std::move(job), sync_op && !use_calc_stream), stream, holders);

  if (FLAGS_benchmark) stream->Synchronize(timeout_);
  if (sync_op) task->Wait(timeout_);
  return task;
}

void ProcessGroupWithStream::StartCoalescing() {
  std::lock_guard<std::mutex> lk(mu_);
  PADDLE_ENFORCE(coalescing_ == nullptr,
                 phi::errors::PreconditionNotMet(
                     "%s: StartCoalescing() called twice without EndCoalescing().",
                     Describe().c_str()));
  coalescing_ = std::make_unique<CoalescingState>();
}

ProcessGroup::TaskPtr ProcessGroupWithStream::EndCoalescing() {
  std::unique_ptr<CoalescingState> c;
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lk(mu_);
    PADDLE_ENFORCE(coalescing_ != nullptr,
                   phi::errors::PreconditionNotMet(
                       "%s: EndCoalescing() called without StartCoalescing().",
                       Describe().c_str()));
    c = std::move(coalescing_);
    seq = ++seq_;
  }
  OpDesc desc;
  desc.type = CommType::COALESCED;
  desc.seq = seq;
  desc.numel_in = static_cast<int64_t>(c->jobs.size());  // ops in the group
  if (c->jobs.empty()) {  // nothing to issue: a task that is already complete
    phi::Stream* host = phi::DeviceContextPool::Instance().Get(phi::CPUPlace())->stream();
    auto done = std::make_shared<StreamTask>(GetRank(), desc, false, DescribePtr(), host, false,
                                             nullptr);
    done->Issue(std::shared_ptr<phi::Event>(host->CreateEvent()), host, {});
    return done;
  }
  CommContext* comm = GetOrCreateCommContext(c->place);
  phi::Stream* calc = phi::DeviceContextPool::Instance().Get(c->place)->stream();
  phi::Stream* stream = c->use_calc_stream ? calc : CommDeviceContext(c->place)->stream();

  auto group_task = NewTask(desc, c->any_sync, calc);

  // The job owns the op bodies and their states; the tasks stay with the caller.
  struct GroupJob {
    std::function<void(CommContext*, phi::Stream*, TaskState*)> fn;
    std::shared_ptr<TaskState> state;
  };
  auto jobs = std::make_shared<std::vector<GroupJob>>();
  for (auto& j : c->jobs) jobs->push_back(GroupJob{std::move(j.fn), j.task->state()});
  std::shared_ptr<TaskState> group_state = group_task->state();
  auto job = [comm, stream, jobs, group_state, group = DescribePtr(), desc] {
    group_state->status.store(TaskStatus::kStarted);
    try {
      CommGroupGuard group(comm);
      for (auto& j : *jobs) {
        j.state->status.store(TaskStatus::kStarted);
        j.fn(comm, stream, j.state.get());
      }
      group.End();
      for (auto& j : *jobs) j.state->MarkFinished(TaskStatus::kCompleted);
      group_state->MarkFinished(TaskStatus::kCompleted);
    } catch (...) {
      auto e = std::current_exception();
      for (auto& j : *jobs) j.state->SetError(e);
      group_state->SetError(e);
      LogFailure(*group, desc, e);
    }
  };
  std::shared_ptr<phi::Event> end =
      LaunchJob(stream, std::move(job), c->any_sync && !c->use_calc_stream);
  for (auto& j : c->jobs) j.task->Issue(end, stream, j.holders);
  group_task->Issue(end, stream, {});
  if (FLAGS_benchmark) stream->Synchronize(timeout_);
  if (c->any_sync) group_task->Wait(timeout_);
  return group_task;
}

// ------------------------------------------------------------------ collectives
ProcessGroup::TaskPtr ProcessGroupWithStream::AllReduce(DenseTensor* out, const DenseTensor& in,
                                                        const AllreduceOptions& opts,
                                                        bool sync_op, bool use_calc_stream) {
  CheckTensor(in, "input");
  PrepareOutput(out, in, in.numel(), "output");
  Reduction red = MakeReduction(opts.reduce_op, opts.premul_factor, in.dtype());
  const void* src = in.data();
  void* dst = out->data();
  int64_t n = in.numel();
  DataType dt = in.dtype();
  OpDesc d{CommType::ALLREDUCE, 0, n, n, dt, -1};
  return Run(d, in.place(), {&in, out},
             [=](CommContext* c, phi::Stream* s, TaskState*) {
               c->AllReduce(src, dst, n, dt, red, s);
             },
             sync_op, use_calc_stream);
}

ProcessGroup::TaskPtr ProcessGroupWithStream::Broadcast(DenseTensor* out, const DenseTensor& in,
                                                        const BroadcastOptions& opts,
                                                        bool sync_op, bool use_calc_stream) {
  CheckTensor(in, "input");
  CheckRank(opts.source_rank, GetSize(), "broadcast source rank");
  PrepareOutput(out, in, in.numel(), "output");
  int root = static_cast<int>(opts.source_rank);
  const void* src = in.data();
  void* dst = out->data();
  int64_t n = in.numel();
  DataType dt = in.dtype();
  OpDesc d{CommType::BROADCAST, 0, n, n, dt, root};
  return Run(d, in.place(), {&in, out},
             [=](CommContext* c, phi::Stream* s, TaskState*) {
               c->Broadcast(src, dst, n, dt, root, s);
             },
             sync_op, use_calc_stream);
}

ProcessGroup::TaskPtr ProcessGroupWithStream::Reduce(DenseTensor* out, const DenseTensor& in,
                                                     const ReduceOptions& opts, bool sync_op,
                                                     bool use_calc_stream) {
  CheckTensor(in, "input");
  CheckRank(opts.root_rank, GetSize(), "reduce root rank");
  PrepareOutput(out, in, in.numel(), "output");
  Reduction red = MakeReduction(opts.reduce_op, opts.premul_factor, in.dtype());
  int root = static_cast<int>(opts.root_rank);
  const void* src = in.data();
  void* dst = out->data();
  int64_t n = in.numel();
  DataType dt = in.dtype();
  OpDesc d{CommType::REDUCE, 0, n, n, dt, root};
  return Run(d, in.place(), {&in, out},
             [=](CommContext* c, phi::Stream* s, TaskState*) {
               c->Reduce(src, dst, n, dt, red, root, s);
             },
             sync_op, use_calc_stream);
}

ProcessGroup::TaskPtr ProcessGroupWithStream::AllGather(DenseTensor* out, const DenseTensor& in,
                                                        int64_t offset, int64_t numel,
                                                        bool sync_op, bool use_calc_stream) {
  DenseTensor part = PartialView(in, offset, numel, "input");
  int64_t n = part.numel();
  PrepareOutput(out, part, n * GetSize(), "output");
  const void* src = part.data();
  void* dst = out->data();
  DataType dt = in.dtype();
  OpDesc d{CommType::ALLGATHER, 0, n, n * GetSize(), dt, -1};
  return Run(d, in.place(), {&in, out},
             [=](CommContext* c, phi::Stream* s, TaskState*) {
               c->AllGather(src, dst, n, dt, s);
             },
             sync_op, use_calc_stream);
}

ProcessGroup::TaskPtr ProcessGroupWithStream::ReduceScatter(DenseTensor* out,
                                                            const DenseTensor& in,
                                                            const ReduceScatterOptions& opts,
                                                            bool sync_op,
                                                            bool use_calc_stream) {
  CheckTensor(in, "input");
  PADDLE_ENFORCE(in.numel() % GetSize() == 0,
                 phi::errors::InvalidArgument(
                     "ReduceScatter needs the input's %lld elements divisible by the group "
                     "size %d.",
                     static_cast<long long>(in.numel()), GetSize()));
  int64_t n = in.numel() / GetSize();
  PrepareOutput(out, in, n, "output");
  Reduction red = MakeReduction(opts.reduce_op, opts.premul_factor, in.dtype());
  const void* src = in.data();
  void* dst = out->data();
  DataType dt = in.dtype();
  OpDesc d{CommType::REDUCE_SCATTER, 0, in.numel(), n, dt, -1};
  return Run(d, in.place(), {&in, out},
             [=](CommContext* c, phi::Stream* s, TaskState*) {
               c->ReduceScatter(src, dst, n, dt, red, s);
             },
             sync_op, use_calc_stream);
}

}  // namespace distributed
}  // namespace paddle_like
