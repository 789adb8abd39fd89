#include "distributed/process_group_with_stream.h"

#include <algorithm>
#include <numeric>

#include <glog/logging.h>

#include "distributed/collective_fingerprint.h"
#include "distributed/comm_trace.h"
#include "distributed/engine_checks.h"
#include "distributed/flight_recorder.h"
#include "distributed/op_agreement.h"
#include "distributed/stream_task.h"
#include "distributed/watchdog.h"
#include "phi/core/distributed/liveness.h"
#include "phi/core/errors.h"
#include "phi/core/flags.h"
#include "phi/core/cpu_stream.h"
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
    CommFn fn;
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
namespace {
// What a task says about its group: its name, and on a timeout the flight recorder's last
// ops and the ranks that have not issued the op, from the progress they publish on the
// watchdog's tick.
class GroupReporter : public TaskReporter {
 public:
  GroupReporter(std::string group, std::shared_ptr<FlightRecorder> recorder,
                std::weak_ptr<WatchTarget> watch)
      : TaskReporter(std::move(group)), recorder_(std::move(recorder)), watch_(std::move(watch)) {}
  std::string RecentOps() const override { return recorder_->Dump(); }
  std::string ProgressFor(const OpDesc& desc) const override {
    // The store reads are bounded: the waiter has already timed out.
    constexpr std::chrono::milliseconds kReportBudget{1000};
    auto w = watch_.lock();
    return w ? w->ReportFor(desc, kReportBudget) : std::string();
  }

 private:
  std::shared_ptr<FlightRecorder> recorder_;
  std::weak_ptr<WatchTarget> watch_;  // the group retires its watch before it goes
};
}  // namespace

// " 'attention tp'": the user's description of a group, after its id in every message.
static std::string DescSuffix(const std::string& group_desc) {
  return group_desc.empty() ? std::string() : " '" + group_desc + "'";
}

ProcessGroupWithStream::ProcessGroupWithStream(std::shared_ptr<phi::distributed::Store> store,
                                               int rank, int size, int gid,
                                               std::chrono::milliseconds timeout,
                                               std::string group_desc)
    : ProcessGroup(rank, size, gid),
      store_(std::move(store)),
      timeout_(timeout > std::chrono::milliseconds::zero()
                   ? timeout
                   : std::chrono::milliseconds(int64_t{FLAGS_default_group_timeout_s} * 1000)),
      group_desc_(std::move(group_desc)),
      recorder_(std::make_shared<FlightRecorder>(
          FLAGS_enable_async_trace ? static_cast<size_t>(FLAGS_async_trace_count) : 0)) {
  PADDLE_ENFORCE(size > 0 && rank >= 0 && rank < size,
                 phi::errors::InvalidArgument(
                     "A process group needs 0 <= rank < size, got rank %d, size %d.", rank,
                     size));
  observers_ = {recorder_, MakeCommTraceObserver(gid, rank)};
  if (phi::CollectiveCheckMode() == phi::CollectiveCheck::kStore && store_) {
    checker_ = std::make_shared<CollectiveFingerprintChecker>(store_, gid, rank, size,
                                                              timeout_.load());
    observers_.push_back(checker_);
  }
  for (const auto& o : observers_) checks_before_issue_ |= o->ChecksBeforeIssue();
  watch_ = std::make_shared<WatchTarget>(
      "process group " + std::to_string(gid) + DescSuffix(group_desc_) + " (rank " +
          std::to_string(rank) + "/" + std::to_string(size) + ")",
      gid, rank, size, timeout_.load(), recorder_, store_,
      [this](const std::string& why) { AbortComm(why); });
  WatchGroup(watch_);
}

ProcessGroupWithStream::~ProcessGroupWithStream() {
  ShutdownStreams();  // retires the watch first (a backend's destructor got there earlier)
}

