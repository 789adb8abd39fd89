// paddle_like as a torch.distributed backend (see process_group_paddle.h).
#include "process_group_paddle.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <sstream>
#include <thread>
#include <utility>

#include <Python.h>

#include <ATen/core/ivalue.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "distributed/backend_registry.h"
#include "distributed/process_group_with_stream.h"
#include "phi/core/device_context.h"
#include "phi/core/distributed/store/prefix_store.h"
#include "phi/core/errors.h"

namespace paddle_like {
namespace torch_backend {

using EngineGroup = distributed::ProcessGroup;
using TaskPtr = EngineGroup::TaskPtr;
using Clock = std::chrono::steady_clock;

namespace {

// ------------------------------------------------------------------ tensors
// A torch tensor's storage as a phi Allocation: the storage stays alive while the engine
// (or a tensor view of it) holds the allocation.
class TorchAllocation : public phi::Allocation {
 public:
  TorchAllocation(const c10::Storage& storage, phi::Place place)
      : phi::Allocation(storage.data(), storage.nbytes(), place), storage_(storage) {}

 private:
  c10::Storage storage_;
};

phi::Place PlaceOf(const at::Tensor& t) {
  if (t.is_cuda()) return phi::GPUPlace(t.device().index());
  return phi::CPUPlace();
}

// The engine's type of a torch dtype; UNDEFINED when it has none.
phi::DataType PhiType(at::ScalarType t) {
  switch (t) {
    case at::kBool: return phi::DataType::BOOL;
    case at::kChar: return phi::DataType::INT8;
    case at::kByte: return phi::DataType::UINT8;
    case at::kInt: return phi::DataType::INT32;
    case at::kLong: return phi::DataType::INT64;
    case at::kHalf: return phi::DataType::FLOAT16;
    case at::kBFloat16: return phi::DataType::BFLOAT16;
    case at::kFloat: return phi::DataType::FLOAT32;
    case at::kDouble: return phi::DataType::FLOAT64;
    case at::kComplexFloat: return phi::DataType::COMPLEX64;
    case at::kComplexDouble: return phi::DataType::COMPLEX128;
    default: return phi::DataType::UNDEFINED;
  }
}

void CheckTensor(const at::Tensor& t, const char* op, const char* what,
                 bool contiguous = true) {
  TORCH_CHECK(t.defined(), "paddle_like ", op, ": the ", what, " tensor is undefined");
  TORCH_CHECK(t.layout() == at::kStrided, "paddle_like ", op, ": only dense (strided) tensors "
              "are supported, the ", what, " tensor is ", t.layout());
  TORCH_CHECK(t.is_cpu() || t.is_cuda(), "paddle_like ", op, ": the ", what,
              " tensor is on ", t.device(), "; CPU and CUDA tensors are supported");
  TORCH_CHECK(!contiguous || t.is_contiguous(), "paddle_like ", op, ": the ", what,
              " tensor must be contiguous");
}

// One tensor per process; any strides (a non-contiguous one is staged, see Contiguous).
void CheckSingle(const std::vector<at::Tensor>& ts, const char* op, bool contiguous = false) {
  TORCH_CHECK(ts.size() == 1, "paddle_like ", op, " takes one tensor per process, got ",
              ts.size());
  CheckTensor(ts[0], op, "input", contiguous);
}

// `t` itself when contiguous; else a contiguous copy, copied back into `t` after the op when
// `copy_back` (chained onto *post).
at::Tensor Contiguous(const at::Tensor& t, std::function<void()>* post, bool copy_back) {
  if (t.is_contiguous()) return t;
  at::Tensor c = t.contiguous();
  if (copy_back) {
    std::function<void()> prev = std::move(*post);
    *post = [prev, t, c] {
      if (prev) prev();
      at::NoGradGuard no_grad;
      at::Tensor dst = t;
      dst.copy_(c);
    };
  }
  return c;
}

void CheckLike(const at::Tensor& t, const at::Tensor& ref, const char* op, const char* what) {
  CheckTensor(t, op, what);
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "paddle_like ", op, ": the ", what,
              " tensor is ", t.scalar_type(), " but the input is ", ref.scalar_type());
  TORCH_CHECK(t.device() == ref.device(), "paddle_like ", op, ": the ", what,
              " tensor is on ", t.device(), " but the input is on ", ref.device());
}

// `numel` elements of `first`'s storage from `first`'s start, as a 1-D DenseTensor. With
// `reduce`, the dtype must be one the engine reduces; otherwise a type it lacks (int16,
// ...) travels as bytes.
phi::DenseTensor WrapRange(const at::Tensor& first, int64_t numel, bool reduce,
                           const char* op) {
  TORCH_CHECK(first.is_contiguous(), "paddle_like ", op, ": internal: a strided view");
  phi::DataType dt = PhiType(first.scalar_type());
  int64_t n = numel;
  if (dt == phi::DataType::UNDEFINED) {
    TORCH_CHECK(!reduce, "paddle_like ", op, " does not reduce ", first.scalar_type(),
                " tensors (bool, int8, uint8, int32, int64, float16, bfloat16, float32, "
                "float64, complex64 and complex128 are supported)");
    dt = phi::DataType::UINT8;
    n = numel * static_cast<int64_t>(first.element_size());
  }
  phi::DenseTensorMeta meta;
  meta.dtype = dt;
  meta.dims = phi::DDim({n});
  meta.offset = static_cast<size_t>(first.storage_offset()) * first.element_size();
  auto holder = std::make_shared<TorchAllocation>(first.storage(), PlaceOf(first));
  return phi::DenseTensor(std::move(holder), std::move(meta));
}

phi::DenseTensor Wrap(const at::Tensor& t, bool reduce, const char* op) {
  return WrapRange(t, t.numel(), reduce, op);
}

// True when ts are contiguous tensors of one storage, each right after the one before.
bool Consecutive(const std::vector<at::Tensor>& ts) {
  if (ts.empty()) return false;
  const auto* base = static_cast<const char*>(ts[0].data_ptr());
  size_t off = 0;
  for (const auto& t : ts) {
    if (!t.is_contiguous() || !t.storage().is_alias_of(ts[0].storage()) ||
        t.scalar_type() != ts[0].scalar_type() ||
        static_cast<const char*>(t.data_ptr()) != base + off) {
      return false;
    }
    off += t.nbytes();
  }
  return true;
}

int64_t TotalNumel(const std::vector<at::Tensor>& ts) {
  int64_t n = 0;
  for (const auto& t : ts) n += t.numel();
  return n;
}

// dst (contiguous) <- src (contiguous, same numel and dtype).
void CopyInto(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.numel() == 0) return;
  if (dst.is_cpu() && src.is_cpu()) {
    std::memcpy(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    return;
  }
  at::NoGradGuard no_grad;
  dst.view(-1).copy_(src.view(-1));
}

// One buffer holding the tensors of `ts` one after the other.
at::Tensor Flatten(const std::vector<at::Tensor>& ts) {
  at::Tensor flat = at::empty({TotalNumel(ts)}, ts[0].options());
  int64_t off = 0;
  for (const auto& t : ts) {
    CopyInto(flat.narrow(0, off, t.numel()), t);
    off += t.numel();
  }
  return flat;
}

void Unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& ts) {
  int64_t off = 0;
  for (const auto& t : ts) {
    CopyInto(t, flat.narrow(0, off, t.numel()));
    off += t.numel();
  }
}

distributed::ReduceOp ToReduceOp(const c10d::ReduceOp& op, double* factor, const char* name) {
  *factor = 1.0;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return distributed::ReduceOp::SUM;
    case c10d::ReduceOp::AVG: return distributed::ReduceOp::AVG;
    case c10d::ReduceOp::PRODUCT: return distributed::ReduceOp::PRODUCT;
    case c10d::ReduceOp::MIN: return distributed::ReduceOp::MIN;
    case c10d::ReduceOp::MAX: return distributed::ReduceOp::MAX;
    case c10d::ReduceOp::BAND: return distributed::ReduceOp::BAND;
    case c10d::ReduceOp::BOR: return distributed::ReduceOp::BOR;
    case c10d::ReduceOp::BXOR: return distributed::ReduceOp::BXOR;
    case c10d::ReduceOp::PREMUL_SUM: {
      auto* s = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK(s != nullptr, "paddle_like ", name, ": PREMUL_SUM without its factor");
      if (!s->tensor_factors.empty()) {
        *factor = s->tensor_factors[0].to(at::kCPU).item<double>();
      } else {
        *factor = s->double_factor;
      }
      return distributed::ReduceOp::PREMUL_SUM;
    }
    default: break;
  }
  TORCH_CHECK(false, "paddle_like ", name, ": unknown reduce op ", static_cast<int>(op.op_));
}

