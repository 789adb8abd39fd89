// MpiProgress (mpi_comm_context_internal.h): the one thread that completes the MPI engine's
// posted sends and receives, and MpiCommContext's PostSend / PostRecv.
#include <sched.h>

#include <algorithm>
#include <thread>

#include <glog/logging.h>

#include "phi/core/distributed/mpi_comm_context_internal.h"
#include "phi/core/distributed/spin_policy.h"

namespace phi {
namespace distributed {
namespace {
using Clock = std::chrono::steady_clock;
constexpr auto kMaxSleep = std::chrono::microseconds(200);
constexpr auto kFirstSleep = std::chrono::microseconds(20);
}  // namespace

MpiProgress& MpiProgress::Get() {
  static auto* progress = new MpiProgress();  // never destroyed: Stop() ends the thread
  return *progress;
}

void MpiProgress::Add(Op op) {
  std::lock_guard<std::mutex> lk(mu_);
  if (stop_) {
    // MPI is being finalized: nothing may be posted any more.
    CommContext::P2PDone done = std::move(op.done);
    MPI_Request_free(&op.req);
    done(std::make_exception_ptr(UnavailableError(op.owner->describe() +
                                                  ": MPI is being finalized")));
    return;
  }
  // The spin bound as the posting thread sees it: the progress thread never reads the flag
  // itself (a program may change it between ops, while this thread still lingers).
  spin_bound_ = SpinPolicy::Bound();
  incoming_.push_back(std::move(op));
  news_.store(true, std::memory_order_release);
  if (!started_) {
    started_ = true;
    std::thread([this] { Loop(); }).detach();
  }
  cv_.notify_one();
}

void MpiProgress::Drop(MpiCommContext* owner, const std::string& why) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!started_ || stop_) return;
  drops_.emplace_back(owner, why);
  const uint64_t ticket = ++drops_asked_;
  news_.store(true, std::memory_order_release);
  cv_.notify_all();
  cv_.wait(lk, [&] { return drops_done_ >= ticket || stop_; });
}

void MpiProgress::Wake() {
  std::lock_guard<std::mutex> lk(mu_);
  news_.store(true, std::memory_order_release);
  cv_.notify_all();
}

void MpiProgress::Stop() {
  std::unique_lock<std::mutex> lk(mu_);
  if (!started_ || stop_) {
    stop_ = true;
    return;
  }
  drops_.emplace_back(nullptr, "MPI is being finalized");
  const uint64_t ticket = ++drops_asked_;
  news_.store(true, std::memory_order_release);
  cv_.notify_all();
  cv_.wait(lk, [&] { return drops_done_ >= ticket; });
  stop_ = true;
  cv_.notify_all();
}

void MpiProgress::Cancel(Op* op) {
  if (op->req == MPI_REQUEST_NULL) return;
  if (op->what.is_send) {
    // MPI may not take a send back: the request is let go (its communicator is broken, so
    // nothing matches against it any more).
    MPI_Request_free(&op->req);
    return;
  }
  // A cancelled receive completes at once, cancelled or received: the buffer is free after.
  MPI_Cancel(&op->req);
  MPI_Wait(&op->req, MPI_STATUS_IGNORE);
}

void MpiProgress::End(size_t i, std::exception_ptr error, const MPI_Status* status) {
  Op op = std::move(active_[i]);
  active_[i] = std::move(active_.back());
  active_.pop_back();
  reqs_[i] = reqs_.back();
  reqs_.pop_back();
  if (!error && status != nullptr && !op.what.is_send) {
    try {
      op.owner->CheckReceived(op.what, *status);
    } catch (...) {
      error = std::current_exception();
    }
  }
  try {
    op.done(error);
  } catch (const std::exception& e) {
    LOG(ERROR) << "an MPI point-to-point completion raised: " << e.what();
  }
}