void ProcessGroupWithStream::ShutdownStreams() {
  // The group is going away (a backend's destructor calls this first): what is still in
  // flight is the destructor's to deal with, not a hang for the watchdog to act on.
  watch_->Retire();
  std::map<phi::Place, std::unique_ptr<phi::DeviceContext>> doomed;
  std::map<std::tuple<int, int, int>, std::shared_ptr<phi::Stream>> lanes;
  {
    std::lock_guard<std::mutex> lk(mu_);
    doomed.swap(comm_stream_contexts_);
    cpu_comm_context_.store(nullptr);
    lanes.swap(p2p_lanes_);
    pending_p2p_.clear();
  }
  for (auto& kv : lanes) {
    try {
      kv.second->Synchronize(timeout_.load());
    } catch (const std::exception& e) {
      LOG(WARNING) << "process group " << GetGid() << ": a point-to-point lane did not drain "
                   << "at shutdown: " << e.what();
    }
  }
  // Joins the worker lanes' threads while the communicator still exists. A posted op still
  // pending ends when the communicator is destroyed (its callback holds its lane).
  lanes.clear();
  // A CPU comm stream drains its queue before its thread joins; a CUDA one synchronizes.
  for (auto& kv : doomed) {
    try {
      kv.second->stream()->Synchronize(timeout_.load());
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

uint64_t ProcessGroupWithStream::p2p_seq() const {
  std::lock_guard<std::mutex> lk(mu_);
  return p2p_seq_;
}

std::string ProcessGroupWithStream::DumpRecentOps() const { return recorder_->Dump(); }

void ProcessGroupWithStream::SetTimeout(std::chrono::milliseconds timeout) {
  PADDLE_ENFORCE(timeout > std::chrono::milliseconds::zero(),
                 phi::errors::InvalidArgument("%s: a timeout must be positive, got %lld ms.",
                                              Describe().c_str(),
                                              static_cast<long long>(timeout.count())));
  timeout_.store(timeout);
  if (checker_) checker_->SetTimeout(timeout);
  watch_->SetTimeout(timeout);
  SetCommTimeout(timeout);
}

void ProcessGroupWithStream::SetCommTimeout(std::chrono::milliseconds timeout) {
  std::vector<phi::Place> places;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& kv : comm_stream_contexts_) places.push_back(kv.first);
  }
  for (const auto& place : places) GetOrCreateCommContext(place)->SetTimeout(timeout);
}

void ProcessGroupWithStream::AbortComm(const std::string& why) {
  std::vector<phi::Place> places;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (aborted_.empty()) aborted_ = why;
    for (const auto& kv : comm_stream_contexts_) places.push_back(kv.first);
  }
  // Before the connections close: a peer whose op fails on them reads that this rank is
  // alive and aborted, not dead.
  phi::distributed::Liveness::Process().Announce("aborted " + Describe() + ": " + why);
  // Only places that ran an op have a communicator; a group that never ran one is only
  // marked (every later op raises at issue).
  for (const auto& place : places) GetOrCreateCommContext(place)->Abort(why);
}

const std::shared_ptr<const TaskReporter>& ProcessGroupWithStream::Reporter() const {
  // Every op asks for it: after the first call one acquire load, not call_once's.
  if (reporter_built_.load(std::memory_order_acquire)) return reporter_;
  std::call_once(reporter_once_, [this] {
    reporter_ = std::make_shared<GroupReporter>(
        "ProcessGroup" + GetBackendName() + "(gid " + std::to_string(GetGid()) +
            DescSuffix(group_desc_) + ", rank " + std::to_string(GetRank()) + "/" +
            std::to_string(GetSize()) + ")",
        recorder_, watch_);
    reporter_built_.store(true, std::memory_order_release);
  });
  return reporter_;
}

const std::string& ProcessGroupWithStream::Describe() const { return Reporter()->group(); }

std::shared_ptr<const std::string> ProcessGroupWithStream::DescribePtr() const {
  const auto& reporter = Reporter();
  return std::shared_ptr<const std::string>(reporter, &reporter->group());
}

bool ProcessGroupWithStream::BlockingWait() const { return FLAGS_comm_blocking_wait; }

phi::DeviceContext* ProcessGroupWithStream::CommStreamContext(const phi::Place& place) const {
  if (place.is_cpu()) {  // every CPU op asks: no lock once it exists
    if (phi::DeviceContext* c = cpu_comm_context_.load(std::memory_order_acquire)) return c;
  }
  std::lock_guard<std::mutex> lk(mu_);
  auto& slot = comm_stream_contexts_[place];
  if (!slot) {
    slot = phi::CreateCommStreamContext(
        place, GetBackendName() + "-comm-g" + std::to_string(GetGid()), HighPriorityCommStream());
  }
  if (place.is_cpu()) cpu_comm_context_.store(slot.get(), std::memory_order_release);
  return slot.get();
}

