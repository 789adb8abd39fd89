// ProcessGroup and Task: the API framework code programs against (Paddle's names).
//
// Every op has a (..., sync_op) form and a (..., sync_op, use_calc_stream) form:
//  - sync_op: the op is complete (for the calc stream) when the call returns;
//  - use_calc_stream: the op runs on the caller's calc stream instead of the group's comm
//    stream (no event hand-off; the op is ordered with the caller's compute).
// Output tensors that are not allocated are allocated with the shape the op implies.
// Bad arguments raise phi::InvalidArgumentError / OutOfRangeError before anything is issued.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include "distributed/types.h"
#include "phi/core/dense_tensor.h"
#include "phi/core/device_context.h"

namespace paddle_like {
namespace distributed {

using phi::DenseTensor;

class ProcessGroup {
 public:
  // "Not given": a wait, a group or a backend factory then uses the group's timeout (for a
  // group: FLAGS_default_group_timeout_s). One sentinel for every backend.
  static constexpr std::chrono::milliseconds kUnsetTimeout = std::chrono::milliseconds(-1);

  class Task {
   public:
    Task(int rank, CommType comm_type, bool sync_op)
        : rank_(rank), comm_type_(comm_type), sync_op_(sync_op) {}
    virtual ~Task() = default;

    // True when the op has finished (successfully or not); never blocks.
    virtual bool IsCompleted() { return true; }
    // Orders the calc stream after the op; the host also waits (until `timeout`, by default
    // the group's timeout, then phi::TimeoutError naming group, sequence number, op and
    // sizes) when blocking wait is on or the calc stream is the host. Rethrows the op's
    // error. Returns true on success.
    virtual bool Wait(std::chrono::milliseconds timeout = kUnsetTimeout) { return true; }
    // The host waits for the op (at most the group's timeout), whatever the flags.
    virtual void Synchronize() {}
    // Rank that a receive-from-any-source got its message from (after Wait).
    virtual int source_rank() const { return -1; }
    // Ends the op as an error now (AbortedError-like Unavailable naming `why`): Wait and
    // IsCompleted stop waiting for it. Its memory stays reserved until the engine is really
    // done with it. Aborting a finished op does nothing.
    virtual void Abort(const std::string& why) {}

    int rank() const { return rank_; }
    CommType comm_type() const { return comm_type_; }
    bool IsSync() const { return sync_op_; }

   private:
    int rank_;
    CommType comm_type_;
    bool sync_op_;
  };
  using TaskPtr = std::shared_ptr<Task>;

  ProcessGroup(int rank, int size, int gid) : rank_(rank), size_(size), gid_(gid) {}
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int GetRank() const { return rank_; }
  int GetSize() const { return size_; }
  int GetGid() const { return gid_; }
  virtual std::string GetBackendName() const = 0;
  // Where this process's tensors for this backend live: the CPU, or a device backend's
  // device (what staged traffic, such as object collectives, is copied to).
  virtual phi::Place DefaultPlace() const { return phi::CPUPlace(); }
  // The timeout of the ops issued from now on, and of everything that times them (waits,
  // the watchdog, the communicator's own calls and connections): set_timeout on a group
  // whose backend exists. An op already issued keeps its own.
  virtual void SetTimeout(std::chrono::milliseconds timeout) {}
  virtual phi::DeviceContext* GetDeviceContext(const phi::Place& place,
                                               bool use_calc_stream = false) const = 0;

  virtual TaskPtr AllReduce(DenseTensor* out, const DenseTensor& in,
                            const AllreduceOptions& opts, bool sync_op,
                            bool use_calc_stream) = 0;
  virtual TaskPtr Broadcast(DenseTensor* out, const DenseTensor& in,
                            const BroadcastOptions& opts, bool sync_op,
                            bool use_calc_stream) = 0;
  virtual TaskPtr Reduce(DenseTensor* out, const DenseTensor& in, const ReduceOptions& opts,
                         bool sync_op, bool use_calc_stream) = 0;
  // Gathers in[offset, offset + numel) of every rank (numel -1: all of `in`) into out.
  virtual TaskPtr AllGather(DenseTensor* out, const DenseTensor& in, int64_t offset,
                            int64_t numel, bool sync_op, bool use_calc_stream) = 0;
  virtual TaskPtr ReduceScatter(DenseTensor* out, const DenseTensor& in,
                                const ReduceScatterOptions& opts, bool sync_op,
                                bool use_calc_stream) = 0;
  // Root's `in` holds size blocks of out's size; rank r gets block r.
  virtual TaskPtr Scatter(DenseTensor* out, const DenseTensor& in, const ScatterOptions& opts,
                          bool sync_op, bool use_calc_stream) = 0;
  // Into one tensor (size blocks of in's size) on the root ...
  virtual TaskPtr Gather(DenseTensor* out, const DenseTensor& in, const GatherOptions& opts,
                         bool sync_op, bool use_calc_stream) = 0;
  // ... or into a list of `size` tensors on the root.
  virtual TaskPtr Gather(std::vector<DenseTensor>* outs, const DenseTensor& in,
                         const GatherOptions& opts, bool sync_op, bool use_calc_stream) = 0;
  // Splits are dim-0 row counts per rank; empty vectors mean equal splits. Zero-size parts
  // are allowed.
  virtual TaskPtr AllToAll(DenseTensor* out, const DenseTensor& in,
                           const std::vector<int64_t>& out_split_sizes,
                           const std::vector<int64_t>& in_split_sizes, bool sync_op,
                           bool use_calc_stream) = 0;
  // List form: ins[r] goes to rank r, outs[r] comes from rank r.
  virtual TaskPtr AllToAll(std::vector<DenseTensor>* outs, const std::vector<DenseTensor>& ins,
                           bool sync_op, bool use_calc_stream) = 0;
  // Partial tensors: elements [offset, offset + numel) (numel -1: all).
  virtual TaskPtr Send(const DenseTensor& tensor, int dst_rank, int64_t offset,
                       int64_t numel, bool sync_op, bool use_calc_stream,
                       const P2POptions& opts = {}) = 0;
  // src_rank may be kAnySource where the backend supports it (task->source_rank()).
  virtual TaskPtr Recv(DenseTensor* tensor, int src_rank, int64_t offset, int64_t numel,
                       bool sync_op, bool use_calc_stream, const P2POptions& opts = {}) = 0;
  virtual TaskPtr Barrier(const BarrierOptions& opts = BarrierOptions()) = 0;

