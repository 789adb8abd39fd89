// The Reducer behind DataParallel (Paddle's EagerReducer, PyTorch's DDP reducer): gradients
// are packed into per-dtype buckets on the parameters' place (host memory, or the device:
// copies on its calc stream, the all-reduce on the group's backend for that place, NCCL's
// comm stream for CUDA); a bucket whose gradients are all final launches an
// asynchronous all-reduce (average) on the comm stream while backward continues; buckets
// launch strictly in order (so every rank issues the same sequence); the end of backward
// waits for them and hands the averaged gradients back.
//
// The pass protocol: DataParallel::forward calls PrepareForBackward(output); each
// parameter's post-accumulate hook calls MarkReady; the first hook queues Finalize at the
// end of the backward pass.
#pragma once

#include <any>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "paddle_like/dist/distributed.h"
#include "paddle_like/eager/tensor.h"
#include "paddle_like/parallel/grad_bucket.h"

namespace paddle_like {

struct ReducerOptions {
  size_t comm_buffer_size = 25u << 20;      // bytes per bucket
  size_t last_comm_buffer_size = 1u << 20;  // the first bucket to fill (the last parameters)
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;
};

// Bucket assignment (Paddle's assign_group_by_size, PyTorch's
// _compute_bucket_assignment_by_size): walks `order` (parameter indices), keeps one open
// bucket per (place, dtype), closes it once it holds at least its limit in bytes (the first
// bucket of each key has limits[0], later ones limits[1]), and returns the buckets ordered by
// their first parameter's position in `order`.
std::vector<std::vector<size_t>> ComputeBucketAssignmentBySize(
    const std::vector<Tensor>& params, const std::vector<size_t>& order,
    const std::vector<size_t>& limits);

class Reducer {
 public:
  Reducer(std::vector<Tensor> params, std::vector<std::string> names, dist::GroupPtr group,
          ReducerOptions options);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Called after each synced forward: the next backward reduces. `output` is searched for
  // the parameters it used (find_unused_parameters).
  void PrepareForBackward(const Tensor& output);
  // Called after a forward under no_sync(): the next backward only accumulates locally.
  void PrepareForLocalBackward();

  void RegisterCommHook(std::any state, CommHook hook);

  // Introspection (tests, benchmarks): buckets as parameter indices, and whether they were
  // rebuilt in gradient-ready order yet.
  std::vector<std::vector<size_t>> bucket_indices() const;
  bool buckets_rebuilt() const { return rebuilt_; }

 private:
  struct Bucket;
  enum class Pass { kNone, kSync, kLocal };

  void OnGradReady(size_t index);
  void MarkReady(size_t index, bool used);
  void LaunchReadyBuckets();
  void Launch(size_t bucket);
  void Finalize();
  void WaitLaunched();
  void InitBuckets(const std::vector<size_t>& order);
  void RebuildBuckets();
  std::vector<std::string> NamesOf(const std::vector<size_t>& indices) const;

  phi::Place place_;  // every parameter's, and so every bucket's
  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  // Parameter index by tensor, for find_unused_parameters' graph walk (built once).
  std::unordered_map<const TensorImpl*, size_t> index_of_;
  dist::GroupPtr group_;
  ReducerOptions options_;
  std::vector<int> hook_ids_;
  std::any hook_state_;
  CommHook hook_;

  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<size_t> bucket_of_;   // parameter -> bucket
  std::vector<size_t> slot_of_;     // parameter -> position in its bucket
  Pass pass_ = Pass::kNone;
  bool finalize_queued_ = false;
  size_t next_bucket_ = 0;
  std::vector<char> ready_;         // this pass
  std::vector<char> used_;          // reached by this pass's forward graphs
  std::vector<char> locally_used_;  // got a gradient hook this pass
  bool had_pass_ = false;           // a pass was finalized since the last forward
  // Rebuild in ready order after the first synced iteration.
  std::vector<size_t> ready_order_;
  bool rebuilt_ = false;
  int finalized_passes_ = 0;
};

}  // namespace paddle_like