phi::DeviceContext* ProcessGroupWithStream::GetDeviceContext(const phi::Place& place,
                                                             bool use_calc_stream) const {
  return use_calc_stream ? phi::DeviceContextPool::Instance().Get(place)
                         : CommStreamContext(place);
}

// A failed op is never silent: its error is kept for Wait to raise, and the task's state
// logs it when it ends without anyone having heard of it (see TaskState::NoteFailure).
static void NoteFailure(const std::string& group, const OpDesc& desc, std::exception_ptr e,
                        TaskState* state) {
  std::string text = group + ": " + desc.ToString();
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    text += std::string(" failed: ") + ex.what();
  } catch (...) {
    text += " failed with a non-standard exception";
  }
  VLOG(1) << text;
  state->NoteFailure(std::move(text));
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

std::shared_ptr<StreamTask> ProcessGroupWithStream::NewTask(OpDesc&& desc, bool sync_op,
                                                            phi::Stream* calc) {
  auto task = std::make_shared<StreamTask>(GetRank(), std::move(desc), sync_op, calc,
                                           BlockingWait(), timeout_.load(), Reporter());
  for (const auto& o : observers_) o->OnIssue(task->state());
  return task;
}

// ------------------------------------------------------------------ the one engine
namespace {
bool IsP2P(CommType t) { return t == CommType::SEND || t == CommType::RECV; }

// Runs one op on its stream: the agreement check first (when asked), then the op. Failures
// are kept in the task's state and logged where they happen. What it needs is borrowed: from
// Run's frame when a sync op runs on the issuing thread, from an OpJob on the stream.
struct OpRef {
  CommContext* comm;
  phi::Stream* stream;
  const CommFn& fn;
  TaskState* state;  // holds the op's desc
  const std::string& group;
  bool check;
  int gid;
  phi::distributed::Store* store;
  bool on_issuing_thread;  // run by RunIfIdle from Run: it starts as it is issued

  void operator()() const {
    if (on_issuing_thread) {
      state->MarkStartedAtIssue();
    } else {
      state->MarkStarted();
    }
    try {
      if (check) {
        CheckAgreement(comm, stream, MakeAgreementRecord(state->desc), group, gid, store);
      }
      if (fn) fn(comm, stream, state);
      state->MarkFinished(TaskStatus::kCompleted);
    } catch (...) {
      state->SetError(std::current_exception());
      NoteFailure(group, state->desc, state->error(), state);
    }
  }
};

// An op queued on its stream (a std::function owning it): it owns what OpRef borrows.
struct OpJob {
  CommContext* comm;
  phi::Stream* stream;
  CommFn fn;
  std::shared_ptr<TaskState> state;
  std::shared_ptr<const std::string> group;
  bool check;
  int gid;
  std::shared_ptr<phi::distributed::Store> store;

  void operator()() const {
    OpRef{comm, stream, fn, state.get(), *group, check, gid, store.get(), false}();
  }
};

// The job that posts a send or receive on the comm stream: it returns once posted; the
// engine's callback ends the op (its state, then its ticket on the lane, which is its end).
std::function<void()> MakePostJob(CommContext* comm,
                                  std::function<void(CommContext*, TaskState*,
                                                     CommContext::P2PDone)> post,
                                  std::shared_ptr<TaskState> state,
                                  std::shared_ptr<phi::CpuCompletionStream> lane, uint64_t ticket,
                                  std::shared_ptr<const std::string> group) {
  return [=, post = std::move(post)] {
    state->MarkStarted();
    auto ended = std::make_shared<std::atomic<bool>>(false);
    CommContext::P2PDone done = [state, lane, ticket, group, ended](std::exception_ptr e) {
      if (ended->exchange(true)) return;
      if (e) {
        state->SetError(e);
        NoteFailure(*group, state->desc, e, state.get());
      } else {
        state->MarkFinished(TaskStatus::kCompleted);
      }
      lane->Complete(ticket);
    };
    try {
      post(comm, state.get(), done);
    } catch (...) {
      done(std::current_exception());
    }
  };
}
}  // namespace

