#include "paddle_like/parallel/data_parallel.h"

#include <glog/logging.h>

#include <deque>
#include <map>

#include "distributed/comm_trace.h"
#include "paddle_like/dist/object_collectives.h"
#include "paddle_like/eager/autograd.h"
#include "paddle_like/parallel/device_copy.h"
#include "phi/core/errors.h"

namespace paddle_like {

namespace {

std::string Describe(const Tensor& t) {
  return std::string(phi::DataTypeToString(t.dtype())) + " " + t.dims().to_str();
}

}  // namespace

void BroadcastCoalesced(const std::vector<phi::DenseTensor*>& tensors, int src,
                        size_t buffer_size, const dist::GroupPtr& group) {
  // Chunks per (place, dtype), in order, each at most buffer_size bytes (a bigger tensor
  // alone): one flat tensor on the chunk's place.
  using Key = std::pair<phi::Place, phi::DataType>;
  std::map<Key, std::vector<std::vector<phi::DenseTensor*>>> chunks;
  std::map<Key, size_t> open_bytes;
  for (phi::DenseTensor* t : tensors) {
    const Key key{t->place(), t->dtype()};
    auto& list = chunks[key];
    size_t& bytes = open_bytes[key];
    if (list.empty() || bytes + t->nbytes() > buffer_size) {
      list.emplace_back();
      bytes = 0;
    }
    list.back().push_back(t);
    bytes += t->nbytes();
  }
  dist::record_comm name("DataParallel broadcast_coalesced");
  // Two chunks in flight, as the seed's _broadcast_coalesced: the next one is packed and
  // issued while the last one travels; a chunk is unpacked once its broadcast has ended.
  struct InFlight {
    dist::WorkPtr work;
    phi::DenseTensor flat;
    std::vector<phi::DenseTensor*> chunk;
  };
  std::deque<InFlight> flying;
  auto finish_oldest = [&flying] {
    InFlight f = std::move(flying.front());
    flying.pop_front();
    f.work->wait();
    int64_t at = 0;
    for (auto* t : f.chunk) {
      phi::DenseTensor part = f.flat.FlatView(at, t->numel());
      CopyBytes(part, t);
      at += t->numel();
    }
  };
  for (auto& [key, list] : chunks) {
    for (auto& chunk : list) {
      int64_t total = 0;
      for (auto* t : chunk) total += t->numel();
      phi::DenseTensor flat(key.first, key.second, phi::DDim({total}));
      int64_t at = 0;
      for (auto* t : chunk) {
        phi::DenseTensor part = flat.FlatView(at, t->numel());
        CopyBytes(*t, &part);
        at += t->numel();
      }
      dist::WorkPtr work = dist::broadcast(&flat, src, {group, /*async_op=*/true});
      flying.push_back({std::move(work), flat, chunk});
      if (flying.size() > 2) finish_oldest();
    }
  }
  while (!flying.empty()) finish_oldest();
}

void VerifyParamsAcrossProcesses(const std::vector<std::pair<std::string, Tensor>>& params,
                                 const dist::GroupPtr& group) {
  std::vector<std::string> mine;
  for (const auto& [name, t] : params) mine.push_back(name + ": " + Describe(t));
  std::vector<std::vector<std::string>> all;
  dist::all_gather_object(&all, mine, group);
  const auto& ref = all[0];
  for (size_t r = 1; r < all.size(); ++r) {
    const auto& theirs = all[r];
    for (size_t i = 0; i < std::max(ref.size(), theirs.size()); ++i) {
      if (i < ref.size() && i < theirs.size() && ref[i] == theirs[i]) continue;
      PADDLE_THROW(phi::errors::InvalidArgument(
          "DataParallel: the ranks' parameters differ. Parameter %zu is %s on rank 0 but %s "
          "on rank %d (rank 0 has %zu parameters, rank %d has %zu).",
          i, i < ref.size() ? ("'" + ref[i] + "'").c_str() : "missing",
          i < theirs.size() ? ("'" + theirs[i] + "'").c_str() : "missing",
          group->ranks()[r], ref.size(), group->ranks()[r], theirs.size()));
    }
  }
}

DataParallel::DataParallel(std::shared_ptr<nn::Module> module, DataParallelOptions options)
    : module_(std::move(module)), options_(options) {
  PADDLE_ENFORCE_NOT_NULL(module_, phi::errors::InvalidArgument("DataParallel: null module."));
  group_ = options_.group ? options_.group : dist::world();
  if (options_.elastic) {
    // A group of its own: shrinking it never renumbers the world.
    group_ = dist::new_group(group_->ranks());
    dist::start_heartbeat(options_.elastic_options);
  }
  PADDLE_ENFORCE(group_->is_member(),
                 phi::errors::InvalidArgument(
                     "DataParallel: this rank is not a member of group '%s'.",
                     group_->name().c_str()));
  register_module("module", module_);
  auto named = module_->named_parameters();
  VerifyParamsAcrossProcesses(named, group_);
  std::vector<phi::DenseTensor*> state;
  std::vector<Tensor> buffers = module_->buffers();
  for (auto& [name, t] : named) state.push_back(&t.mutable_value());
  for (Tensor& t : buffers) state.push_back(&t.mutable_value());
  BroadcastCoalesced(state, group_->ranks()[0], options_.comm_buffer_size, group_);
  reducer_ = MakeReducer();
}

std::unique_ptr<Reducer> DataParallel::MakeReducer() {
  std::vector<Tensor> params;
  std::vector<std::string> names;
  for (auto& [name, t] : module_->named_parameters()) {
    params.push_back(t);
    names.push_back(name);
  }
  ReducerOptions ro;
  ro.comm_buffer_size = options_.comm_buffer_size;
  ro.last_comm_buffer_size = options_.last_comm_buffer_size;
  ro.find_unused_parameters = options_.find_unused_parameters;
  ro.gradient_as_bucket_view = options_.gradient_as_bucket_view;
  auto reducer = std::make_unique<Reducer>(std::move(params), std::move(names), group_, ro);
  if (hook_) reducer->RegisterCommHook(hook_state_, hook_);
  return reducer;
}

void DataParallel::run_step(const std::function<void()>& step) {
  CheckUsable();
  while (true) {
    try {
      step();
      ++steps_;
      return;
    } catch (const phi::EnforceNotMet&) {
      if (!options_.elastic) throw;
      RecoverFromDeath(std::current_exception());
    }
  }
}

void DataParallel::RecoverFromDeath(std::exception_ptr failure) {
  // The failed step's partial gradients go; so does the Reducer and its hooks. Until a new
  // group is agreed this object is unusable (its group's communicators are gone).
  reducer_.reset();
  module_->clear_gradients(/*set_to_zero=*/false);
  unusable_ = "a step failed and the elastic recovery did not complete";
  dist::ShrinkResult shrunk = dist::agree_and_shrink(group_, options_.elastic_options);
  if (!shrunk.group) {  // nobody died: not ours to handle
    unusable_ = "a step failed on every rank (nobody died) and its group was torn down";
    std::rethrow_exception(failure);
  }
  unusable_.clear();
  group_ = shrunk.group;
  reducer_ = MakeReducer();
  ElasticEvent event{shrunk.lost, steps_, group_->size(), shrunk.seconds};
  std::string lost;
  for (int r : event.lost) lost += (lost.empty() ? "" : ", ") + std::to_string(r);
  LOG(WARNING) << "DataParallel (elastic): rank(s) " << lost << " died at step " << event.step
               << "; continuing on " << event.new_world_size << " rank(s) (detected and "
               << "shrunk in " << event.seconds << " s); the step runs again";
  if (on_rank_lost_) on_rank_lost_(event);
}

void DataParallel::on_rank_lost(std::function<void(const ElasticEvent&)> callback) {
  on_rank_lost_ = std::move(callback);
}

DataParallel::~DataParallel() = default;

void DataParallel::CheckUsable() const {
  PADDLE_ENFORCE(unusable_.empty(),
                 phi::errors::PreconditionNotMet(
                     "DataParallel (elastic) is unusable: %s. Make a new DataParallel.",
                     unusable_.c_str()));
}

Tensor DataParallel::forward(const Tensor& input) {
  CheckUsable();
  if (options_.broadcast_buffers) {
    std::vector<Tensor> buffers = module_->buffers();
    if (!buffers.empty()) {
      std::vector<phi::DenseTensor*> state;
      for (Tensor& t : buffers) state.push_back(&t.mutable_value());
      BroadcastCoalesced(state, group_->ranks()[0], options_.comm_buffer_size, group_);
    }
  }
  Tensor out;
  {
    distributed::TraceSpan span("forward");
    out = module_->forward(input);
  }
  if (autograd::IsGradEnabled() && training()) {
    if (require_sync_) reducer_->PrepareForBackward(out);
    else reducer_->PrepareForLocalBackward();
  }
  return out;
}

void DataParallel::register_comm_hook(std::any state, CommHook hook) {
  CheckUsable();
  reducer_->RegisterCommHook(state, hook);
  hook_state_ = std::move(state);  // kept for the Reducer of a shrunk group
  hook_ = std::move(hook);
}

DataParallel::NoSyncGuard::NoSyncGuard(DataParallel* dp) : dp_(dp), previous_(dp->require_sync_) {
  dp_->require_sync_ = false;
}

DataParallel::NoSyncGuard::~NoSyncGuard() { dp_->require_sync_ = previous_; }

}  // namespace paddle_like
