#include "distributed/process_group_with_stream.h"

#include <numeric>

#include <glog/logging.h>

#include "distributed/collective_fingerprint.h"
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

namespace {

// ------------------------------------------------------------------ validation
// Every check raises before anything is issued, naming what was expected and what came.
void CheckTensor(const DenseTensor& t, const char* what) {
  PADDLE_ENFORCE(t.initialized(),
                 phi::errors::InvalidArgument("The %s tensor has no storage.", what));
  PADDLE_ENFORCE(t.IsContiguous(),
                 phi::errors::InvalidArgument(
                     "The %s tensor must be contiguous, but it is a strided view of dims %s.",
                     what, t.dims().to_str().c_str()));
}

void CheckSameDtype(const DenseTensor& a, const char* a_name, const DenseTensor& b,
                    const char* b_name) {
  PADDLE_ENFORCE(a.dtype() == b.dtype(),
                 phi::errors::InvalidArgument(
                     "The %s tensor is %s but the %s tensor is %s; they must match.", a_name,
                     phi::DataTypeToString(a.dtype()), b_name,
                     phi::DataTypeToString(b.dtype())));
}

void CheckNumel(int64_t got, int64_t expected, const char* what) {
  PADDLE_ENFORCE(got == expected,
                 phi::errors::InvalidArgument("The %s must have %lld elements, but it has %lld.",
                                              what, static_cast<long long>(expected),
                                              static_cast<long long>(got)));
}

void CheckRank(int64_t rank, int size, const char* what) {
  PADDLE_ENFORCE(rank >= 0 && rank < size,
                 phi::errors::OutOfRange("The %s must be in [0, %d), but it is %lld.", what,
                                         size, static_cast<long long>(rank)));
}

// An output that is not allocated gets storage of `numel` elements like `like`;
// an allocated one must be contiguous and match dtype and size.
void PrepareOutput(DenseTensor* out, const DenseTensor& like, int64_t numel, const char* what) {
  PADDLE_ENFORCE_NOT_NULL(out,
                          phi::errors::InvalidArgument("The %s tensor pointer is null.", what));
  if (!out->initialized()) {
    out->AllocateLike(like.place(), like.dtype(), phi::DDim({numel}));
    return;
  }
  CheckTensor(*out, what);
  CheckSameDtype(*out, what, like, "input");
  CheckNumel(out->numel(), numel, what);
  PADDLE_ENFORCE(out->place() == like.place(),
                 phi::errors::InvalidArgument("The %s tensor is on %s but the input is on %s.",
                                              what, out->place().DebugString().c_str(),
                                              like.place().DebugString().c_str()));
}

// The view [offset, offset + numel) of t; numel -1 means "to the end".
DenseTensor PartialView(const DenseTensor& t, int64_t offset, int64_t numel, const char* what) {
  CheckTensor(t, what);
  if (offset == 0 && (numel < 0 || numel == t.numel())) return t;
  if (numel < 0) numel = t.numel() - offset;
  PADDLE_ENFORCE(offset >= 0 && numel >= 0 && offset + numel <= t.numel(),
                 phi::errors::OutOfRange(
                     "The %s partial range [%lld, %lld) exceeds its %lld elements.", what,
                     static_cast<long long>(offset), static_cast<long long>(offset + numel),
                     static_cast<long long>(t.numel())));
  return t.FlatView(offset, numel);
}

Reduction MakeReduction(ReduceOp op, double factor, DataType dtype) {
  phi::distributed::CheckReduceSupported(op, dtype);
  return Reduction{op, factor};
}

char* Bytes(void* p) { return static_cast<char*>(p); }
const char* Bytes(const void* p) { return static_cast<const char*>(p); }

// Dim-0 splits -> element counts and offsets; validates lengths and sums.
struct Splits {
  std::vector<int64_t> counts, offsets;
};
Splits MakeSplits(const std::vector<int64_t>& rows, const DenseTensor& t, int size,
                  const char* what) {
  int64_t dim0 = t.dims().size() > 0 ? t.dims()[0] : 1;
  int64_t row_elems = dim0 == 0 ? 0 : t.numel() / dim0;
  std::vector<int64_t> r = rows;
  if (r.empty()) {
    PADDLE_ENFORCE(dim0 % size == 0,
                   phi::errors::InvalidArgument(
                       "Equal all-to-all needs the %s dim 0 (%lld) divisible by the group "
                       "size %d.",
                       what, static_cast<long long>(dim0), size));
    r.assign(size, dim0 / size);
  }
  PADDLE_ENFORCE(static_cast<int>(r.size()) == size,
                 phi::errors::InvalidArgument(
                     "The %s split sizes must have one entry per rank (%d), but have %zu.", what,
                     size, r.size()));
  int64_t sum = 0;
  for (int64_t x : r) {
    PADDLE_ENFORCE(x >= 0, phi::errors::InvalidArgument("The %s split sizes must be >= 0.",
                                                        what));
    sum += x;
  }
  PADDLE_ENFORCE(sum == dim0,
                 phi::errors::InvalidArgument(
                     "The %s split sizes sum to %lld, but the tensor's dim 0 is %lld.", what,
                     static_cast<long long>(sum), static_cast<long long>(dim0)));
  Splits s;
  int64_t off = 0;
  for (int64_t x : r) {
    s.counts.push_back(x * row_elems);
    s.offsets.push_back(off);
    off += x * row_elems;
  }
  return s;
}

}  // namespace

