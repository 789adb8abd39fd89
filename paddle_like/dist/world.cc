// Process-wide state of paddle_like::dist: the world group, the groups made since, and the
// group-id counter that new_group() advances in the same order on every rank.
#include <algorithm>
#include <set>
#include <thread>

#include <glog/logging.h>

#include "distributed/backend_registry.h"
#include "distributed/process_group_with_stream.h"
#include "paddle_like/dist/dist_internal.h"
#include "paddle_like/dist/distributed.h"
#include "phi/core/distributed/liveness.h"
#include "phi/core/distributed/rank_list.h"
#include "phi/core/distributed/store/prefix_store.h"
#include "phi/core/distributed/store/rendezvous.h"
#include "phi/core/errors.h"
#include "phi/core/flags.h"
#ifdef PADDLE_WITH_MPI
#include "phi/core/distributed/mpi_comm_context.h"
#endif

namespace paddle_like {
namespace dist {

using phi::distributed::JoinRanks;

using distributed::BackendOptions;
using distributed::BackendRegistry;

// ------------------------------------------------------------------ Group
Group::Group(std::string name, int gid, std::vector<int> ranks, int rank, std::string config,
             std::map<std::string, std::string> by_device, std::shared_ptr<Store> store,
             std::chrono::milliseconds timeout)
    : name_(std::move(name)),
      gid_(gid),
      ranks_(std::move(ranks)),
      rank_(rank),
      backend_config_(std::move(config)),
      backend_by_device_(std::move(by_device)),
      store_(std::move(store)),
      timeout_(timeout) {}

distributed::ProcessGroup* Group::backend_for(const std::string& device) {
  PADDLE_ENFORCE(!destroyed(), phi::errors::PreconditionNotMet(
                                   "Group '%s' was destroyed (destroy_process_group); make a "
                                   "new group.",
                                   name_.c_str()));
  PADDLE_ENFORCE(is_member(), phi::errors::PreconditionNotMet(
                                  "This rank is not a member of group '%s'.", name_.c_str()));
  auto it = backend_by_device_.find(device);
  PADDLE_ENFORCE(it != backend_by_device_.end(),
                 phi::errors::InvalidArgument(
                     "Group '%s' (backend '%s') has no backend for %s tensors.", name_.c_str(),
                     backend_config_.c_str(), device.c_str()));
  std::lock_guard<std::mutex> lk(mu_);
  auto& pg = backends_[device];
  if (!pg) {
    BackendOptions o;
    o.store = std::make_shared<phi::distributed::PrefixStore>(it->second, store_);
    o.rank = rank_;
    o.size = size();
    o.gid = gid_;
    o.timeout = timeout();
    o.device_id = device_id_;
    o.pg_options = pg_options_;
    o.group_desc = group_desc_;
    pg = BackendRegistry::Instance().Create(it->second, o);
  }
  return pg.get();
}

void Group::set_timeout(std::chrono::milliseconds t) {
  timeout_.store(t);
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& kv : backends_) kv.second->SetTimeout(t);
}

void Group::drop_backends() {
  std::map<std::string, std::shared_ptr<distributed::ProcessGroup>> doomed;
  {
    std::lock_guard<std::mutex> lk(mu_);
    doomed.swap(backends_);
  }
  // Destroyed outside the lock: each drains its streams within its timeout.
}

void Group::destroy() {
  destroyed_.store(true);
  drop_backends();
}

void Group::abort_backends(const std::string& why) {
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& kv : backends_) {
    if (auto* pg = dynamic_cast<distributed::ProcessGroupWithStream*>(kv.second.get())) {
      pg->AbortComm(why);
    }
  }
}

// ------------------------------------------------------------------ the world
class World {
 public:
  static World& Get() {
    static auto* w = new World();  // outlives static destructors (groups join threads)
    return *w;
  }