std::shared_ptr<phi::Stream> ProcessGroupWithStream::P2PLaneLocked(const OpDesc& desc,
                                                                   bool posted) {
  auto key = std::make_tuple(desc.peer, desc.tag, static_cast<int>(desc.type));
  if (p2p_lanes_.size() >= kMaxIdleP2PLanes && p2p_lanes_.count(key) == 0) {
    // Programs may use a new tag per step: past the bound, idle lanes are retired (a worker
    // lane's thread ends; events recorded on a lane stay valid).
    for (auto it = p2p_lanes_.begin(); it != p2p_lanes_.end();) {
      it = it->second->Query() ? p2p_lanes_.erase(it) : std::next(it);
    }
  }
  auto& lane = p2p_lanes_[key];
  if (!lane) {
    const std::string name = GetBackendName() + "-p2p-g" + std::to_string(GetGid()) + "-" +
                             CommTypeToString(desc.type) + "-peer" +
                             std::to_string(desc.peer) + "-tag" + std::to_string(desc.tag);
    if (posted) {
      lane = std::make_shared<phi::CpuCompletionStream>(name);
    } else {
      lane = std::make_shared<phi::CpuWorkerStream>(name);
    }
  }
  return lane;
}

// What the stream of a new op must wait for, decided under mu_ and applied after: the calc
// stream's submitted compute (device calc streams), the comm stream (a lane or calc-stream
// op: one communicator is never used by two threads at once), and pending lane ops (a comm-
// or calc-stream op comes after them in program order).
std::vector<std::shared_ptr<phi::Event>> ProcessGroupWithStream::OrderLocked(
    phi::Stream* stream, phi::Stream* calc, phi::Stream* comm_stream, bool on_lane) {
  std::vector<std::shared_ptr<phi::Event>> waits;
  auto mark = [&waits](phi::Stream* s) {
    std::shared_ptr<phi::Event> e = s->CreateEvent();
    e->Record(s);
    waits.push_back(std::move(e));
  };
  if (stream != calc && !calc->IsHostStream()) mark(calc);
  if (stream != comm_stream) mark(comm_stream);
  if (!on_lane) {
    for (auto& e : pending_p2p_) {
      if (!e->Query()) waits.push_back(std::move(e));
    }
    pending_p2p_.clear();
  }
  return waits;
}

// The allocations an op's stream uses until its end (recorded on the stream by the task).
static std::vector<std::shared_ptr<phi::Allocation>> HoldersOf(
    const TensorRefs& tensors) {
  std::vector<std::shared_ptr<phi::Allocation>> holders;
  holders.reserve(tensors.size());
  for (const DenseTensor* t : tensors) {
    if (t != nullptr && t->initialized()) holders.push_back(t->Holder());
  }
  return holders;
}

bool ProcessGroupWithStream::AgreesInBand(const phi::Place& place) const {
  return phi::CollectiveCheckMode() == phi::CollectiveCheck::kInBand && place.is_cpu() &&
         GetSize() > 1;
}

