// paddle_like::DataParallel: dygraph data-parallel training (Paddle's paddle.DataParallel,
// PyTorch's DistributedDataParallel) over a process group.
//
//   dist::init_process_group();
//   auto model = std::make_shared<nn::Sequential>(...);
//   DataParallel dp(model, {});                 // broadcasts rank 0's parameters
//   optimizer::Adam opt(dp.parameters());
//   Tensor loss = loss_fn(dp(x), y);            // forward through dp
//   loss.backward();                            // buckets all-reduce while backward runs
//   opt.step(); opt.clear_grad();
//
// Each rank feeds its shard of the global batch; after backward every rank holds the
// gradients averaged over the group, so N ranks train like one process on the whole batch.
#pragma once

#include <any>
#include <memory>
#include <vector>

#include "paddle_like/dist/distributed.h"
#include "paddle_like/dist/elastic.h"
#include "paddle_like/nn/module.h"
#include "paddle_like/parallel/grad_bucket.h"
#include "paddle_like/parallel/reducer.h"

namespace paddle_like {

struct DataParallelOptions {
  dist::GroupPtr group;                     // nullptr: the world group
  size_t comm_buffer_size = 25u << 20;      // bucket size in bytes (Paddle: 25 MB)
  size_t last_comm_buffer_size = 1u << 20;  // the first bucket to fill, small (1 MB)
  // Parameters the forward may not use: found by walking the graph and a used-flag
  // all-reduce after backward (one more small collective per step).
  bool find_unused_parameters = false;
  // Gradients become views into the buckets (no copy back; saves memory).
  bool gradient_as_bucket_view = false;
  // Broadcast rank 0's buffers before every forward.
  bool broadcast_buffers = true;
  // Elastic mode (off by default): run_step() survives ranks that die. DataParallel then
  // runs on a group of its own (made from `group`'s ranks, or the world's: every rank of the
  // world constructs it), starts this process's heartbeat, and when a step fails because a
  // rank died it drops the step's partial gradients, agrees with the survivors on who is gone
  // (dist::agree_and_shrink), rebuilds its buckets for the new group (averaging over the new
  // world size) and runs the step again. The step function reads rank() and world_size() to
  // take its shard, so the dead rank's samples are redistributed over the survivors.
  bool elastic = false;
  dist::ElasticOptions elastic_options;
};

// What on_rank_lost reports.
struct ElasticEvent {
  std::vector<int> lost;   // global ranks
  int64_t step = 0;        // the step (run_step call, 0-based) that failed
  int new_world_size = 0;
  double seconds = 0;      // detection (agreement) plus shrink
};

class DataParallel : public nn::Module {
 public:
  // Broadcasts rank 0's parameters and buffers, and verifies that every rank has the same
  // parameters (count, shapes, dtypes): a mismatch raises InvalidArgument on every rank,
  // naming the first differing parameter and the rank it came from.
  DataParallel(std::shared_ptr<nn::Module> module, DataParallelOptions options = {});
  ~DataParallel() override;

  Tensor forward(const Tensor& input) override;
  nn::Module& module() { return *module_; }

  // While the returned guard lives, forward/backward only accumulate gradients locally; the
  // next synced backward reduces the accumulated sum.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DataParallel* dp);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DataParallel* dp_;
    bool previous_;
  };
  NoSyncGuard no_sync() { return NoSyncGuard(this); }

  // Replaces the bucket all-reduce by `hook` (comm_hooks::fp16_compress_hook, ...).
  void register_comm_hook(std::any state, CommHook hook);

  // Runs one training step: `step` does forward (through this object) and backward. In
  // elastic mode a step that fails because ranks died is run again on the survivors (see
  // DataParallelOptions::elastic); any other failure, and any failure without elastic mode,
  // is raised. The optimizer step belongs after run_step.
  void run_step(const std::function<void()>& step);
  // Called (on every survivor) after the group shrank; the event is also logged.
  void on_rank_lost(std::function<void(const ElasticEvent&)> callback);
  int64_t steps() const { return steps_; }
  // This rank's rank and the size of the group it trains in (they change when it shrinks).
  int rank() const { return group_->rank(); }
  int world_size() const { return group_->size(); }

  const dist::GroupPtr& group() const { return group_; }
  // Raises PreconditionNotMet when an elastic recovery left no usable Reducer.
  const Reducer& reducer() const {
    CheckUsable();
    return *reducer_;
  }

 private:
  std::shared_ptr<nn::Module> module_;
  DataParallelOptions options_;
  dist::GroupPtr group_;
  std::unique_ptr<Reducer> reducer_;
  bool require_sync_ = true;
  int64_t steps_ = 0;
  std::function<void(const ElasticEvent&)> on_rank_lost_;
  std::any hook_state_;
  CommHook hook_;

  std::string unusable_;  // why this object can no longer train ("" while it can)

  std::unique_ptr<Reducer> MakeReducer();
  void CheckUsable() const;
  void RecoverFromDeath(std::exception_ptr failure);
};

// Broadcasts `tensors` from global rank `src` in flat chunks of at most `buffer_size` bytes
// per dtype (one collective per chunk instead of one per tensor).
void BroadcastCoalesced(const std::vector<phi::DenseTensor*>& tensors, int src,
                        size_t buffer_size, const dist::GroupPtr& group);

// Raises InvalidArgument on every rank unless all ranks have the same parameter count,
// shapes and dtypes; the message names the first mismatch and the rank it came from.
void VerifyParamsAcrossProcesses(const std::vector<std::pair<std::string, Tensor>>& params,
                                 const dist::GroupPtr& group);

}  // namespace paddle_like