std::exception_ptr TorchError(const std::string& what) {
  return std::make_exception_ptr(c10::Error(
      c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
      "paddle_like: " + what));
}

// ------------------------------------------------------------------ store
// torch's c10d::Store as the engine's Store: every key of the engine's bootstrap goes
// through the store torch handed the creator (already prefixed by the group's name).
class TorchStore : public phi::distributed::Store {
 public:
  explicit TorchStore(c10::intrusive_ptr<c10d::Store> store)
      : phi::distributed::Store(store->getTimeout()), store_(std::move(store)) {}

  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    Call([&] { store_->set(key, value); }, key);
  }
  std::vector<uint8_t> get(const std::string& key) override {
    wait({key}, timeout());  // torch's get waits inside the store (see wait)
    std::vector<uint8_t> v;
    Call([&] { v = store_->get(key); }, key);
    return v;
  }
  int64_t add(const std::string& key, int64_t value) override {
    int64_t v = 0;
    Call([&] { v = store_->add(key, value); }, key);
    return v;
  }
  std::vector<uint8_t> compare_set(const std::string& key,
                                   const std::vector<uint8_t>& expected,
                                   const std::vector<uint8_t>& desired) override {
    std::vector<uint8_t> v;
    Call([&] { v = store_->compareSet(key, expected, desired); }, key);
    return v;
  }
  // By polling check(): torch 1.13's TCPStore client gives up a timed-out WAIT on its side
  // only, and the server's late answer is then read as the reply of the connection's next
  // request (the stream is out of step from there on: wrong values, hangs). The engine waits
  // in short slices (GlooMesh::WaitKeys), so a wait must never time out inside torch's store.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    auto pause = std::chrono::microseconds(200);
    while (!check(keys)) {
      if (Clock::now() >= deadline) {
        std::string names;
        for (const auto& k : keys) names += (names.empty() ? "" : ", ") + k;
        throw phi::TimeoutError("torch store: keys [" + names + "] not set within " +
                                std::to_string(timeout.count()) + " ms");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(5000));
    }
  }
  bool check(const std::vector<std::string>& keys) override {
    bool v = false;
    Call([&] { v = store_->check(keys); }, keys.empty() ? std::string() : keys[0]);
    return v;
  }
  bool delete_key(const std::string& key) override {
    bool v = false;
    Call([&] { v = store_->deleteKey(key); }, key);
    return v;
  }
  int64_t num_keys() override {
    int64_t v = 0;
    Call([&] { v = store_->getNumKeys(); }, "");
    return v;
  }
  // torch 1.13's store has no append: a compare-and-set loop.
  void append(const std::string& key, const std::vector<uint8_t>& value) override {
    for (;;) {
      std::vector<uint8_t> cur;
      if (check({key})) cur = get(key);
      std::vector<uint8_t> next = cur;
      next.insert(next.end(), value.begin(), value.end());
      if (compare_set(key, cur, next) == next) return;
    }
  }
  std::vector<std::vector<uint8_t>> multi_get(const std::vector<std::string>& keys) override {
    std::vector<std::vector<uint8_t>> out;
    out.reserve(keys.size());
    for (const auto& k : keys) out.push_back(get(k));
    return out;
  }
  void multi_set(const std::vector<std::string>& keys,
                 const std::vector<std::vector<uint8_t>>& values) override {
    for (size_t i = 0; i < keys.size() && i < values.size(); ++i) set(keys[i], values[i]);
  }
  void set_timeout(std::chrono::milliseconds timeout) override {
    phi::distributed::Store::set_timeout(timeout);
    store_->setTimeout(timeout);
  }

 private:
  // torch's store errors become the engine's typed errors (a timeout stays a timeout).
  template <typename F>
  void Call(F&& f, const std::string& key) {
    try {
      f();
    } catch (const c10::Error& e) {
      std::string msg = e.what_without_backtrace();
      std::string lower = msg;
      std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
      std::string where = "torch store (key '" + key + "'): " + msg;
      if (lower.find("timeout") != std::string::npos ||
          lower.find("timed out") != std::string::npos) {
        throw phi::TimeoutError(where);
      }
      throw phi::UnavailableError(where);
    }
  }
  c10::intrusive_ptr<c10d::Store> store_;
};

