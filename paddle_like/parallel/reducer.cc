#include "paddle_like/parallel/reducer.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>

#include "paddle_like/eager/autograd.h"
#include "paddle_like/parallel/device_copy.h"
#include "phi/core/errors.h"

namespace paddle_like {

struct Reducer::Bucket {
  std::vector<size_t> params;
  std::vector<int64_t> offsets, lengths;
  phi::DenseTensor buffer;  // the flat gradients, reduced in place
  size_t pending = 0;       // parameters not ready yet this pass
  std::shared_ptr<dist::Future> future;
};

namespace {

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + ("'" + n + "'");
  return out;
}

// True when `grad` already is the bucket slot (gradient_as_bucket_view).
bool IsView(const phi::DenseTensor& grad, const phi::DenseTensor& slot) {
  return grad.initialized() && grad.Holder() == slot.Holder() && grad.offset() == slot.offset();
}

}  // namespace

std::vector<std::vector<size_t>> ComputeBucketAssignmentBySize(
    const std::vector<Tensor>& params, const std::vector<size_t>& order,
    const std::vector<size_t>& limits) {
  PADDLE_ENFORCE(!limits.empty(),
                 phi::errors::InvalidArgument("bucket assignment: no size limits."));
  struct Open {
    std::vector<size_t> members;
    size_t bytes = 0;
    size_t limit_index = 0;
  };
  // Keyed by place and dtype, as the seed's: a bucket is one flat tensor on one device.
  std::map<std::pair<phi::Place, phi::DataType>, Open> open;
  std::vector<std::vector<size_t>> result;
  for (size_t index : order) {
    const Tensor& p = params.at(index);
    Open& o = open[{p.value().place(), p.dtype()}];
    o.members.push_back(index);
    o.bytes += p.value().nbytes();
    if (o.bytes >= limits[std::min(o.limit_index, limits.size() - 1)]) {
      result.push_back(std::move(o.members));
      o = Open{{}, 0, o.limit_index + 1};
    }
  }
  for (auto& [key, o] : open) {
    if (!o.members.empty()) result.push_back(std::move(o.members));
  }
  std::unordered_map<size_t, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  std::sort(result.begin(), result.end(), [&](const auto& a, const auto& b) {
    return position[a.front()] < position[b.front()];
  });
  return result;
}

Reducer::Reducer(std::vector<Tensor> params, std::vector<std::string> names,
                 dist::GroupPtr group, ReducerOptions options)
    : params_(std::move(params)),
      names_(std::move(names)),
      group_(std::move(group)),
      options_(options),
      ready_(params_.size(), 0),
      used_(params_.size(), 0),
      locally_used_(params_.size(), 0) {
  PADDLE_ENFORCE(!params_.empty(),
                 phi::errors::InvalidArgument("DataParallel: the module has no parameters."));
  place_ = params_[0].value().place();
  for (size_t i = 0; i < params_.size(); ++i) {
    PADDLE_ENFORCE(params_[i].value().place() == place_,
                   phi::errors::InvalidArgument(
                       "DataParallel: every parameter must be on one place; '%s' is on %s, "
                       "'%s' on %s.",
                       names_[0].c_str(), place_.DebugString().c_str(), names_[i].c_str(),
                       params_[i].value().place().DebugString().c_str()));
    index_of_[params_[i].impl().get()] = i;
    hook_ids_.push_back(params_[i].register_post_accumulate_grad_hook(
        [this, i](Tensor&) { OnGradReady(i); }));
  }
  std::vector<size_t> reversed(params_.size());
  for (size_t i = 0; i < reversed.size(); ++i) reversed[i] = reversed.size() - 1 - i;
  InitBuckets(reversed);
}

Reducer::~Reducer() {
  for (size_t i = 0; i < params_.size(); ++i) params_[i].remove_hook(hook_ids_[i]);
}

void Reducer::InitBuckets(const std::vector<size_t>& order) {
  auto assignment = ComputeBucketAssignmentBySize(
      params_, order, {options_.last_comm_buffer_size, options_.comm_buffer_size});
  buckets_.clear();
  bucket_of_.assign(params_.size(), 0);
  slot_of_.assign(params_.size(), 0);
  for (size_t b = 0; b < assignment.size(); ++b) {
    auto bucket = std::make_unique<Bucket>();
    bucket->params = assignment[b];
    int64_t total = 0;
    for (size_t s = 0; s < bucket->params.size(); ++s) {
      size_t p = bucket->params[s];
      bucket_of_[p] = b;
      slot_of_[p] = s;
      bucket->offsets.push_back(total);
      bucket->lengths.push_back(params_[p].numel());
      total += params_[p].numel();
    }
    bucket->buffer = phi::DenseTensor(place_, params_[bucket->params[0]].dtype(),
                                      phi::DDim({total}));
    if (total > 0) phi::Fill(&bucket->buffer, 0);
    bucket->pending = bucket->params.size();
    buckets_.push_back(std::move(bucket));
  }
  // Gradients that were views into the old buckets move into the new ones.
  if (options_.gradient_as_bucket_view) {
    for (size_t p = 0; p < params_.size(); ++p) {
      if (!params_[p].has_grad()) continue;
      Bucket& b = *buckets_[bucket_of_[p]];
      phi::DenseTensor slot = b.buffer.FlatView(b.offsets[slot_of_[p]], b.lengths[slot_of_[p]]);
      CopyBytes(params_[p].grad(), &slot);
      slot.Resize(params_[p].dims());
      params_[p].set_grad(slot);
    }
  }
}