  // Between StartCoalescing and EndCoalescing the ops form one engine group. The tasks
  // they return complete together; EndCoalescing returns a task for the whole group.
  virtual void StartCoalescing() = 0;
  virtual TaskPtr EndCoalescing() = 0;
  // Batched point-to-point (batch_isend_irecv): the same mechanism, Paddle's names.
  void GroupStart() { StartCoalescing(); }
  TaskPtr GroupEnd() { return EndCoalescing(); }

  // ---- the (..., sync_op) forms: on the comm stream.
  TaskPtr AllReduce(DenseTensor* out, const DenseTensor& in, const AllreduceOptions& opts,
                    bool sync_op) {
    return AllReduce(out, in, opts, sync_op, false);
  }
  TaskPtr Broadcast(DenseTensor* out, const DenseTensor& in, const BroadcastOptions& opts,
                    bool sync_op) {
    return Broadcast(out, in, opts, sync_op, false);
  }
  TaskPtr Reduce(DenseTensor* out, const DenseTensor& in, const ReduceOptions& opts,
                 bool sync_op) {
    return Reduce(out, in, opts, sync_op, false);
  }
  TaskPtr AllGather(DenseTensor* out, const DenseTensor& in, int64_t offset, int64_t numel,
                    bool sync_op) {
    return AllGather(out, in, offset, numel, sync_op, false);
  }
  TaskPtr AllGather(DenseTensor* out, const DenseTensor& in, bool sync_op) {
    return AllGather(out, in, 0, -1, sync_op, false);
  }
  TaskPtr ReduceScatter(DenseTensor* out, const DenseTensor& in,
                        const ReduceScatterOptions& opts, bool sync_op) {
    return ReduceScatter(out, in, opts, sync_op, false);
  }
  TaskPtr Scatter(DenseTensor* out, const DenseTensor& in, const ScatterOptions& opts,
                  bool sync_op) {
    return Scatter(out, in, opts, sync_op, false);
  }
  TaskPtr Gather(DenseTensor* out, const DenseTensor& in, const GatherOptions& opts,
                 bool sync_op) {
    return Gather(out, in, opts, sync_op, false);
  }
  TaskPtr Gather(std::vector<DenseTensor>* outs, const DenseTensor& in,
                 const GatherOptions& opts, bool sync_op) {
    return Gather(outs, in, opts, sync_op, false);
  }
  TaskPtr AllToAll(DenseTensor* out, const DenseTensor& in,
                   const std::vector<int64_t>& out_split_sizes,
                   const std::vector<int64_t>& in_split_sizes, bool sync_op) {
    return AllToAll(out, in, out_split_sizes, in_split_sizes, sync_op, false);
  }
  TaskPtr Send(const DenseTensor& tensor, int dst_rank, bool sync_op) {
    return Send(tensor, dst_rank, 0, -1, sync_op, false);
  }
  TaskPtr Recv(DenseTensor* tensor, int src_rank, bool sync_op) {
    return Recv(tensor, src_rank, 0, -1, sync_op, false);
  }

 private:
  int rank_;
  int size_;
  int gid_;
};

// Group id -> group, for framework operators that find their group by ring id.
// Names the ops issued by this thread while it lives (framework scopes: "grad bucket 3",
// "tp all-gather"): the name is in the flight recorder and in every message about the op.
// Scopes nest; the innermost name wins.
class CommNameScope {
 public:
  explicit CommNameScope(std::string name);
  ~CommNameScope();
  CommNameScope(const CommNameScope&) = delete;
  CommNameScope& operator=(const CommNameScope&) = delete;
  // The innermost name on this thread; empty when none.
  static const std::string& Current();

 private:
  std::string previous_;
};

class ProcessGroupIdMap {
 public:
  static ProcessGroupIdMap& GetInstance();
  void Insert(int gid, std::shared_ptr<ProcessGroup> group);
  // nullptr when absent.
  std::shared_ptr<ProcessGroup> Get(int gid) const;
  // The ids registered now, ascending (what an error about an unknown ring id lists).
  std::vector<int> Ids() const;
  void Erase(int gid);
  void Clear();

 private:
  mutable std::mutex mu_;
  std::map<int, std::shared_ptr<ProcessGroup>> groups_;
};

}  // namespace distributed
}  // namespace paddle_like