thread_local bool tl_on_completer = false;

}  // namespace

// ------------------------------------------------------------------ completion
class Completer {
 public:
  explicit Completer() : thread_([this] { Loop(); }) {}
  ~Completer() { Stop(); }

  // `w` has completed and somebody holds its future: mark it on this thread.
  void Ready(c10::intrusive_ptr<PaddleWork> w);
  // Poll `w` (an op off the comm stream) until it completes, then mark its future.
  void Poll(c10::intrusive_ptr<PaddleWork> w);
  void Stop();
  static bool OnThisThread() { return tl_on_completer; }

 private:
  void Loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<PaddleWork>> ready_;
  std::vector<c10::intrusive_ptr<PaddleWork>> poll_;
  bool stop_ = false;
  std::thread thread_;
};

class PaddleWork : public c10d::Work {
 public:
  enum class Mode { kStream, kPoll };

  PaddleWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
             std::vector<at::Tensor> keep, std::shared_ptr<Completer> completer,
             std::chrono::milliseconds timeout, Mode mode, bool device)
      : c10d::Work(rank, type),
        outputs_(std::move(outputs)),
        keep_(std::move(keep)),
        completer_(std::move(completer)),
        timeout_(timeout),
        mode_(mode),
        device_(device),
        mark_inline_(Completer::OnThisThread()),
        future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {}

  void SetTask(TaskPtr task, std::function<void()> post) {
    task_ = std::move(task);
    post_ = std::move(post);
  }
  void SetMode(Mode m) { mode_ = m; }

  bool isCompleted() override {
    if (mode_ == Mode::kPoll) return PollFinish();
    std::lock_guard<std::mutex> lk(mutex_);
    return completed_;
  }
  int sourceRank() const override { return task_ ? task_->source_rank() : -1; }
  std::vector<at::Tensor> result() override { return outputs_; }
  void synchronize() override {}
  void abort() override {
    if (task_) task_->Abort("aborted through torch (Work.abort)");
  }

  bool wait(std::chrono::milliseconds timeout) override {
    const auto limit = timeout > std::chrono::milliseconds::zero() ? timeout : timeout_;
    if (mode_ == Mode::kPoll) {
      try {
        if (device_) {
          task_->Synchronize();
        } else {
          task_->Wait(limit);
        }
      } catch (const std::exception& e) {
        if (!task_->IsCompleted()) {
          TORCH_CHECK(false, "paddle_like: ", c10d::opTypeToString(opType_), " timed out "
                      "after ", limit.count(), " ms: ", e.what());
        }
      }
      FinishFromTask();
    }
    std::unique_lock<std::mutex> lk(mutex_);
    if (!cv_.wait_for(lk, limit, [&] { return completed_; })) {
      lk.unlock();
      std::string why;
      try {
        task_->Wait(std::chrono::milliseconds(1));
      } catch (const std::exception& e) {
        why = e.what();
      }
      TORCH_CHECK(false, "paddle_like: ", c10d::opTypeToString(opType_), " timed out after ",
                  limit.count(), " ms", why.empty() ? "" : ": ", why);
    }
    std::exception_ptr err = exception_;
    const bool requested = future_requested_;
    lk.unlock();
    if (requested) MarkFuture();
    if (err) std::rethrow_exception(err);
    return true;
  }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    bool done;
    {
      std::lock_guard<std::mutex> lk(mutex_);
      future_requested_ = true;
      done = completed_;
    }
    if (done) {
      MarkFuture();
    } else if (mode_ == Mode::kPoll) {
      completer_->Poll(c10::intrusive_ptr<PaddleWork>::reclaim_copy(this));
    }
    return future_;
  }

  // kPoll: finishes the work when its task has ended. Returns whether it is complete.
  bool PollFinish() {
    {
      std::lock_guard<std::mutex> lk(mutex_);
      if (completed_) return true;
    }
    if (!task_->IsCompleted()) return false;
    FinishFromTask();
    std::lock_guard<std::mutex> lk(mutex_);
    return completed_;
  }

  // The task has ended: its error, the copy-outs, completion, the future.
  void FinishFromTask() {
    if (finishing_.exchange(true)) {
      std::unique_lock<std::mutex> lk(mutex_);  // someone else finishes it: wait for them
      cv_.wait(lk, [&] { return completed_; });
      return;
    }
    std::exception_ptr err;
    try {
      if (device_) {
        task_->Synchronize();
      } else {
        task_->Wait();
      }
      if (post_) post_();
    } catch (const std::exception& e) {
      err = TorchError(e.what());
    } catch (...) {
      err = std::current_exception();
    }
    bool requested;
    {
      std::lock_guard<std::mutex> lk(mutex_);
      completed_ = true;
      exception_ = err;
      requested = future_requested_;
      post_ = nullptr;
      keep_.clear();
    }
    cv_.notify_all();
    if (requested) {
      if (mark_inline_) {
        MarkFuture();
      } else {
        completer_->Ready(c10::intrusive_ptr<PaddleWork>::reclaim_copy(this));
      }
    }
  }

  // The future of an op that can no longer complete (its group is gone) raises `why`.
  void FailFuture(const std::string& why) {
    if (marked_.exchange(true)) return;
    future_->setError(TorchError(why));
  }

  void MarkFuture() {
    if (marked_.exchange(true)) return;
    std::exception_ptr err;
    {
      std::lock_guard<std::mutex> lk(mutex_);
      err = exception_;
    }
    if (err) {
      future_->setError(err);
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
  }

 private:
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_;
  std::shared_ptr<Completer> completer_;
  std::chrono::milliseconds timeout_;
  Mode mode_;
  // A device op: the host waits for it (Task::Synchronize) before the work completes, so
  // that torch's streams, which the engine does not know, may use the outputs.
  const bool device_;
  const bool mark_inline_;  // issued by a future callback: mark where the op completes
  TaskPtr task_;
  std::function<void()> post_;
  bool future_requested_ = false;  // under mutex_
  std::atomic<bool> finishing_{false};
  std::atomic<bool> marked_{false};
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

void Completer::Ready(c10::intrusive_ptr<PaddleWork> w) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!stop_) {
      ready_.push_back(std::move(w));
      cv_.notify_one();
      return;
    }
  }
  w->MarkFuture();
}