void Reducer::RebuildBuckets() {
  // Rank 0's ready order wins: every rank must build the same buckets.
  std::vector<size_t> order = ready_order_;
  std::vector<char> seen(params_.size(), 0);
  for (size_t i : order) seen[i] = 1;
  for (size_t i = params_.size(); i-- > 0;) {
    if (!seen[i]) order.push_back(i);
  }
  std::vector<int64_t> as_int(order.begin(), order.end());
  // On the parameters' place: the group's backend for it carries it (NCCL for GPU models).
  auto shared = OnPlace(phi::DenseTensor::FromVector(as_int), place_);
  dist::broadcast(&shared, dist::GroupRank{0}, {group_, false});
  const auto on_host = OnPlace(shared, phi::CPUPlace());
  const int64_t* got = on_host.data<int64_t>();
  std::vector<char> check(params_.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) {
    PADDLE_ENFORCE(got[i] >= 0 && got[i] < static_cast<int64_t>(params_.size()) && !check[got[i]],
                   phi::errors::InvalidArgument(
                       "DataParallel: rank 0's gradient-ready order is not a permutation of "
                       "this rank's %zu parameters (entry %zu is %ld): the ranks' models differ.",
                       params_.size(), i, long(got[i])));
    check[got[i]] = 1;
    order[i] = static_cast<size_t>(got[i]);
  }
  InitBuckets(order);
  rebuilt_ = true;
}

void Reducer::PrepareForBackward(const Tensor& output) {
  if (!rebuilt_ && finalized_passes_ >= 1) RebuildBuckets();
  if (pass_ != Pass::kSync) {
    std::fill(ready_.begin(), ready_.end(), 0);
    std::fill(used_.begin(), used_.end(), 0);
    std::fill(locally_used_.begin(), locally_used_.end(), 0);
    for (auto& b : buckets_) b->pending = b->params.size();
    next_bucket_ = 0;
  }
  pass_ = Pass::kSync;
  had_pass_ = false;
  if (options_.find_unused_parameters) {
    for (const TensorImpl* leaf : autograd::ReachableLeaves(output)) {
      auto it = index_of_.find(leaf);
      if (it != index_of_.end()) used_[it->second] = 1;
    }
  }
}

void Reducer::PrepareForLocalBackward() {
  pass_ = Pass::kLocal;
  had_pass_ = false;
}

void Reducer::RegisterCommHook(std::any state, CommHook hook) {
  PADDLE_ENFORCE(!hook_, phi::errors::PreconditionNotMet(
                             "register_comm_hook: a communication hook is already registered."));
  PADDLE_ENFORCE(hook != nullptr,
                 phi::errors::InvalidArgument("register_comm_hook: the hook is empty."));
  hook_state_ = std::move(state);
  hook_ = std::move(hook);
}

void Reducer::OnGradReady(size_t index) {
  if (pass_ == Pass::kLocal) return;  // no_sync(): accumulate only
  if (pass_ == Pass::kNone) {
    PADDLE_THROW(phi::errors::PreconditionNotMet(
        had_pass_
            ? "DataParallel: parameter '%s' was marked ready twice: a second backward pass "
              "reached it after this iteration's gradients were already reduced. Run forward "
              "through DataParallel before each backward (or use no_sync() to accumulate)."
            : "DataParallel: backward reached parameter '%s' without a forward through "
              "DataParallel (call the DataParallel module, not the module it wraps).",
        names_[index].c_str()));
  }
  if (!finalize_queued_) {
    autograd::QueueCallback([this] { Finalize(); });
    finalize_queued_ = true;
    if (options_.find_unused_parameters) {
      for (size_t i = 0; i < params_.size(); ++i) {
        if (!used_[i] && !ready_[i]) MarkReady(i, /*used=*/false);
      }
    }
  }
  PADDLE_ENFORCE(!ready_[index],
                 phi::errors::PreconditionNotMet(
                     "DataParallel: parameter '%s' was marked ready twice in one backward pass.",
                     names_[index].c_str()));
  MarkReady(index, /*used=*/true);
}

