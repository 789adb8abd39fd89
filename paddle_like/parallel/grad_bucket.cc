#include "paddle_like/parallel/grad_bucket.h"

#include "paddle_like/parallel/device_copy.h"
#include "phi/core/errors.h"
#include "phi/kernels/math_kernels.h"

namespace paddle_like {

GradBucket::GradBucket(size_t index, bool is_last, phi::DenseTensor* buffer,
                       std::vector<int64_t> offsets, std::vector<int64_t> lengths,
                       std::vector<Tensor> parameters, dist::GroupPtr group)
    : index_(index),
      is_last_(is_last),
      buffer_(buffer),
      offsets_(std::move(offsets)),
      lengths_(std::move(lengths)),
      parameters_(std::move(parameters)),
      group_(std::move(group)) {}

void GradBucket::set_buffer(const phi::DenseTensor& buffer) {
  PADDLE_ENFORCE(buffer.dtype() == buffer_->dtype() && buffer.numel() == buffer_->numel(),
                 phi::errors::InvalidArgument(
                     "GradBucket::set_buffer: bucket %zu holds %ld %s, got %ld %s.", index_,
                     long(buffer_->numel()), phi::DataTypeToString(buffer_->dtype()),
                     long(buffer.numel()), phi::DataTypeToString(buffer.dtype())));
  CopyBytes(OnPlace(buffer, buffer_->place()), buffer_);
}

std::vector<phi::DenseTensor> GradBucket::gradients() const {
  std::vector<phi::DenseTensor> out;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    phi::DenseTensor view = buffer_->FlatView(offsets_[i], lengths_[i]);
    view.Resize(parameters_[i].dims());
    out.push_back(std::move(view));
  }
  return out;
}

namespace comm_hooks {

namespace {

dist::GroupPtr GroupOf(const std::any& state, const GradBucket& bucket) {
  if (!state.has_value()) return bucket.group();
  const auto* group = std::any_cast<dist::GroupPtr>(&state);
  PADDLE_ENFORCE(group != nullptr,
                 phi::errors::InvalidArgument(
                     "The built-in comm hooks take an empty state or a dist::GroupPtr."));
  return *group ? *group : bucket.group();
}

// The cast kernels run on the host: a device bucket is cast there and the compressed copy
// goes back to the device for the all-reduce (the wire and the reduction stay on the device).
std::shared_ptr<dist::Future> CompressHook(const std::any& state, GradBucket& bucket,
                                           phi::DataType wire) {
  const phi::Place place = bucket.buffer().place();
  phi::DenseTensor narrow;
  phi::CastKernel(OnPlace(bucket.buffer(), phi::CPUPlace()), wire, &narrow);
  auto compressed = std::make_shared<phi::DenseTensor>(OnPlace(narrow, place));
  dist::WorkPtr work =
      dist::all_reduce(compressed.get(), dist::ReduceOp::AVG, {GroupOf(state, bucket), true});
  phi::DenseTensor target = bucket.buffer();  // shares the bucket's storage
  return work->get_future()->then([compressed, target](dist::Work& w) mutable {
    if (auto error = w.exception()) std::rethrow_exception(error);
    phi::DenseTensor restored;
    phi::CastKernel(OnPlace(*compressed, phi::CPUPlace()), target.dtype(), &restored);
    CopyBytes(restored, &target);
  });
}

}  // namespace

std::shared_ptr<dist::Future> allreduce_hook(const std::any& state, GradBucket& bucket) {
  dist::WorkPtr work =
      dist::all_reduce(&bucket.buffer(), dist::ReduceOp::AVG, {GroupOf(state, bucket), true});
  return work->get_future();
}

std::shared_ptr<dist::Future> fp16_compress_hook(const std::any& state, GradBucket& bucket) {
  return CompressHook(state, bucket, phi::DataType::FLOAT16);
}

std::shared_ptr<dist::Future> bf16_compress_hook(const std::any& state, GradBucket& bucket) {
  return CompressHook(state, bucket, phi::DataType::BFLOAT16);
}

}  // namespace comm_hooks
}  // namespace paddle_like