void Completer::Poll(c10::intrusive_ptr<PaddleWork> w) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!stop_) {
      poll_.push_back(std::move(w));
      cv_.notify_one();
      return;
    }
  }
  if (w->PollFinish()) w->MarkFuture();
}

void Completer::Stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // the last reference went away in a future callback
  } else {
    thread_.join();
  }
}

void Completer::Loop() {
  tl_on_completer = true;
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (ready_.empty()) {
      if (stop_) break;
      if (poll_.empty()) {
        cv_.wait(lk, [&] { return stop_ || !ready_.empty() || !poll_.empty(); });
      } else {
        cv_.wait_for(lk, std::chrono::microseconds(200),
                     [&] { return stop_ || !ready_.empty(); });
      }
    }
    std::deque<c10::intrusive_ptr<PaddleWork>> ready;
    ready.swap(ready_);
    std::vector<c10::intrusive_ptr<PaddleWork>> polls;
    polls.swap(poll_);
    lk.unlock();
    for (auto& w : ready) w->MarkFuture();
    ready.clear();
    std::vector<c10::intrusive_ptr<PaddleWork>> pending;
    for (auto& w : polls) {
      if (w->PollFinish()) {
        w->MarkFuture();
      } else {
        pending.push_back(std::move(w));
      }
    }
    polls.clear();
    lk.lock();
    for (auto& w : pending) poll_.push_back(std::move(w));
  }
  // Stopped (the group is destroyed): what is still polled gets its result or an error.
  std::vector<c10::intrusive_ptr<PaddleWork>> left;
  left.swap(poll_);
  lk.unlock();
  for (auto& w : left) {
    if (w->PollFinish()) {
      w->MarkFuture();
    } else {
      w->FailFuture("the process group was destroyed before this op completed");
    }
  }
}

// ------------------------------------------------------------------ the group
struct ProcessGroupPaddle::Issue {
  Issue(c10d::OpType type, const char* name, at::Device device,
        std::chrono::milliseconds timeout = c10d::kUnsetTimeout)
      : type(type), name(name), device(device), timeout(timeout) {}

  c10d::OpType type;
  const char* name;
  at::Device device;
  std::vector<at::Tensor> outputs;  // result() and the future's value
  std::vector<at::Tensor> keep;     // inputs and staging buffers, alive until the end
  std::function<TaskPtr(EngineGroup*)> start;
  std::function<void()> post;  // after success: copy-outs
  bool p2p = false;
  std::chrono::milliseconds timeout = c10d::kUnsetTimeout;  // the op's; unset: the group's
};

ProcessGroupPaddle::ProcessGroupPaddle(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int size, std::chrono::milliseconds timeout, int gid)
    : c10d::ProcessGroup(rank, size),
      torch_store_(store),
      store_(std::make_shared<TorchStore>(store)),
      timeout_(timeout),
      gid_(gid),
      completer_(std::make_shared<Completer>()) {
  distributed::BackendOptions o;
  o.store = std::make_shared<phi::distributed::PrefixStore>("cpu", store_);
  o.rank = rank;
  o.size = size;
  o.gid = gid;
  o.timeout = timeout;
  try {
    cpu_ = distributed::BackendRegistry::Instance().Create("gloo", o);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "paddle_like: cannot create the process group: ", e.what());
  }
  init();
}

ProcessGroupPaddle::~ProcessGroupPaddle() {
  // The last reference usually drops in Python, with the GIL held. Draining below waits for
  // the completer's thread, which may need the GIL to finish a work (marking its future runs
  // and releases Python callbacks): holding it here deadlocks, so it is let go meanwhile.
  PyThreadState* saved =
      Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  // The engine groups first: their streams drain, completing the last works.
  cuda_.reset();
  cpu_.reset();
  completer_->Stop();
  if (saved != nullptr) PyEval_RestoreThread(saved);
}