  void Init(const InitOptions& o) {
    std::lock_guard<std::mutex> lk(mu_);
    PADDLE_ENFORCE(world_ == nullptr,
                   phi::errors::PreconditionNotMet(
                       "init_process_group() was already called; destroy_process_group() "
                       "first."));
    const std::string config = o.backend.empty() ? DefaultBackendConfig() : o.backend;
    auto by_device = ParseBackendConfig(config);
    std::shared_ptr<Store> store = o.store;
    int rank = o.rank, size = o.world_size;
#ifdef PADDLE_WITH_MPI
    // mpirun numbers the ranks but names no store: with an MPI backend, rank 0 hosts one and
    // MPI carries its address (docs/architecture.md, "MPI backend").
    const bool uses_mpi = std::any_of(by_device.begin(), by_device.end(),
                                      [](const auto& kv) { return kv.second == "mpi"; });
    if (!store && uses_mpi && o.init_method == "env://" &&
        phi::distributed::MpiJobWithoutStoreAddress()) {
      auto rv = phi::distributed::MpiRendezvous(phi::distributed::Store::kDefaultTimeout);
      store = rv.store;
      rank = rv.rank;
      size = rv.world_size;
    }
#endif
    if (!store) {
      auto rv = phi::distributed::Rendezvous(
          o.init_method, o.rank, o.world_size,
          o.timeout > std::chrono::milliseconds::zero() ? o.timeout
                                                        : phi::distributed::Store::kDefaultTimeout);
      store = rv.store;
      rank = rv.rank;
      size = rv.world_size;
    }
    PADDLE_ENFORCE(size > 0 && rank >= 0 && rank < size,
                   phi::errors::InvalidArgument(
                       "init_process_group with a store needs 0 <= rank < world_size, got "
                       "rank %d, world_size %d.",
                       rank, size));
    timeout_ = o.timeout > std::chrono::milliseconds::zero()
                   ? o.timeout
                   : std::chrono::milliseconds(int64_t{FLAGS_default_group_timeout_s} * 1000);
    store_ = store;
    global_rank_ = rank;
    init_rank_ = rank;
    device_id_ = o.device_id;
    next_gid_ = 1;
    local_groups_.clear();
    std::vector<int> ranks(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) ranks[r] = r;
    init_ranks_ = ranks;
    if (FLAGS_liveness_interval_ms > 0) {
      phi::distributed::Liveness::Process().Start(
          store, rank, std::chrono::milliseconds(FLAGS_liveness_interval_ms));
    }
    world_ = MakeGroupLocked(o.group_name.empty() ? "default_pg" : o.group_name, 0, ranks,
                             config, std::move(by_device), timeout_);
  }

  std::shared_ptr<Store> root_store() const {
    std::lock_guard<std::mutex> lk(mu_);
    PADDLE_ENFORCE_NOT_NULL(store_, phi::errors::PreconditionNotMet(
                                        "The default process group is not initialized: call "
                                        "init_process_group() first."));
    return store_;
  }
  int init_rank() const {
    std::lock_guard<std::mutex> lk(mu_);
    return init_rank_;
  }

  GroupPtr world() const {
    std::lock_guard<std::mutex> lk(mu_);
    PADDLE_ENFORCE_NOT_NULL(world_, phi::errors::PreconditionNotMet(
                                        "The default process group is not initialized: call "
                                        "init_process_group() first."));
    return world_;
  }

  bool initialized() const {
    std::lock_guard<std::mutex> lk(mu_);
    return world_ != nullptr;
  }