// ------------------------------------------------------------------ group basics
ProcessGroupWithStream::ProcessGroupWithStream(std::shared_ptr<phi::distributed::Store> store,
                                               int rank, int size, int gid,
                                               std::chrono::milliseconds timeout)
    : ProcessGroup(rank, size, gid),
      store_(std::move(store)),
      timeout_(timeout),
      recorder_(std::make_shared<FlightRecorder>(
          FLAGS_enable_async_trace ? static_cast<size_t>(FLAGS_async_trace_count) : 0)) {
  PADDLE_ENFORCE(size > 0 && rank >= 0 && rank < size,
                 phi::errors::InvalidArgument(
                     "A process group needs 0 <= rank < size, got rank %d, size %d.", rank,
                     size));
  if (FLAGS_check_collective_mismatch && store_) {
    checker_ = std::make_unique<CollectiveFingerprintChecker>(store_, gid, rank, size, timeout);
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
  desc.seq = ++seq_;
  auto task = std::make_shared<StreamTask>(GetRank(), desc, sync_op, DescribePtr(), calc,
                                           BlockingWait(),
                                           [recorder = recorder_] { return recorder->Dump(); });
  recorder_->Record(desc, task->state());
  VLOG(3) << Describe() << " issue " << (VLOG_IS_ON(3) ? desc.ToString() : "");

  if (coalescing_) {
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
                       desc.ToString().c_str(), place.DebugString().c_str()));
    c.any_sync |= sync_op;
    c.jobs.push_back(CoalescingState::Job{std::move(fn), task, std::move(holders)});
    return task;
  }
  lk.unlock();

  std::shared_ptr<TaskState> state = task->state();
  auto job = [comm, stream, fn = std::move(fn), state] {
    state->status.store(TaskStatus::kStarted);
    try {
      fn(comm, stream, state.get());
      state->MarkFinished(TaskStatus::kCompleted);
    } catch (...) {
      state->SetError(std::current_exception());
    }
  };
  // A sync op on an idle CPU comm stream runs right here: no thread hand-off.
  if (sync_op && !use_calc_stream) {
    stream->LaunchPreferInline(std::move(job));
  } else {
    stream->Launch(std::move(job));
  }
  std::shared_ptr<phi::Event> end = stream->CreateEvent();
  end->Record(stream);
  task->Issue(std::move(end), stream, holders);

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

  auto group_task = std::make_shared<StreamTask>(GetRank(), desc, c->any_sync, DescribePtr(),
                                                 calc, BlockingWait(),
                                                 [recorder = recorder_] { return recorder->Dump(); });
  recorder_->Record(desc, group_task->state());

  // The job owns the op bodies and their states; the tasks stay with the caller.
  struct GroupJob {
    std::function<void(CommContext*, phi::Stream*, TaskState*)> fn;
    std::shared_ptr<TaskState> state;
  };
  auto jobs = std::make_shared<std::vector<GroupJob>>();
  for (auto& j : c->jobs) jobs->push_back(GroupJob{std::move(j.fn), j.task->state()});
  std::shared_ptr<TaskState> group_state = group_task->state();
  auto job = [comm, stream, jobs, group_state] {
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
    }
  };
  if (c->any_sync && !c->use_calc_stream) {
    stream->LaunchPreferInline(std::move(job));
  } else {
    stream->Launch(std::move(job));
  }
  std::shared_ptr<phi::Event> end = stream->CreateEvent();
  end->Record(stream);
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