EngineGroup* ProcessGroupPaddle::Engine(const at::Device& device) {
  if (device.is_cpu()) return cpu_.get();
  TORCH_CHECK(device.is_cuda(), "paddle_like: tensors on ", device, " are not supported");
  std::lock_guard<std::mutex> lk(mu_);
  if (!cuda_) {
    auto& registry = distributed::BackendRegistry::Instance();
    TORCH_CHECK(registry.Has("nccl"), "paddle_like: CUDA tensors need the NCCL backend, "
                "which this build of paddle_like does not have (built without CUDA/NCCL)");
    distributed::BackendOptions o;
    o.store = std::make_shared<phi::distributed::PrefixStore>("cuda", store_);
    o.rank = getRank();
    o.size = getSize();
    o.gid = gid_;
    o.timeout = timeout_;
    o.device_id = device.index();
    try {
      cuda_ = registry.Create("nccl", o);
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "paddle_like: cannot create the NCCL group: ", e.what());
    }
    cuda_device_ = device.index();
  }
  TORCH_CHECK(device.index() == cuda_device_, "paddle_like: this group runs on cuda:",
              cuda_device_, ", not on ", device);
  return cuda_.get();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPaddle::Run(Issue issue) {
  EngineGroup* pg = Engine(issue.device);
  if (issue.device.is_cuda()) {
    // The engine orders its streams after its own calc stream, not torch's: the host
    // waits for torch's current stream before the op (the op's inputs are ready).
    c10::impl::VirtualGuardImpl impl(c10::DeviceType::CUDA);
    impl.getStream(issue.device).synchronize();
  }
  bool coalescing;
  {
    std::lock_guard<std::mutex> lk(mu_);
    coalescing = coalescing_ != nullptr;
    TORCH_CHECK(!coalescing || coalescing_ == pg, "paddle_like: all ops between "
                "startCoalescing and endCoalescing must be on one device type");
  }
  const bool on_stream = !coalescing && !issue.p2p && issue.device.is_cpu();
  const auto timeout =
      issue.timeout > std::chrono::milliseconds::zero() ? issue.timeout : timeout_;
  auto work = c10::make_intrusive<PaddleWork>(
      getRank(), issue.type, std::move(issue.outputs), std::move(issue.keep), completer_,
      timeout, on_stream ? PaddleWork::Mode::kStream : PaddleWork::Mode::kPoll,
      issue.device.is_cuda());
  TaskPtr task;
  try {
    task = issue.start(pg);
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "paddle_like ", issue.name, ": ", e.what());
  }
  work->SetTask(task, std::move(issue.post));
  if (coalescing) {
    std::lock_guard<std::mutex> lk(mu_);
    coalesced_.push_back(work);
  } else if (on_stream) {
    // In stream order right behind the op: completes the work when the op has ended.
    pg->GetDeviceContext(phi::CPUPlace())->stream()->Launch([work] { work->FinishFromTask(); });
  }
  return work;
}

void ProcessGroupPaddle::startCoalescing() {
  std::lock_guard<std::mutex> lk(mu_);
  TORCH_CHECK(coalescing_ == nullptr, "paddle_like: startCoalescing called twice");
  coalescing_ = cpu_.get();
  coalescing_->StartCoalescing();
}

void ProcessGroupPaddle::endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& /*reqs*/) {
  EngineGroup* pg;
  {
    std::lock_guard<std::mutex> lk(mu_);
    TORCH_CHECK(coalescing_ != nullptr, "paddle_like: endCoalescing without startCoalescing");
    pg = coalescing_;
    coalescing_ = nullptr;
    coalesced_.clear();
  }
  try {
    pg->EndCoalescing();
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "paddle_like: a coalesced group failed: ", e.what());
  }
}