void MpiProgress::Loop() {
  std::vector<int> indices;
  std::vector<MPI_Status> statuses;
  auto sleep = kFirstSleep;
  auto idle_since = Clock::now();
  std::chrono::microseconds bound{0};  // spin_bound_ as of the last op taken
  for (;;) {
    std::vector<std::pair<MpiCommContext*, std::string>> drops;
    uint64_t drops_ticket = 0;
    // Nothing pending: linger for the spin bound after the last completion, so that the next
    // op (a program's next step) needs no wake-up, then block.
    while (active_.empty() && !news_.load(std::memory_order_acquire) &&
           Clock::now() - idle_since < bound) {
      sched_yield();
    }
    {
      std::unique_lock<std::mutex> lk(mu_);
      if (active_.empty() && incoming_.empty() && drops_.empty()) {
        cv_.wait(lk, [&] { return !incoming_.empty() || !drops_.empty() || stop_; });
      } else if (!news_.load(std::memory_order_relaxed) &&
                 Clock::now() - idle_since > bound) {
        // Past the spin: sleep, in growing steps, unless something new comes.
        cv_.wait_for(lk, sleep,
                     [&] { return news_.load(std::memory_order_relaxed) || stop_; });
        sleep = std::min<std::chrono::microseconds>(sleep * 2, kMaxSleep);
      }
      if (stop_) return;
      news_.store(false, std::memory_order_relaxed);
      if (!incoming_.empty()) {  // new ops: poll at once, spin again
        idle_since = Clock::now();
        sleep = kFirstSleep;
        bound = spin_bound_;
      }
      for (auto& op : incoming_) {
        reqs_.push_back(op.req);
        active_.push_back(std::move(op));
      }
      incoming_.clear();
      drops.swap(drops_);
      drops_ticket = drops_asked_;
    }

    // Dropped owners (destroyed, or MPI finalized: nullptr = all), then broken ones.
    for (const auto& d : drops) {
      for (size_t i = active_.size(); i-- > 0;) {
        if (d.first != nullptr && active_[i].owner != d.first) continue;
        Cancel(&active_[i]);
        reqs_[i] = MPI_REQUEST_NULL;
        End(i, std::make_exception_ptr(UnavailableError(active_[i].owner->describe() + ": " +
                                                        d.second)),
            nullptr);
      }
    }
    const auto now = Clock::now();
    for (size_t i = active_.size(); i-- > 0;) {
      Op& op = active_[i];
      std::string why = op.owner->Broken();
      const bool late = why.empty() && now >= op.deadline;
      if (late) {
        why = std::string(op.what.is_send ? "send to" : "recv from") + " rank " +
              std::to_string(op.what.peer) + " (tag " + std::to_string(op.what.tag) +
              ") did not complete within " +
              std::to_string(op.owner->timeout_.load().count()) + " ms";
        op.owner->MarkBroken(op.owner->describe() + ": " + why);
      }
      if (why.empty()) continue;
      Cancel(&op);
      reqs_[i] = MPI_REQUEST_NULL;
      const std::string msg = op.owner->describe() + ": " + why;
      End(i, late ? std::make_exception_ptr(TimeoutError(msg))
                  : std::make_exception_ptr(UnavailableError(msg)),
          nullptr);
    }
    if (drops_ticket > 0 && !drops.empty()) {
      std::lock_guard<std::mutex> lk(mu_);
      drops_done_ = std::max(drops_done_, drops_ticket);
      cv_.notify_all();
    }
    if (active_.empty()) continue;

    const int n = static_cast<int>(reqs_.size());
    indices.resize(n);
    statuses.resize(n);
    int outcount = 0;
    const int rc = MPI_Testsome(n, reqs_.data(), &outcount, indices.data(), statuses.data());
    if (outcount == MPI_UNDEFINED) outcount = 0;
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
      // The call itself failed, naming no request: every communicator polled is broken (Call
      // marks it), and the next turn ends their ops.
      for (auto& op : active_) {
        try {
          op.owner->Call(rc, "MPI_Testsome");
        } catch (...) {
        }
      }
      continue;
    }
    if (outcount == 0) {
      sched_yield();  // ranks may outnumber cores: let the peer run
      continue;
    }
    sleep = kFirstSleep;
    idle_since = Clock::now();
    // Completed (or failed) requests, highest index first so that End's swap keeps the
    // lower indices valid.
    std::vector<std::pair<int, MPI_Status>> ended;
    for (int k = 0; k < outcount; ++k) ended.emplace_back(indices[k], statuses[k]);
    std::sort(ended.begin(), ended.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& [i, st] : ended) {
      std::exception_ptr error;
      if (rc != MPI_SUCCESS) {
        const int code = MpiCommContext::FailedCode(rc, &st, 1);
        if (code != MPI_SUCCESS) {
          try {
            active_[i].owner->Call(code, active_[i].what.is_send ? "MPI_Isend" : "MPI_Irecv");
          } catch (...) {
            error = std::current_exception();
          }
        }
      }
      End(static_cast<size_t>(i), error, &st);
    }
  }
}

// ------------------------------------------------------------------ posting
void MpiCommContext::PostP2P(const DeferredP2P& what, P2PDone done) {
  MpiProgress::Op op;
  op.what = what;
  try {
    CheckPeer(what.peer, !what.is_send, what.is_send ? "send to" : "recv from");
    ThrowIfBroken();
    op.req = Post(what);
  } catch (...) {
    return done(std::current_exception());
  }
  // Done already (an eager send, a message that had arrived): no hand-over.
  int flag = 0;
  MPI_Status status;
  std::exception_ptr error;
  try {
    Call(MPI_Test(&op.req, &flag, &status), what.is_send ? "MPI_Isend" : "MPI_Irecv");
    if (flag && !what.is_send) CheckReceived(what, status);
  } catch (...) {
    error = std::current_exception();
  }
  if (flag || error) {
    if (!flag) MpiProgress::Cancel(&op);
    return done(error);
  }
  op.owner = this;
  op.deadline = Clock::now() + timeout_.load();
  op.done = std::move(done);
  MpiProgress::Get().Add(std::move(op));
}

void MpiCommContext::PostSend(const void* send, int64_t count, DataType dtype, int peer,
                              int tag, P2PDone done) {
  PostP2P(DeferredP2P{true, send, nullptr, count, dtype, peer, tag, nullptr}, std::move(done));
}

void MpiCommContext::PostRecv(void* recv, int64_t count, DataType dtype, int peer, int tag,
                              int* source, P2PDone done) {
  PostP2P(DeferredP2P{false, nullptr, recv, count, dtype, peer, tag, source}, std::move(done));
}

void MpiCommContext::WakeOnAbort(const std::string&) { MpiProgress::Get().Wake(); }

}  // namespace distributed
}  // namespace phi