ProcessGroup::TaskPtr ProcessGroupWithStream::Run(OpDesc&& desc, const phi::Place& place,
                                                  const TensorRefs& tensors,
                                                  CommFn fn, bool sync_op,
                                                  bool use_calc_stream, PostFn post) {
  CheckPlace(place);
  const bool p2p = IsP2P(desc.type);
  if (checks_before_issue_ && !p2p && !desc.local_failure) {
    // Before the communicator exists, so a missing rank is named here. Not under mu_: a
    // check may be a store round trip, and each observer serializes itself.
    bool coalescing;
    {
      std::lock_guard<std::mutex> lk(mu_);
      coalescing = coalescing_ != nullptr;
    }
    if (!coalescing) {
      try {
        for (const auto& o : observers_) o->BeforeIssue(desc, Describe());
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu_);
        checker_raised_ = true;  // every rank raises it: no failure notice (Guarded)
        throw;
      }
    }
  }
  CommContext* comm = GetOrCreateCommContext(place);
  phi::Stream* calc = phi::DeviceContextPool::Instance().Get(place)->stream();
  phi::Stream* comm_stream = CommStreamContext(place)->stream();

  std::unique_lock<std::mutex> lk(mu_);
  // Raised at issue: queued behind an aborted op, a check inside the job would wait for that
  // op's own end.
  PADDLE_ENFORCE(aborted_.empty(),
                 phi::errors::Unavailable("%s was aborted (%s); destroy the group and create a "
                                          "new one.",
                                          Describe().c_str(), aborted_.c_str()));
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
  if (p2p) {
    desc.seq = seq_;
    desc.p2p_seq = ++p2p_seq_;
  } else {
    desc.seq = ++seq_;
  }
  ops_issued_.store(seq_ + p2p_seq_, std::memory_order_relaxed);
  if (const std::string& name = CommNameScope::Current(); !name.empty()) desc.name = name;
  const std::shared_ptr<StreamTask> task = NewTask(std::move(desc), sync_op, calc);
  const OpDesc& op = task->desc();  // `desc` moved into the task's state
  VLOG(3) << Describe() << " issue " << (VLOG_IS_ON(3) ? op.ToString() : "");

  if (coalescing_) {
    coalescing_->any_sync |= sync_op;
    coalescing_->jobs.push_back(CoalescingState::Job{std::move(fn), task, HoldersOf(tensors)});
    return task;
  }
  const bool on_lane = p2p && !use_calc_stream && place.is_cpu();
  if (on_lane && post && comm->PostsP2P()) {
    // Posted from the comm stream, in order after the comm stream's earlier work; ended by
    // the engine's callback on the lane. Later ops do not wait for it: the engine's
    // point-to-point transport is its own.
    auto lane = std::static_pointer_cast<phi::CpuCompletionStream>(P2PLaneLocked(op, true));
    const uint64_t ticket = lane->Begin();
    std::shared_ptr<phi::Event> end = lane->CreateEvent();
    end->Record(lane.get());
    const auto waits = OrderLocked(comm_stream, calc, comm_stream, /*on_lane=*/true);
    lk.unlock();
    for (const auto& e : waits) comm_stream->WaitEvent(*e);
    // A post never blocks on the peer: it runs on this thread when the comm stream is idle
    // (no hand-over to the stream's thread), behind its earlier work otherwise.
    LaunchJob(comm_stream,
              MakePostJob(comm, std::move(post), task->state(), lane, ticket, DescribePtr()),
              /*prefer_inline=*/true);
    task->ServeWhileWaiting(comm->P2PPoller());
    task->Issue(end, lane.get(), HoldersOf(tensors));
    if (FLAGS_benchmark) lane->Synchronize(timeout_.load());
    if (sync_op) task->Wait(timeout_.load());
    return task;
  }
  std::shared_ptr<phi::Stream> lane = on_lane ? P2PLaneLocked(op, false) : nullptr;
  phi::Stream* stream = use_calc_stream ? calc : on_lane ? lane.get() : comm_stream;
  const auto waits = OrderLocked(stream, calc, comm_stream, on_lane);
  lk.unlock();

  const bool check = AgreesInBand(place) && !p2p && !op.agreed_in_op;
  // The fast path of a sync op (a small CPU all-reduce is mostly this path's cost): on an
  // idle stream with nothing to wait for, the op runs here and has ended when RunIfIdle
  // returns, so there is no job to own its parts, no event to record and no memory to record
  // as in use. Only CPU streams run work inline; their completed event stands for the end.
  if (sync_op && !use_calc_stream && waits.empty()) {
    const OpRef inline_op{comm,  stream,   fn, task->state().get(), Describe(),
                          check, GetGid(), store_.get(), /*on_issuing_thread=*/true};
    if (stream->RunIfIdle([&inline_op] { inline_op(); })) {
      task->IssueRanInline();
      return task;
    }
  }
  OpJob job{comm, stream, std::move(fn), task->state(), DescribePtr(), check, GetGid(), store_};
  std::vector<std::shared_ptr<phi::Allocation>> holders = HoldersOf(tensors);
  for (const auto& e : waits) stream->WaitEvent(*e);
  std::shared_ptr<phi::Event> end =
      LaunchJob(stream, std::move(job), sync_op && !use_calc_stream);
  task->Issue(end, stream, holders);
  if (on_lane) {
    std::lock_guard<std::mutex> relock(mu_);
    pending_p2p_.push_back(end);
  }

  if (FLAGS_benchmark) stream->Synchronize(timeout_.load());
  if (sync_op) task->Wait(timeout_.load());
  return task;
}