// ------------------------------------------------------------------ collectives
c10::intrusive_ptr<c10d::Work> ProcessGroupPaddle::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  CheckSingle(tensors, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "paddle_like broadcast: rootTensor must be 0 (one tensor "
              "per process), got ", opts.rootTensor);
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "paddle_like broadcast: root ",
              opts.rootRank, " is not a rank of this group of ", getSize());
  Issue is(c10d::OpType::BROADCAST, "broadcast", tensors[0].device(), opts.timeout);
  is.outputs = tensors;
  phi::DenseTensor t = Wrap(Contiguous(tensors[0], &is.post, true), false, is.name);
  distributed::BroadcastOptions o;
  o.source_rank = opts.rootRank;
  is.start = [t, o](EngineGroup* pg) mutable { return pg->Broadcast(&t, t, o, false, false); };
  return Run(std::move(is));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPaddle::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  CheckSingle(tensors, "allreduce");
  Issue is(c10d::OpType::ALLREDUCE, "allreduce", tensors[0].device(), opts.timeout);
  is.outputs = tensors;
  distributed::AllreduceOptions o;
  o.reduce_op = ToReduceOp(opts.reduceOp, &o.premul_factor, is.name);
  phi::DenseTensor t = Wrap(Contiguous(tensors[0], &is.post, true), true, is.name);
  is.start = [t, o](EngineGroup* pg) mutable { return pg->AllReduce(&t, t, o, false, false); };
  return Run(std::move(is));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPaddle::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "paddle_like allreduce_coalesced: no tensors");
  for (const auto& t : tensors) CheckLike(t, tensors[0], "allreduce_coalesced", "input");
  Issue is(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced",
           tensors[0].device(), opts.timeout);
  is.outputs = tensors;
  distributed::AllreduceOptions o;
  o.reduce_op = ToReduceOp(opts.reduceOp, &o.premul_factor, is.name);
  std::vector<phi::DenseTensor> ts;
  for (const auto& t : tensors) ts.push_back(Wrap(t, true, is.name));
  {
    std::lock_guard<std::mutex> lk(mu_);
    TORCH_CHECK(coalescing_ == nullptr, "paddle_like allreduce_coalesced: not inside "
                "startCoalescing/endCoalescing");
  }
  // One engine group; its task completes when every all-reduce of it has.
  is.start = [ts, o](EngineGroup* pg) mutable -> TaskPtr {
    pg->StartCoalescing();
    try {
      for (auto& t : ts) pg->AllReduce(&t, t, o, false, false);
    } catch (...) {
      try {
        pg->EndCoalescing();
      } catch (...) {
      }
      throw;
    }
    return pg->EndCoalescing();
  };
  return Run(std::move(is));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPaddle::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  CheckSingle(tensors, "reduce");
  TORCH_CHECK(opts.rootTensor == 0, "paddle_like reduce: rootTensor must be 0");
  Issue is(c10d::OpType::REDUCE, "reduce", tensors[0].device(), opts.timeout);
  is.outputs = tensors;
  distributed::ReduceOptions o;
  o.reduce_op = ToReduceOp(opts.reduceOp, &o.premul_factor, is.name);
  o.root_rank = opts.rootRank;
  phi::DenseTensor t = Wrap(Contiguous(tensors[0], &is.post, true), true, is.name);
  is.start = [t, o](EngineGroup* pg) mutable { return pg->Reduce(&t, t, o, false, false); };
  return Run(std::move(is));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPaddle::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  CheckSingle(inputs, "allgather", true);
  TORCH_CHECK(outputs.size() == 1, "paddle_like allgather takes one output list per process, "
              "got ", outputs.size());
  auto& outs = outputs[0];
  const at::Tensor& in = inputs[0];
  TORCH_CHECK(static_cast<int>(outs.size()) == getSize(), "paddle_like allgather: the output "
              "list has ", outs.size(), " tensors, the group ", getSize(), " ranks");
  for (const auto& o : outs) {
    CheckLike(o, in, "allgather", "output");
    TORCH_CHECK(o.numel() == in.numel(), "paddle_like allgather: an output tensor has ",
                o.numel(), " elements, the input ", in.numel());
  }
  Issue is(c10d::OpType::ALLGATHER, "allgather", in.device(), opts.timeout);
  is.outputs = outs;
  is.keep = {in};
  phi::DenseTensor src = Wrap(in, false, is.name);
  phi::DenseTensor dst;
  if (Consecutive(outs)) {
    dst = WrapRange(outs[0], TotalNumel(outs), false, is.name);
  } else {
    at::Tensor flat = at::empty({in.numel() * getSize()}, in.options());
    is.keep.push_back(flat);
    dst = Wrap(flat, false, is.name);
    is.post = [flat, outs] { Unflatten(flat, outs); };
  }
  is.start = [src, dst](EngineGroup* pg) mutable {
    return pg->AllGather(&dst, src, 0, -1, false, false);
  };
  return Run(std::move(is));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPaddle::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  CheckTensor(input, "_allgather_base", "input");
  CheckLike(output, input, "_allgather_base", "output");
  TORCH_CHECK(output.numel() == input.numel() * getSize(), "paddle_like _allgather_base: the "
              "output has ", output.numel(), " elements, not world size x input = ",
              input.numel() * getSize());
  Issue is(c10d::OpType::_ALLGATHER_BASE, "_allgather_base", input.device(), opts.timeout);
  is.outputs = {output};
  is.keep = {input};
  phi::DenseTensor src = Wrap(input, false, is.name), dst = Wrap(output, false, is.name);
  is.start = [src, dst](EngineGroup* pg) mutable {
    return pg->AllGather(&dst, src, 0, -1, false, false);
  };
  return Run(std::move(is));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPaddle::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(!inputs.empty(), "paddle_like allgather_coalesced: no input tensors");
  for (const auto& t : inputs) CheckLike(t, inputs[0], "allgather_coalesced", "input");
  TORCH_CHECK(static_cast<int>(output_lists.size()) == getSize(), "paddle_like "
              "allgather_coalesced: ", output_lists.size(), " output lists for ", getSize(),
              " ranks");
  std::vector<at::Tensor> all_outs;
  for (const auto& list : output_lists) {
    TORCH_CHECK(list.size() == inputs.size(), "paddle_like allgather_coalesced: an output "
                "list has ", list.size(), " tensors, the input list ", inputs.size());
    for (size_t i = 0; i < list.size(); ++i) {
      CheckLike(list[i], inputs[0], "allgather_coalesced", "output");
      TORCH_CHECK(list[i].numel() == inputs[i].numel(), "paddle_like allgather_coalesced: "
                  "output ", i, " has ", list[i].numel(), " elements, its input ",
                  inputs[i].numel());
      all_outs.push_back(list[i]);
    }
  }
  Issue is(c10d::OpType::ALLGATHER_COALESCED, "allgather_coalesced",
           inputs[0].device(), opts.timeout);
  for (const auto& list : output_lists) is.outputs.insert(is.outputs.end(), list.begin(), list.end());
  at::Tensor flat_in = Flatten(inputs);
  at::Tensor flat_out = at::empty({flat_in.numel() * getSize()}, flat_in.options());
  is.keep = {flat_in, flat_out};
  phi::DenseTensor src = Wrap(flat_in, false, is.name), dst = Wrap(flat_out, false, is.name);
  is.post = [flat_out, all_outs] { Unflatten(flat_out, all_outs); };
  is.start = [src, dst](EngineGroup* pg) mutable {
    return pg->AllGather(&dst, src, 0, -1, false, false);
  };
  return Run(std::move(is));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPaddle::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  CheckSingle(inputs, "gather", true);
  const at::Tensor& in = inputs[0];
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < getSize(), "paddle_like gather: root ", root,
              " is not a rank of this group of ", getSize());
  Issue is(c10d::OpType::GATHER, "gather", in.device(), opts.timeout);
  is.keep = {in};
  std::vector<phi::DenseTensor> outs;
  if (getRank() == root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                "paddle_like gather: the root needs one output list of ", getSize(),
                " tensors");
    for (const auto& o : outputs[0]) {
      CheckLike(o, in, "gather", "output");
      TORCH_CHECK(o.numel() == in.numel(), "paddle_like gather: an output tensor has ",
                  o.numel(), " elements, the input ", in.numel());
      outs.push_back(Wrap(o, false, is.name));
    }
    is.outputs = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "paddle_like gather: only the root takes output tensors");
  }
  phi::DenseTensor src = Wrap(in, false, is.name);
  distributed::GatherOptions o;
  o.root_rank = root;
  is.start = [src, outs, o](EngineGroup* pg) mutable {
    return pg->Gather(&outs, src, o, false, false);
  };
  return Run(std::move(is));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPaddle::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  CheckSingle(outputs, "scatter", true);
  const at::Tensor& out = outputs[0];
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < getSize(), "paddle_like scatter: root ", root,
              " is not a rank of this group of ", getSize());
  Issue is(c10d::OpType::SCATTER, "scatter", out.device(), opts.timeout);
  is.outputs = outputs;
  phi::DenseTensor dst = Wrap(out, false, is.name);
  phi::DenseTensor src;
  if (getRank() == root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                "paddle_like scatter: the root needs one input list of ", getSize(),
                " tensors");
    for (const auto& t : inputs[0]) {
      CheckLike(t, out, "scatter", "input");
      TORCH_CHECK(t.numel() == out.numel(), "paddle_like scatter: an input tensor has ",
                  t.numel(), " elements, the output ", out.numel());
    }
    if (Consecutive(inputs[0])) {
      src = WrapRange(inputs[0][0], TotalNumel(inputs[0]), false, is.name);
      is.keep = inputs[0];
    } else {
      at::Tensor flat = Flatten(inputs[0]);
      is.keep = {flat};
      src = Wrap(flat, false, is.name);
    }
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "paddle_like scatter: only the root takes input tensors");
    src = dst;
  }
  distributed::ScatterOptions o;
  o.root_rank = root;
  is.start = [src, dst, o](EngineGroup* pg) mutable {
    return pg->Scatter(&dst, src, o, false, false);
  };
  return Run(std::move(is));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPaddle::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  CheckSingle(outputs, "reduce_scatter", true);
  const at::Tensor& out = outputs[0];
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
              "paddle_like reduce_scatter needs one input list of ", getSize(), " tensors");
  for (const auto& t : inputs[0]) {
    CheckLike(t, out, "reduce_scatter", "input");
    TORCH_CHECK(t.numel() == out.numel(), "paddle_like reduce_scatter: an input tensor has ",
                t.numel(), " elements, the output ", out.numel());
  }
  Issue is(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", out.device(), opts.timeout);
  is.outputs = outputs;
  distributed::ReduceScatterOptions o;
  o.reduce_op = ToReduceOp(opts.reduceOp, &o.premul_factor, is.name);
  phi::DenseTensor src;
  if (Consecutive(inputs[0])) {
    src = WrapRange(inputs[0][0], TotalNumel(inputs[0]), true, is.name);
    is.keep = inputs[0];
  } else {
    at::Tensor flat = Flatten(inputs[0]);
    is.keep = {flat};
    src = Wrap(flat, true, is.name);
  }
  phi::DenseTensor dst = Wrap(out, true, is.name);
  is.start = [src, dst, o](EngineGroup* pg) mutable {
    return pg->ReduceScatter(&dst, src, o, false, false);
  };
  return Run(std::move(is));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPaddle::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  CheckTensor(input, "_reduce_scatter_base", "input");
  CheckLike(output, input, "_reduce_scatter_base", "output");
  TORCH_CHECK(input.numel() == output.numel() * getSize(), "paddle_like _reduce_scatter_base: "
              "the input has ", input.numel(), " elements, not world size x output = ",
              output.numel() * getSize());
  Issue is(c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base",
           input.device(), opts.timeout);
  is.outputs = {output};
  is.keep = {input};
  distributed::ReduceScatterOptions o;
  o.reduce_op = ToReduceOp(opts.reduceOp, &o.premul_factor, is.name);
  phi::DenseTensor src = Wrap(input, true, is.name), dst = Wrap(output, true, is.name);
  is.start = [src, dst, o](EngineGroup* pg) mutable {
    return pg->ReduceScatter(&dst, src, o, false, false);
  };
  return Run(std::move(is));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPaddle::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  CheckTensor(input, "alltoall_base", "input");
  CheckLike(output, input, "alltoall_base", "output");
  const int size = getSize();
  // Rows of dim 0 as the engine's splits; torch's empty list means equal rows per rank.
  auto splits = [&](std::vector<int64_t> s, const at::Tensor& t, const char* what) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    if (s.empty()) {
      TORCH_CHECK(rows % size == 0, "paddle_like alltoall_base: the ", what, " has ", rows,
                  " rows, not a multiple of the world size ", size);
      s.assign(size, rows / size);
    }
    TORCH_CHECK(static_cast<int>(s.size()) == size, "paddle_like alltoall_base: ", s.size(),
                " ", what, " splits for ", size, " ranks");
    int64_t total = 0;
    for (int64_t x : s) {
      TORCH_CHECK(x >= 0, "paddle_like alltoall_base: a negative ", what, " split");
      total += x;
    }
    TORCH_CHECK(total == rows, "paddle_like alltoall_base: the ", what, " splits add up to ",
                total, " rows, the ", what, " has ", rows);
    return s;
  };
  std::vector<int64_t> in_splits = splits(input_split_sizes, input, "input");
  std::vector<int64_t> out_splits = splits(output_split_sizes, output, "output");
  auto wrap2d = [&](const at::Tensor& t) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const int64_t row = rows == 0 ? 0 : t.numel() / rows;
    phi::DenseTensor flat = Wrap(t, false, "alltoall_base");
    const int64_t scale = flat.numel() / std::max<int64_t>(t.numel(), 1);  // bytes per elem
    flat.Resize(phi::DDim({rows, row * (t.numel() == 0 ? 1 : scale)}));
    return flat;
  };
  Issue is(c10d::OpType::ALLTOALL_BASE, "alltoall_base", input.device(), opts.timeout);
  is.outputs = {output};
  is.keep = {input};
  phi::DenseTensor src = wrap2d(input), dst = wrap2d(output);
  is.start = [src, dst, in_splits, out_splits](EngineGroup* pg) mutable {
    return pg->AllToAll(&dst, src, out_splits, in_splits, false, false);
  };
  return Run(std::move(is));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPaddle::alltoall(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == getSize() &&
                  static_cast<int>(outputs.size()) == getSize(),
              "paddle_like alltoall needs one input and one output tensor per rank (",
              getSize(), "), got ", inputs.size(), " and ", outputs.size());
  for (const auto& t : inputs) CheckLike(t, inputs[0], "alltoall", "input");
  for (const auto& t : outputs) CheckLike(t, inputs[0], "alltoall", "output");
  Issue is(c10d::OpType::ALLTOALL, "alltoall", inputs[0].device(), opts.timeout);
  is.outputs = outputs;
  is.keep = inputs;
  std::vector<phi::DenseTensor> ins, outs;
  for (const auto& t : inputs) ins.push_back(Wrap(t, false, is.name));
  for (const auto& t : outputs) outs.push_back(Wrap(t, false, is.name));
  is.start = [ins, outs](EngineGroup* pg) mutable {
    return pg->AllToAll(&outs, ins, false, false);
  };
  return Run(std::move(is));
}