void Reducer::MarkReady(size_t index, bool used) {
  ready_[index] = 1;
  if (finalized_passes_ == 0 && !rebuilt_) ready_order_.push_back(index);
  Bucket& b = *buckets_[bucket_of_[index]];
  size_t s = slot_of_[index];
  phi::DenseTensor slot = b.buffer.FlatView(b.offsets[s], b.lengths[s]);
  if (used) {
    locally_used_[index] = 1;
    const phi::DenseTensor& grad = params_[index].grad();
    if (!IsView(grad, slot)) CopyBytes(grad, &slot);
  } else if (slot.nbytes() > 0) {
    phi::Fill(&slot, 0);  // an unused parameter contributes zero
  }
  if (--b.pending == 0) LaunchReadyBuckets();
}

void Reducer::LaunchReadyBuckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_]->pending == 0) {
    Launch(next_bucket_++);
  }
}

void Reducer::Launch(size_t index) {
  Bucket& b = *buckets_[index];
  std::vector<Tensor> params;
  for (size_t p : b.params) params.push_back(params_[p]);
  GradBucket view(index, index + 1 == buckets_.size(), &b.buffer, b.offsets, b.lengths,
                  std::move(params), group_);
  dist::record_comm name("DataParallel bucket " + std::to_string(index));
  b.future = hook_ ? hook_(hook_state_, view) : comm_hooks::allreduce_hook({}, view);
}

void Reducer::WaitLaunched() {
  for (auto& b : buckets_) {
    if (b->future) b->future->wait();
  }
}

std::vector<std::vector<size_t>> Reducer::bucket_indices() const {
  std::vector<std::vector<size_t>> out;
  for (const auto& b : buckets_) out.push_back(b->params);
  return out;
}

std::vector<std::string> Reducer::NamesOf(const std::vector<size_t>& indices) const {
  std::vector<std::string> out;
  for (size_t i : indices) out.push_back(names_[i]);
  return out;
}

void Reducer::Finalize() {
  // Whatever happens below, the pass is over.
  struct EndPass {
    Reducer* r;
    ~EndPass() {
      r->pass_ = Pass::kNone;
      r->had_pass_ = true;
      r->finalize_queued_ = false;
      for (auto& b : r->buckets_) b->future = nullptr;
    }
  } end_pass{this};

  std::vector<size_t> unready;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!ready_[i]) unready.push_back(i);
  }
  WaitLaunched();
  if (!unready.empty()) {
    PADDLE_THROW(phi::errors::PreconditionNotMet(
        "DataParallel: %zu parameter(s) got no gradient in this backward pass: %s. Their "
        "buckets were not reduced on this rank. If the forward does not use every parameter, "
        "construct DataParallel with find_unused_parameters=true; otherwise make every "
        "rank's loss depend on every parameter.",
        unready.size(), JoinNames(NamesOf(unready)).c_str()));
  }

  std::vector<char> globally_used(params_.size(), 1);
  if (options_.find_unused_parameters) {
    std::vector<int32_t> flags(locally_used_.begin(), locally_used_.end());
    auto bitmap = OnPlace(phi::DenseTensor::FromVector(flags), place_);
    dist::record_comm name("DataParallel used-parameter bitmap");
    dist::all_reduce(&bitmap, dist::ReduceOp::SUM, {group_, false});
    const auto on_host = OnPlace(bitmap, phi::CPUPlace());
    const int32_t* sum = on_host.data<int32_t>();
    for (size_t i = 0; i < params_.size(); ++i) globally_used[i] = sum[i] > 0;
  }

  for (size_t p = 0; p < params_.size(); ++p) {
    if (!globally_used[p]) continue;  // no rank used it: its gradient is left untouched
    Bucket& b = *buckets_[bucket_of_[p]];
    phi::DenseTensor slot = b.buffer.FlatView(b.offsets[slot_of_[p]], b.lengths[slot_of_[p]]);
    Tensor& param = params_[p];
    if (IsView(param.grad(), slot)) continue;
    if (options_.gradient_as_bucket_view) {
      slot.Resize(param.dims());
      param.set_grad(slot);
    } else if (param.has_grad()) {
      phi::DenseTensor grad = param.grad();  // shares the storage: written in place
      CopyBytes(slot, &grad);
    } else {
      phi::DenseTensor own(place_, slot.dtype(), slot.dims());
      CopyBytes(slot, &own);
      own.Resize(param.dims());
      param.set_grad(std::move(own));
    }
  }
  std::fill(ready_.begin(), ready_.end(), 0);
  for (auto& b : buckets_) b->pending = b->params.size();
  next_bucket_ = 0;
  ++finalized_passes_;
}

}  // namespace paddle_like