uint64_t ProcessGroupWithStream::OpsIssued() const {
  return ops_issued_.load(std::memory_order_relaxed);
}

void ProcessGroupWithStream::AfterFailedIssue(CommType type, uint64_t before,
                                              std::exception_ptr error) {
  std::string what;
  try {
    std::rethrow_exception(error);
  } catch (const phi::EnforceNotMet& e) {
    what = e.what();
  } catch (...) {
    return;  // not a check of ours: nothing to tell
  }
  bool notify;
  {
    std::lock_guard<std::mutex> lk(mu_);
    notify = seq_ + p2p_seq_ == before && !coalescing_ && !checker_raised_ &&
             aborted_.empty() && AgreesInBand(BarrierPlace({}));
    checker_raised_ = false;
  }
  if (notify) NotifyLocalFailure(type, what);
}

void ProcessGroupWithStream::NotifyLocalFailure(CommType type, const std::string& reason) {
  OpDesc d;
  d.type = type;
  d.local_failure = true;
  {
    std::lock_guard<std::mutex> lk(mu_);
    d.failure_serial = ++local_failures_;
  }
  try {
    if (store_) store_->set(LocalFailureKey(GetGid(), GetRank(), d.failure_serial), reason);
    // Takes this op's place in the sequence; its check raises on every rank. Its failure
    // here is heard already (the caller gets the local error): neither the watchdog nor the
    // unheard-failure log reports it.
    auto notice = Run(std::move(d), BarrierPlace({}), {}, nullptr, /*sync_op=*/false,
                      /*use_calc_stream=*/false);
    std::static_pointer_cast<StreamTask>(notice)->state()->timeout_reported.store(true);
  } catch (const std::exception& e) {
    LOG(WARNING) << Describe() << ": could not tell the other ranks that "
                 << CommTypeToString(type) << " failed its checks here: " << e.what();
  }
}

bool ProcessGroupWithStream::UseFusedAllReduce(const phi::Place& place) const {
  // A coalesced group fuses its all-reduces its own way.
  return AgreesInBand(place) && !coalescing_now_.load(std::memory_order_relaxed);
}

void ProcessGroupWithStream::StartCoalescing() {
  std::lock_guard<std::mutex> lk(mu_);
  PADDLE_ENFORCE(coalescing_ == nullptr,
                 phi::errors::PreconditionNotMet(
                     "%s: StartCoalescing() called twice without EndCoalescing().",
                     Describe().c_str()));
  coalescing_ = std::make_unique<CoalescingState>();
  coalescing_now_.store(true, std::memory_order_relaxed);
}