// ------------------------------------------------------------------ point to point
c10::intrusive_ptr<c10d::Work> ProcessGroupPaddle::send(std::vector<at::Tensor>& tensors,
                                                        int dst_rank, int tag) {
  CheckSingle(tensors, "send");
  Issue is(c10d::OpType::SEND, "send", tensors[0].device());
  is.keep = tensors;
  is.p2p = true;
  phi::DenseTensor t = Wrap(Contiguous(tensors[0], &is.post, false), false, is.name);
  distributed::P2POptions o;
  o.tag = tag;
  is.start = [t, dst_rank, o](EngineGroup* pg) {
    return pg->Send(t, dst_rank, 0, -1, false, false, o);
  };
  return Run(std::move(is));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPaddle::recv(std::vector<at::Tensor>& tensors,
                                                        int src_rank, int tag) {
  CheckSingle(tensors, "recv");
  Issue is(c10d::OpType::RECV, "recv", tensors[0].device());
  is.outputs = tensors;
  is.p2p = true;
  phi::DenseTensor t = Wrap(Contiguous(tensors[0], &is.post, true), false, is.name);
  distributed::P2POptions o;
  o.tag = tag;
  is.start = [t, src_rank, o](EngineGroup* pg) mutable {
    return pg->Recv(&t, src_rank, 0, -1, false, false, o);
  };
  return Run(std::move(is));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPaddle::recvAnysource(
    std::vector<at::Tensor>& tensors, int tag) {
  CheckSingle(tensors, "recvAnysource");
  Issue is(c10d::OpType::RECVANYSOURCE, "recvAnysource", tensors[0].device());
  is.outputs = tensors;
  is.p2p = true;
  phi::DenseTensor t = Wrap(Contiguous(tensors[0], &is.post, true), false, is.name);
  distributed::P2POptions o;
  o.tag = tag;
  is.start = [t, o](EngineGroup* pg) mutable {
    return pg->Recv(&t, distributed::kAnySource, 0, -1, false, false, o);
  };
  return Run(std::move(is));
}

// ------------------------------------------------------------------ barriers
c10::intrusive_ptr<c10d::Work> ProcessGroupPaddle::barrier(const c10d::BarrierOptions& opts) {
  Issue is(c10d::OpType::BARRIER, "barrier", at::Device(at::kCPU), opts.timeout);
  is.start = [](EngineGroup* pg) { return pg->Barrier(); };
  return Run(std::move(is));
}

// Through the store, as torch's Gloo reports it: rank 0 waits for every rank's arrival
// (until the timeout) and names those that did not arrive; the others wait for its answer.
void ProcessGroupPaddle::monitoredBarrier(const c10d::BarrierOptions& opts,
                                          bool wait_all_ranks) {
  const auto timeout = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  const std::string base =
      "paddle_like/monitored_barrier/" + std::to_string(monitored_barriers_++) + "/";
  const int rank = getRank(), size = getSize();
  if (rank != 0) {
    torch_store_->set(base + "arrived/" + std::to_string(rank), std::vector<uint8_t>{1});
    try {
      torch_store_->wait({base + "passed/" + std::to_string(rank)}, timeout);
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "[Rank ", rank, "]: rank 0 did not pass monitoredBarrier within ",
                  timeout.count(), " ms (", e.what(), ")");
    }
    return;
  }
  const auto deadline = Clock::now() + timeout;
  std::vector<int> failed;
  for (int r = 1; r < size; ++r) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    try {
      torch_store_->wait({base + "arrived/" + std::to_string(r)},
                         std::max(left, std::chrono::milliseconds(1)));
    } catch (const std::exception&) {
      TORCH_CHECK(wait_all_ranks, "[Rank 0]: Rank ", r, " failed to pass monitoredBarrier in ",
                  timeout.count(), " ms");
      failed.push_back(r);
    }
  }
  if (!failed.empty()) {
    std::ostringstream os;
    for (size_t i = 0; i < failed.size(); ++i) os << (i ? ", " : "") << failed[i];
    TORCH_CHECK(false, "[Rank 0]: Ranks ", os.str(), " failed to pass monitoredBarrier in ",
                timeout.count(), " ms");
  }
  for (int r = 1; r < size; ++r) {
    torch_store_->set(base + "passed/" + std::to_string(r), std::vector<uint8_t>{1});
  }
}