// ------------------------------------------------------------------ built from send/recv
ProcessGroup::TaskPtr ProcessGroupWithStream::Scatter(DenseTensor* out, const DenseTensor& in,
                                                      const ScatterOptions& opts, bool sync_op,
                                                      bool use_calc_stream) {
  CheckRank(opts.root_rank, GetSize(), "scatter root rank");
  const int root = static_cast<int>(opts.root_rank);
  const int rank = GetRank(), size = GetSize();
  PADDLE_ENFORCE_NOT_NULL(out, phi::errors::InvalidArgument("The output tensor is null."));
  CheckTensor(*out, "output");
  int64_t n = out->numel();
  const void* src = nullptr;
  if (rank == root) {
    CheckTensor(in, "input");
    CheckSameDtype(in, "input", *out, "output");
    CheckNumel(in.numel(), n * size, "scatter input (group size x output)");
    src = in.data();
  }
  void* dst = out->data();
  DataType dt = out->dtype();
  size_t bytes = static_cast<size_t>(n) * phi::SizeOf(dt);
  phi::Place place = out->place();
  OpDesc d{CommType::SCATTER, 0, rank == root ? n * size : 0, n, dt, root};
  return Run(d, place, {rank == root ? &in : nullptr, out},
             [=](CommContext* c, phi::Stream* s, TaskState*) {
               if (rank != root) {
                 c->Recv(dst, n, dt, root, 0, s);
                 return;
               }
               CommGroupGuard group(c);
               for (int r = 0; r < size; ++r) {
                 if (r != root) c->Send(Bytes(src) + r * bytes, n, dt, r, 0, s);
               }
               group.End();
               phi::memory::Copy(place, dst, place, Bytes(src) + root * bytes, bytes, s);
             },
             sync_op, use_calc_stream);
}

namespace {
// Root receives `size` blocks of `n` elements into dsts[r] (its own block is copied).
void GatherBlocks(CommContext* c, phi::Stream* s, const void* src, const std::vector<void*>& dsts,
                  int64_t n, DataType dt, int root, const phi::Place& place) {
  const int rank = c->GetRank(), size = c->GetSize();
  size_t bytes = static_cast<size_t>(n) * phi::SizeOf(dt);
  if (rank != root) {
    c->Send(src, n, dt, root, 0, s);
    return;
  }
  CommGroupGuard group(c);
  for (int r = 0; r < size; ++r) {
    if (r != root) c->Recv(dsts[r], n, dt, r, 0, s);
  }
  group.End();
  phi::memory::Copy(place, dsts[root], place, src, bytes, s);
}
}  // namespace

ProcessGroup::TaskPtr ProcessGroupWithStream::Gather(DenseTensor* out, const DenseTensor& in,
                                                     const GatherOptions& opts, bool sync_op,
                                                     bool use_calc_stream) {
  CheckTensor(in, "input");
  CheckRank(opts.root_rank, GetSize(), "gather root rank");
  const int root = static_cast<int>(opts.root_rank);
  const int size = GetSize();
  int64_t n = in.numel();
  std::vector<void*> dsts(size, nullptr);
  if (GetRank() == root) {
    PrepareOutput(out, in, n * size, "output");
    size_t bytes = static_cast<size_t>(n) * in.element_size();
    for (int r = 0; r < size; ++r) dsts[r] = Bytes(out->data()) + r * bytes;
  }
  const void* src = in.data();
  DataType dt = in.dtype();
  phi::Place place = in.place();
  OpDesc d{CommType::GATHER, 0, n, GetRank() == root ? n * size : 0, dt, root};
  return Run(d, place, {&in, GetRank() == root ? out : nullptr},
             [=](CommContext* c, phi::Stream* s, TaskState*) {
               GatherBlocks(c, s, src, dsts, n, dt, root, place);
             },
             sync_op, use_calc_stream);
}

ProcessGroup::TaskPtr ProcessGroupWithStream::Gather(std::vector<DenseTensor>* outs,
                                                     const DenseTensor& in,
                                                     const GatherOptions& opts, bool sync_op,
                                                     bool use_calc_stream) {
  CheckTensor(in, "input");
  CheckRank(opts.root_rank, GetSize(), "gather root rank");
  const int root = static_cast<int>(opts.root_rank);
  const int size = GetSize();
  int64_t n = in.numel();
  std::vector<void*> dsts(size, nullptr);
  std::vector<const DenseTensor*> tensors{&in};
  if (GetRank() == root) {
    PADDLE_ENFORCE_NOT_NULL(outs, phi::errors::InvalidArgument("The output list is null."));
    if (outs->empty()) outs->resize(size);
    PADDLE_ENFORCE(static_cast<int>(outs->size()) == size,
                   phi::errors::InvalidArgument(
                       "Gather into a list needs one output tensor per rank (%d), but the list "
                       "has %zu.",
                       size, outs->size()));
    for (int r = 0; r < size; ++r) {
      PrepareOutput(&(*outs)[r], in, n, "gather list output");
      dsts[r] = (*outs)[r].data();
      tensors.push_back(&(*outs)[r]);
    }
  }
  const void* src = in.data();
  DataType dt = in.dtype();
  phi::Place place = in.place();
  OpDesc d{CommType::GATHER, 0, n, GetRank() == root ? n * size : 0, dt, root};
  return Run(d, place, tensors,
             [=](CommContext* c, phi::Stream* s, TaskState*) {
               GatherBlocks(c, s, src, dsts, n, dt, root, place);
             },
             sync_op, use_calc_stream);
}