  GroupPtr NewGroup(std::vector<int> ranks, const NewGroupOptions& o) {
    GroupPtr w = world();
    std::lock_guard<std::mutex> lk(mu_);
    if (ranks.empty()) ranks = w->ranks();
    std::set<int> seen;
    for (int r : ranks) {
      PADDLE_ENFORCE(r >= 0 && r < w->size(),
                     phi::errors::InvalidArgument(
                         "new_group: rank %d is not in the world [0, %d).", r, w->size()));
      PADDLE_ENFORCE(seen.insert(r).second,
                     phi::errors::InvalidArgument("new_group: rank %d is listed twice.", r));
    }
    if (o.sort_ranks) std::sort(ranks.begin(), ranks.end());
    const std::string config = o.backend.empty() ? w->backend_config() : o.backend;
    auto by_device = ParseBackendConfig(config);
    // Every rank advances the counter, members or not: the ids stay agreed. With local
    // synchronization only the members call it, and they agree through the store instead.
    CheckPgOptions(o.pg_options, by_device, "new_group");
    const int gid = o.use_local_synchronization ? LocalGidLocked(ranks) : next_gid_++;
    GroupPtr g = MakeGroupLocked("group_" + std::to_string(gid), gid, std::move(ranks), config,
                                 std::move(by_device),
                                 o.timeout > std::chrono::milliseconds::zero() ? o.timeout
                                                                                : timeout_);
    g->pg_options_ = o.pg_options;
    g->group_desc_ = o.group_desc;
    return g;
  }

  // pg_options must be for one of the group's backends: options that no backend of the
  // group reads would be ignored silently.
  static void CheckPgOptions(const std::shared_ptr<const distributed::ProcessGroupOptions>& p,
                             const std::map<std::string, std::string>& by_device,
                             const char* call) {
    if (!p) return;
    std::string names;
    for (const auto& kv : by_device) {
      if (kv.second == p->backend()) return;
      names += (names.empty() ? "" : ", ") + kv.second;
    }
    PADDLE_THROW(phi::errors::InvalidArgument(
        "%s: pg_options are for backend '%s', but the group's backends are %s.", call,
        p->backend().c_str(), names.c_str()));
  }

  // The members of `ranks` agree on a group id without the other ranks: the lowest member
  // takes the next id of a store-wide counter (a range of its own, so it never meets the
  // call-order ids) and publishes it under the members' list and how many groups of that
  // list this rank made before; the others read it there.
  int LocalGidLocked(const std::vector<int>& ranks) {
    PADDLE_ENFORCE(std::find(ranks.begin(), ranks.end(), global_rank_) != ranks.end(),
                   phi::errors::InvalidArgument(
                       "new_group with use_local_synchronization is called by the members "
                       "only, and rank %d is not one.",
                       global_rank_));
    std::string list;
    for (int r : ranks) list += std::to_string(r) + ",";
    const int nth = local_groups_[list]++;
    const std::string key = "dist/local_gid/" + list + "/" + std::to_string(nth);
    if (global_rank_ == ranks.front()) {
      const int64_t gid = kLocalGidBase + store_->add("dist/local_gid_counter", 1);
      store_->set(key, std::to_string(gid));
      return static_cast<int>(gid);
    }
    store_->wait({key}, timeout_);
    return std::stoi(store_->get_string(key));
  }