uint64_t ProcessGroupPaddle::getSequenceNumberForGroup() {
  auto* s = dynamic_cast<distributed::ProcessGroupWithStream*>(cpu_.get());
  return s ? s->seq() : 0;
}

// ------------------------------------------------------------------ creation
c10::intrusive_ptr<c10d::ProcessGroup> CreateProcessGroupPaddle(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout, const std::string& group_name) {
  TORCH_CHECK(store, "paddle_like: no store");
  TORCH_CHECK(size > 0 && rank >= 0 && rank < size, "paddle_like: rank ", rank,
              " is not in a group of ", size);
  // The engine's group id: the same on every member. torch names groups "0", "1", ... by
  // default; other names are hashed. Offset from the ids paddle_like::dist gives its groups.
  int gid;
  char* end = nullptr;
  long n = std::strtol(group_name.c_str(), &end, 10);
  if (!group_name.empty() && end != nullptr && *end == '\0' && n >= 0 && n < (1 << 20)) {
    gid = (1 << 20) + static_cast<int>(n);
  } else {
    uint32_t h = 2166136261u;  // FNV-1a: stable across processes, unlike std::hash
    for (unsigned char c : group_name) h = (h ^ c) * 16777619u;
    gid = (2 << 20) + static_cast<int>(h % (1u << 20));
  }
  if (timeout <= std::chrono::milliseconds::zero()) timeout = kProcessGroupDefaultTimeout;
  return c10::make_intrusive<ProcessGroupPaddle>(store, rank, size, timeout, gid);
}

}  // namespace torch_backend
}  // namespace paddle_like