namespace {
// The all-to-all exchange: block r of the send side goes to rank r, block r of the receive
// side comes from rank r. One group of sends and receives, so crossing orders never block.
void ExchangeBlocks(CommContext* c, phi::Stream* s, const std::vector<const void*>& srcs,
                    const std::vector<void*>& dsts, const std::vector<int64_t>& send_counts,
                    const std::vector<int64_t>& recv_counts, DataType dt,
                    const phi::Place& place) {
  const int rank = c->GetRank(), size = c->GetSize();
  CommGroupGuard group(c);
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    if (send_counts[r] > 0) c->Send(srcs[r], send_counts[r], dt, r, 0, s);
    if (recv_counts[r] > 0) c->Recv(dsts[r], recv_counts[r], dt, r, 0, s);
  }
  group.End();
  phi::memory::Copy(place, dsts[rank], place, srcs[rank],
                    static_cast<size_t>(send_counts[rank]) * phi::SizeOf(dt), s);
}
}  // namespace

ProcessGroup::TaskPtr ProcessGroupWithStream::AllToAll(
    DenseTensor* out, const DenseTensor& in, const std::vector<int64_t>& out_split_sizes,
    const std::vector<int64_t>& in_split_sizes, bool sync_op, bool use_calc_stream) {
  CheckTensor(in, "input");
  PADDLE_ENFORCE_NOT_NULL(out, phi::errors::InvalidArgument("The output tensor is null."));
  const int size = GetSize(), rank = GetRank();
  if (!out->initialized()) out->AllocateLike(in.place(), in.dtype(), in.dims());
  CheckTensor(*out, "output");
  CheckSameDtype(*out, "output", in, "input");
  Splits send = MakeSplits(in_split_sizes, in, size, "input");
  Splits recv = MakeSplits(out_split_sizes, *out, size, "output");
  PADDLE_ENFORCE(send.counts[rank] == recv.counts[rank],
                 phi::errors::InvalidArgument(
                     "AllToAll: this rank sends itself %lld elements but expects %lld.",
                     static_cast<long long>(send.counts[rank]),
                     static_cast<long long>(recv.counts[rank])));
  size_t es = in.element_size();
  std::vector<const void*> srcs(size);
  std::vector<void*> dsts(size);
  for (int r = 0; r < size; ++r) {
    srcs[r] = Bytes(in.data()) + send.offsets[r] * es;
    dsts[r] = Bytes(out->data()) + recv.offsets[r] * es;
  }
  DataType dt = in.dtype();
  phi::Place place = in.place();
  OpDesc d{CommType::ALLTOALL, 0, in.numel(), out->numel(), dt, -1};
  return Run(d, place, {&in, out},
             [=, sc = send.counts, rc = recv.counts](CommContext* c, phi::Stream* s,
                                                     TaskState*) {
               ExchangeBlocks(c, s, srcs, dsts, sc, rc, dt, place);
             },
             sync_op, use_calc_stream);
}