ProcessGroup::TaskPtr ProcessGroupWithStream::EndCoalescing() {
  std::unique_ptr<CoalescingState> c;
  uint64_t seq, p2p_seq = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    PADDLE_ENFORCE(coalescing_ != nullptr,
                   phi::errors::PreconditionNotMet(
                       "%s: EndCoalescing() called without StartCoalescing().",
                       Describe().c_str()));
    c = std::move(coalescing_);
    coalescing_now_.store(false, std::memory_order_relaxed);
    // A group of sends and receives only (batch_isend_irecv) is point-to-point traffic.
    const bool only_p2p =
        !c->jobs.empty() && std::all_of(c->jobs.begin(), c->jobs.end(), [](const auto& j) {
          return IsP2P(j.task->desc().type);
        });
    if (only_p2p) {
      seq = seq_;
      p2p_seq = ++p2p_seq_;
    } else {
      seq = ++seq_;
    }
    ops_issued_.store(seq_ + p2p_seq_, std::memory_order_relaxed);
  }
  OpDesc desc;
  desc.type = CommType::COALESCED;
  desc.seq = seq;
  desc.p2p_seq = p2p_seq;
  desc.numel_in = static_cast<int64_t>(c->jobs.size());  // ops in the group
  if (c->jobs.empty()) {  // nothing to issue: a task that is already complete
    phi::Stream* host = phi::DeviceContextPool::Instance().Get(phi::CPUPlace())->stream();
    auto done = std::make_shared<StreamTask>(GetRank(), std::move(desc), false, host, false,
                                             timeout_.load(), Reporter());
    done->Issue(std::shared_ptr<phi::Event>(host->CreateEvent()), host, {});
    return done;
  }
  CommContext* comm = GetOrCreateCommContext(c->place);
  phi::Stream* calc = phi::DeviceContextPool::Instance().Get(c->place)->stream();
  phi::Stream* comm_stream = CommStreamContext(c->place)->stream();
  phi::Stream* stream = c->use_calc_stream ? calc : comm_stream;

  auto group_task = NewTask(OpDesc(desc), c->any_sync, calc);
  std::vector<std::shared_ptr<phi::Event>> waits;
  {
    std::lock_guard<std::mutex> lk(mu_);
    waits = OrderLocked(stream, calc, comm_stream, /*on_lane=*/false);
  }
  for (const auto& e : waits) stream->WaitEvent(*e);

  // The job owns the op bodies and their states; the tasks stay with the caller.
  struct GroupJob {
    CommFn fn;
    std::shared_ptr<TaskState> state;
  };
  auto jobs = std::make_shared<std::vector<GroupJob>>();
  std::vector<OpDesc> members;
  for (auto& j : c->jobs) {
    jobs->push_back(GroupJob{std::move(j.fn), j.task->state()});
    members.push_back(j.task->desc());
  }
  // Only groups with a collective are checked: those every rank calls. A group of sends and
  // receives (batch_isend_irecv) involves its peers only, which check sizes pair by pair.
  const bool has_collective = std::any_of(members.begin(), members.end(), [](const OpDesc& d) {
    return !IsP2P(d.type);
  });
  const bool check = AgreesInBand(c->place) && has_collective;
  AgreementRecord record = MakeGroupRecord(members);
  std::shared_ptr<TaskState> group_state = group_task->state();
  auto job = [comm, stream, jobs, group_state, group = DescribePtr(), desc, check, record,
              gid = GetGid(), store = store_] {
    group_state->MarkStarted();
    try {
      if (check) CheckAgreement(comm, stream, record, *group, gid, store.get());
      CommGroupGuard guard(comm);
      for (auto& j : *jobs) {
        j.state->MarkStarted();
        j.fn(comm, stream, j.state.get());
      }
      guard.End();
      for (auto& j : *jobs) j.state->MarkFinished(TaskStatus::kCompleted);
      group_state->MarkFinished(TaskStatus::kCompleted);
    } catch (...) {
      auto e = std::current_exception();
      for (auto& j : *jobs) {
        j.state->SetError(e);
        NoteFailure(*group, desc, e, j.state.get());
      }
      group_state->SetError(e);
    }
  };
  std::shared_ptr<phi::Event> end =
      LaunchJob(stream, std::move(job), c->any_sync && !c->use_calc_stream);
  for (auto& j : c->jobs) j.task->Issue(end, stream, j.holders);
  group_task->Issue(end, stream, {});
  if (FLAGS_benchmark) stream->Synchronize(timeout_.load());
  if (c->any_sync) group_task->Wait(timeout_.load());
  return group_task;
}

// ------------------------------------------------------------------ collectives
ProcessGroup::TaskPtr ProcessGroupWithStream::AllReduce(DenseTensor* out, const DenseTensor& in,
                                                        const AllreduceOptions& opts,
                                                        bool sync_op, bool use_calc_stream) {
  return Guarded(CommType::ALLREDUCE, [&]() -> TaskPtr {
    CheckTensor(in, "input");
    PrepareOutput(out, in, in.numel(), "output");
    Reduction red = MakeReduction(opts.reduce_op, opts.premul_factor, in.dtype());
    const void* src = in.data();
    void* dst = out->data();
    int64_t n = in.numel();
    DataType dt = in.dtype();
    OpDesc d{CommType::ALLREDUCE, 0, n, n, dt, -1};
    d.reduce_op = static_cast<int>(opts.reduce_op);
    if (UseFusedAllReduce(in.place())) {
      d.agreed_in_op = true;
      AgreementRecord rec = MakeAgreementRecord(d);
      // `this` outlives the op: a CPU op runs on the calling thread (the calc stream) or on
      // the comm stream, which ShutdownStreams drains before the group's members go.
      return Run(std::move(d), in.place(), {&in, out},
                 [=](CommContext* c, phi::Stream* s, TaskState*) {
                   FusedSmallAllReduce(c, s, rec, src, dst, n, dt, red, Describe(), GetGid(),
                                       store_.get());
                 },
                 sync_op, use_calc_stream);
    }
    return Run(std::move(d), in.place(), {&in, out},
               [=](CommContext* c, phi::Stream* s, TaskState*) {
                 c->AllReduce(src, dst, n, dt, red, s);
               },
               sync_op, use_calc_stream);
  });
}