  GroupPtr Shrink(const std::vector<int>& excluded, const GroupPtr& group,
                  const ShrinkOptions& o) {
    GroupPtr w = world();
    GroupPtr parent = group ? group : w;
    PADDLE_ENFORCE(!excluded.empty(), phi::errors::InvalidArgument(
                                          "shrink_group: ranks_to_exclude cannot be empty."));
    std::set<int> out;  // global ranks
    for (int r : excluded) {
      PADDLE_ENFORCE(r >= 0 && r < parent->size(),
                     phi::errors::InvalidArgument(
                         "shrink_group: rank to exclude %d is not a rank of group '%s' (its "
                         "ranks are 0..%d).",
                         r, parent->name().c_str(), parent->size() - 1));
      PADDLE_ENFORCE(out.insert(parent->ranks()[r]).second,
                     phi::errors::InvalidArgument(
                         "shrink_group: rank %d is listed twice in ranks_to_exclude.", r));
    }
    PADDLE_ENFORCE(static_cast<int>(out.size()) < parent->size(),
                   phi::errors::InvalidArgument("shrink_group: it would exclude every rank of "
                                                "group '%s'.",
                                                parent->name().c_str()));
    PADDLE_ENFORCE(out.count(global_rank()) == 0,
                   phi::errors::InvalidArgument(
                       "shrink_group: this rank (%d) is one of the excluded ranks of group "
                       "'%s'.",
                       global_rank(), parent->name().c_str()));
    PADDLE_ENFORCE(parent->is_member(), phi::errors::InvalidArgument(
                                            "shrink_group: this rank is not in group '%s'.",
                                            parent->name().c_str()));
    CheckPgOptions(o.pg_options, parent->backend_by_device(), "shrink_group");
    if (o.abort) {
      // Abort first: an op blocked on the dead rank ends now, not at its timeout, and the
      // backends' destruction does not wait for it.
      parent->abort_backends("shrink_group with abort");
      parent->drop_backends();
    }
    std::vector<int> stay;
    for (int r : parent->ranks()) {
      if (out.count(r) == 0) stay.push_back(r);
    }
    const auto timeout =
        o.timeout > std::chrono::milliseconds::zero() ? o.timeout : parent->timeout();
    std::lock_guard<std::mutex> lk(mu_);
    const int gid = next_gid_++;
    const std::string name = parent->name() + "_shrunk_" + std::to_string(gid);
    if (parent != world_) {
      GroupPtr g = MakeGroupLocked(name, gid, std::move(stay), parent->backend_config(),
                                   parent->backend_by_device(), timeout);
      g->pg_options_ = o.pg_options;
      return g;
    }
    // The world: renumbered 0..n-1 in the old order.
    const int me = static_cast<int>(std::find(stay.begin(), stay.end(), global_rank_) -
                                    stay.begin());
    std::vector<int> renumbered(stay.size());
    for (size_t i = 0; i < stay.size(); ++i) renumbered[i] = static_cast<int>(i);
    global_rank_ = me;
    std::vector<int> init_ranks;
    for (int r : stay) init_ranks.push_back(init_ranks_[static_cast<size_t>(r)]);
    init_ranks_ = std::move(init_ranks);
    groups_.erase(world_->gid());
    world_ = MakeGroupLocked(name, gid, std::move(renumbered), world_->backend_config(),
                             world_->backend_by_device(), timeout);
    world_->pg_options_ = o.pg_options;
    return world_;
  }

  int global_rank() const {
    std::lock_guard<std::mutex> lk(mu_);
    return global_rank_;
  }

  void Destroy(const GroupPtr& group) {
    std::vector<GroupPtr> doomed;
    GroupPtr doomed_world;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (group == nullptr || group == world_) {
        doomed_world = world_;
        for (auto& kv : groups_) doomed.push_back(kv.second);
        if (world_) doomed.push_back(world_);
        groups_.clear();
        world_.reset();
      } else {
        groups_.erase(group->gid());
        doomed.push_back(group);
      }
    }
    for (auto& g : doomed) phi::distributed::Liveness::Process().ForgetGroup(g->gid());
    // The world's end is this process's: its heartbeat says "exited" while the store is up.
    if (doomed_world) phi::distributed::Liveness::Process().Stop();
    // Outside the lock: each backend drains its streams (within its timeout) as it goes.
    for (auto& g : doomed) g->destroy();
  }

 private:
  GroupPtr MakeGroupLocked(std::string name, int gid, std::vector<int> ranks,
                           const std::string& config, std::map<std::string, std::string> by_device,
                           std::chrono::milliseconds timeout) {
    int my = -1;
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] == global_rank_) my = static_cast<int>(i);
    }
    auto store = std::make_shared<phi::distributed::PrefixStore>(
        "dist/" + std::to_string(gid), store_);
    std::vector<int> init_ranks;  // the processes behind the group's ranks
    for (int r : ranks) init_ranks.push_back(init_ranks_[static_cast<size_t>(r)]);
    phi::distributed::Liveness::Process().MapGroup(gid, std::move(init_ranks));
    GroupPtr g(new Group(std::move(name), gid, std::move(ranks), my, config,
                         std::move(by_device), store, timeout));
    g->device_id_ = device_id_;
    groups_[gid] = g;
    return g;
  }

  mutable std::mutex mu_;
  GroupPtr world_;
  std::map<int, GroupPtr> groups_;
  std::vector<int> init_ranks_;  // each global rank's rank at init (shrinking renumbers)
  std::shared_ptr<Store> store_;
  int global_rank_ = -1;
  int init_rank_ = -1;  // the rank init gave this process (a world shrink renumbers global_rank_)
  int next_gid_ = 1;
  int device_id_ = -1;  // init's device_id, for the device backends of every group
  std::chrono::milliseconds timeout_{0};
  static constexpr int64_t kLocalGidBase = int64_t{1} << 20;
  std::map<std::string, int> local_groups_;  // member list -> groups made of it locally
};