ProcessGroup::TaskPtr ProcessGroupWithStream::AllToAll(std::vector<DenseTensor>* outs,
                                                       const std::vector<DenseTensor>& ins,
                                                       bool sync_op, bool use_calc_stream) {
  const int size = GetSize();
  PADDLE_ENFORCE_NOT_NULL(outs, phi::errors::InvalidArgument("The output list is null."));
  PADDLE_ENFORCE(static_cast<int>(ins.size()) == size,
                 phi::errors::InvalidArgument(
                     "AllToAll needs one input tensor per rank (%d), but got %zu.", size,
                     ins.size()));
  PADDLE_ENFORCE(static_cast<int>(outs->size()) == size,
                 phi::errors::InvalidArgument(
                     "AllToAll needs one output tensor per rank (%d), but got %zu.", size,
                     outs->size()));
  std::vector<const void*> srcs(size);
  std::vector<void*> dsts(size);
  std::vector<int64_t> sc(size), rc(size);
  std::vector<const DenseTensor*> tensors;
  for (int r = 0; r < size; ++r) {
    CheckTensor(ins[r], "input list");
    CheckSameDtype(ins[r], "input list", ins[0], "first input");
    DenseTensor& o = (*outs)[r];
    if (!o.initialized()) o.AllocateLike(ins[r].place(), ins[r].dtype(), ins[r].dims());
    CheckTensor(o, "output list");
    CheckSameDtype(o, "output list", ins[0], "first input");
    srcs[r] = ins[r].data();
    dsts[r] = o.data();
    sc[r] = ins[r].numel();
    rc[r] = o.numel();
    tensors.push_back(&ins[r]);
    tensors.push_back(&o);
  }
  CheckNumel(rc[GetRank()], sc[GetRank()], "output block this rank sends itself");
  DataType dt = ins[0].dtype();
  phi::Place place = ins[0].place();
  int64_t total_in = std::accumulate(sc.begin(), sc.end(), int64_t{0});
  int64_t total_out = std::accumulate(rc.begin(), rc.end(), int64_t{0});
  OpDesc d{CommType::ALLTOALL, 0, total_in, total_out, dt, -1};
  return Run(d, place, tensors,
             [=](CommContext* c, phi::Stream* s, TaskState*) {
               ExchangeBlocks(c, s, srcs, dsts, sc, rc, dt, place);
             },
             sync_op, use_calc_stream);
}

// ------------------------------------------------------------------ point to point
ProcessGroup::TaskPtr ProcessGroupWithStream::Send(const DenseTensor& tensor, int dst_rank,
                                                   int64_t offset, int64_t numel, bool sync_op,
                                                   bool use_calc_stream,
                                                   const P2POptions& opts) {
  CheckRank(dst_rank, GetSize(), "send destination rank");
  DenseTensor part = PartialView(tensor, offset, numel, "send");
  const void* src = part.data();
  int64_t n = part.numel();
  DataType dt = part.dtype();
  int tag = opts.tag;
  OpDesc d{CommType::SEND, 0, n, 0, dt, dst_rank};
  return Run(d, tensor.place(), {&tensor},
             [=](CommContext* c, phi::Stream* s, TaskState*) {
               c->Send(src, n, dt, dst_rank, tag, s);
             },
             sync_op, use_calc_stream);
}

ProcessGroup::TaskPtr ProcessGroupWithStream::Recv(DenseTensor* tensor, int src_rank,
                                                   int64_t offset, int64_t numel, bool sync_op,
                                                   bool use_calc_stream,
                                                   const P2POptions& opts) {
  PADDLE_ENFORCE_NOT_NULL(tensor, phi::errors::InvalidArgument("The recv tensor is null."));
  if (src_rank != kAnySource) CheckRank(src_rank, GetSize(), "recv source rank");
  DenseTensor part = PartialView(*tensor, offset, numel, "recv");
  void* dst = part.data();
  int64_t n = part.numel();
  DataType dt = part.dtype();
  int tag = opts.tag;
  OpDesc d{CommType::RECV, 0, 0, n, dt, src_rank};
  return Run(d, tensor->place(), {tensor},
             [=](CommContext* c, phi::Stream* s, TaskState* st) {
               PADDLE_ENFORCE(src_rank != kAnySource || c->SupportsAnySource(),
                              phi::errors::Unimplemented(
                                  "The %s engine cannot receive from any source.",
                                  c->BackendName().c_str()));
               int source = src_rank;
               c->Recv(dst, n, dt, src_rank == kAnySource ? CommContext::kAnyPeer : src_rank,
                       tag, s, &source);
               st->source_rank.store(source);
             },
             sync_op, use_calc_stream);
}

ProcessGroup::TaskPtr ProcessGroupWithStream::Barrier(const BarrierOptions& opts) {
  // A one-element all-reduce: every rank must arrive before any leaves.
  phi::Place place = BarrierPlace(opts);
  DenseTensor flag(place, DataType::FLOAT32, phi::DDim({1}));
  phi::Fill(&flag, 0.0);
  void* p = flag.data();
  OpDesc d{CommType::BARRIER, 0, 1, 1, DataType::FLOAT32, -1};
  // The tensor dies on return; its block stays reserved until the stream passes the op.
  return Run(d, place, {&flag},
             [p](CommContext* c, phi::Stream* s, TaskState*) {
               c->AllReduce(p, p, 1, DataType::FLOAT32, Reduction{}, s);
             },
             /*sync_op=*/true, /*use_calc_stream=*/false);
}

}  // namespace distributed
}  // namespace paddle_like