ProcessGroup::TaskPtr ProcessGroupWithStream::Broadcast(DenseTensor* out, const DenseTensor& in,
                                                        const BroadcastOptions& opts,
                                                        bool sync_op, bool use_calc_stream) {
  return Guarded(CommType::BROADCAST, [&]() -> TaskPtr {
    CheckTensor(in, "input");
    CheckRank(opts.source_rank, GetSize(), "broadcast source rank");
    PADDLE_ENFORCE(opts.source_root == 0,
                   phi::errors::InvalidArgument(
                       "BroadcastOptions::source_root indexes a per-process tensor list, which "
                       "this runtime does not have: it must be 0, but it is %lld.",
                       static_cast<long long>(opts.source_root)));
    PrepareOutput(out, in, in.numel(), "output");
    int root = static_cast<int>(opts.source_rank);
    const void* src = in.data();
    void* dst = out->data();
    int64_t n = in.numel();
    DataType dt = in.dtype();
    OpDesc d{CommType::BROADCAST, 0, n, n, dt, root};
    return Run(std::move(d), in.place(), {&in, out},
               [=](CommContext* c, phi::Stream* s, TaskState*) {
                 c->Broadcast(src, dst, n, dt, root, s);
               },
               sync_op, use_calc_stream);
  });
}

ProcessGroup::TaskPtr ProcessGroupWithStream::Reduce(DenseTensor* out, const DenseTensor& in,
                                                     const ReduceOptions& opts, bool sync_op,
                                                     bool use_calc_stream) {
  return Guarded(CommType::REDUCE, [&]() -> TaskPtr {
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
    d.reduce_op = static_cast<int>(opts.reduce_op);
    return Run(std::move(d), in.place(), {&in, out},
               [=](CommContext* c, phi::Stream* s, TaskState*) {
                 c->Reduce(src, dst, n, dt, red, root, s);
               },
               sync_op, use_calc_stream);
  });
}

ProcessGroup::TaskPtr ProcessGroupWithStream::AllGather(DenseTensor* out, const DenseTensor& in,
                                                        int64_t offset, int64_t numel,
                                                        bool sync_op, bool use_calc_stream) {
  return Guarded(CommType::ALLGATHER, [&]() -> TaskPtr {
    DenseTensor part = PartialView(in, offset, numel, "input");
    int64_t n = part.numel();
    PrepareOutput(out, part, n * GetSize(), "output");
    const void* src = part.data();
    void* dst = out->data();
    DataType dt = in.dtype();
    OpDesc d{CommType::ALLGATHER, 0, n, n * GetSize(), dt, -1};
    return Run(std::move(d), in.place(), {&in, out},
               [=](CommContext* c, phi::Stream* s, TaskState*) {
                 c->AllGather(src, dst, n, dt, s);
               },
               sync_op, use_calc_stream);
  });
}

ProcessGroup::TaskPtr ProcessGroupWithStream::ReduceScatter(DenseTensor* out,
                                                            const DenseTensor& in,
                                                            const ReduceScatterOptions& opts,
                                                            bool sync_op,
                                                            bool use_calc_stream) {
  return Guarded(CommType::REDUCE_SCATTER, [&]() -> TaskPtr {
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
    d.reduce_op = static_cast<int>(opts.reduce_op);
    return Run(std::move(d), in.place(), {&in, out},
               [=](CommContext* c, phi::Stream* s, TaskState*) {
                 c->ReduceScatter(src, dst, n, dt, red, s);
               },
               sync_op, use_calc_stream);
  });
}

}  // namespace distributed
}  // namespace paddle_like
