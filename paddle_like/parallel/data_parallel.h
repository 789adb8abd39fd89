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

  const dist::GroupPtr& group() const { return group_; }
  const Reducer& reducer() const { return *reducer_; }

 private:
  std::shared_ptr<nn::Module> module_;
  DataParallelOptions options_;
  dist::GroupPtr group_;
  std::unique_ptr<Reducer> reducer_;
  bool require_sync_ = true;
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
