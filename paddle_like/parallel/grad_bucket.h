// GradBucket: what a DataParallel communication hook sees of one bucket (PyTorch's
// torch.distributed.GradBucket): the flat buffer of its gradients and where each lies.
#pragma once

#include <any>
#include <functional>
#include <memory>
#include <vector>

#include "paddle_like/dist/distributed.h"
#include "paddle_like/eager/tensor.h"

namespace paddle_like {

class GradBucket {
 public:
  GradBucket(size_t index, bool is_last, phi::DenseTensor* buffer, std::vector<int64_t> offsets,
             std::vector<int64_t> lengths, std::vector<Tensor> parameters,
             dist::GroupPtr group);
  size_t index() const { return index_; }
  // The last bucket of the backward pass (the hook's last call of this step).
  bool is_last() const { return is_last_; }
  // The flat gradients (the hook reduces this; its future completes when it holds the
  // result, averaged over the group).
  phi::DenseTensor& buffer() { return *buffer_; }
  // Replaces the buffer (same dtype and numel), e.g. with a decompressed result.
  void set_buffer(const phi::DenseTensor& buffer);
  // Element offsets and lengths of each parameter's gradient in the buffer.
  const std::vector<int64_t>& offsets() const { return offsets_; }
  const std::vector<int64_t>& lengths() const { return lengths_; }
  // Views into the buffer shaped like each parameter.
  std::vector<phi::DenseTensor> gradients() const;
  const std::vector<Tensor>& parameters() const { return parameters_; }
  // The DataParallel group (a hook whose state holds no group uses it).
  const dist::GroupPtr& group() const { return group_; }

 private:
  size_t index_;
  bool is_last_;
  phi::DenseTensor* buffer_;
  std::vector<int64_t> offsets_, lengths_;
  std::vector<Tensor> parameters_;
  dist::GroupPtr group_;
};

// A communication hook: reduces bucket.buffer() across the group and returns a future that
// completes when the buffer holds the averaged gradients. `state` is what was registered
// with it (the built-ins take an empty state or a dist::GroupPtr).
using CommHook =
    std::function<std::shared_ptr<dist::Future>(const std::any& state, GradBucket& bucket)>;

namespace comm_hooks {
// All-reduce (average) of the bucket as it is: what DataParallel does without a hook.
std::shared_ptr<dist::Future> allreduce_hook(const std::any& state, GradBucket& bucket);
// Casts the bucket to float16 (bfloat16), all-reduces that, and casts the average back:
// half the bytes on the wire, at 16-bit precision.
std::shared_ptr<dist::Future> fp16_compress_hook(const std::any& state, GradBucket& bucket);
std::shared_ptr<dist::Future> bf16_compress_hook(const std::any& state, GradBucket& bucket);
}  // namespace comm_hooks

}  // namespace paddle_like