void init_process_group(const InitOptions& options) { World::Get().Init(options); }
bool is_initialized() { return World::Get().initialized(); }
void destroy_process_group(const GroupPtr& group) { World::Get().Destroy(group); }
GroupPtr world() { return World::Get().world(); }
std::shared_ptr<Store> RootStore() { return World::Get().root_store(); }
int InitRank() { return World::Get().init_rank(); }

static GroupPtr Or(const GroupPtr& g) { return g ? g : world(); }

static GroupPtr Member(GroupPtr g, const char* what) {
  PADDLE_ENFORCE(g->is_member(), phi::errors::InvalidArgument(
                                     "%s: invalid process group: this rank is not in group "
                                     "'%s' (ranks %s).",
                                     what, g->name().c_str(), JoinRanks(g->ranks()).c_str()));
  return g;
}

int get_rank(const GroupPtr& group) { return Member(Or(group), "get_rank")->rank(); }
int get_world_size(const GroupPtr& group) {
  return Member(Or(group), "get_world_size")->size();
}
std::string get_backend(const GroupPtr& group) { return Or(group)->backend_config(); }

std::string get_backend_config(const GroupPtr& group) {
  std::string config;
  for (const auto& kv : Or(group)->backend_by_device()) {
    config += (config.empty() ? "" : ",") + kv.first + ":" + kv.second;
  }
  return config;
}

void set_timeout(std::chrono::milliseconds timeout, const GroupPtr& group) {
  PADDLE_ENFORCE(timeout > std::chrono::milliseconds::zero(),
                 phi::errors::InvalidArgument("set_timeout needs a positive timeout, got %lld ms.",
                                              static_cast<long long>(timeout.count())));
  Or(group)->set_timeout(timeout);
}

std::string get_default_backend_for_device(const std::string& device) {
  auto by_device = ParseBackendConfig(DefaultBackendConfig());
  auto it = by_device.find(Lower(device));
  PADDLE_ENFORCE(it != by_device.end(),
                 phi::errors::InvalidArgument("No backend serves device '%s' in this build.",
                                              device.c_str()));
  return it->second;
}

bool is_available() { return true; }
bool is_backend_available(const std::string& backend) {
  return BackendRegistry::Instance().Has(backend);
}
bool is_gloo_available() { return is_backend_available("gloo"); }
bool is_nccl_available() { return is_backend_available("nccl"); }
bool is_mpi_available() { return is_backend_available("mpi"); }

GroupPtr shrink_group(const std::vector<int>& ranks_to_exclude, const GroupPtr& group,
                      const ShrinkOptions& options) {
  return World::Get().Shrink(ranks_to_exclude, group, options);
}

GroupPtr new_group(std::vector<int> ranks, const NewGroupOptions& options) {
  return World::Get().NewGroup(std::move(ranks), options);
}

int get_group_rank(const GroupPtr& group, int global_rank) {
  const auto& ranks = Or(group)->ranks();
  auto it = std::find(ranks.begin(), ranks.end(), global_rank);
  return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
}

int get_global_rank(const GroupPtr& group, int group_rank) {
  const auto& ranks = Or(group)->ranks();
  PADDLE_ENFORCE(group_rank >= 0 && group_rank < static_cast<int>(ranks.size()),
                 phi::errors::OutOfRange("Group rank %d is not in [0, %zu).", group_rank,
                                         ranks.size()));
  return ranks[static_cast<size_t>(group_rank)];
}

std::vector<int> get_process_group_ranks(const GroupPtr& group) { return Or(group)->ranks(); }

}  // namespace dist
}  // namespace paddle_like
