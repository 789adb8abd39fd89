#include "distributed/backend_registry.h"

#include <algorithm>
#include <cctype>

#include "distributed/process_group_gloo.h"
#include "phi/core/distributed/store/hash_store.h"
#include "phi/core/errors.h"
#ifdef PADDLE_WITH_NCCL
#include "distributed/process_group_nccl.h"
#endif
#ifdef PADDLE_WITH_MPI
#include "distributed/process_group_mpi.h"
#endif

namespace paddle_like {
namespace distributed {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The timeout of `backend`'s process group: its pg_options' when they set one, else the
// group's.
[[maybe_unused]] std::chrono::milliseconds TimeoutFor(const BackendOptions& o,
                                                      const std::string& backend) {
  if (o.pg_options && o.pg_options->backend() == backend &&
      o.pg_options->timeout > std::chrono::milliseconds::zero()) {
    return o.pg_options->timeout;
  }
  return o.timeout;
}

}  // namespace

BackendRegistry& BackendRegistry::Instance() {
  static auto* registry = new BackendRegistry();  // outlives static destructors
  return *registry;
}

// The one place that knows which backends this build has.
BackendRegistry::BackendRegistry() {
  Register("gloo",
           [](const BackendOptions& o) -> std::shared_ptr<ProcessGroup> {
             return std::make_shared<ProcessGroupGloo>(
                 o.store, o.rank, o.size, o.gid, o.timeout,
                 o.OptionsFor<ProcessGroupGlooOptions>("gloo"), o.group_desc);
           },
           {"cpu"});
  // In-process loopback for one rank: layers above test fast with real results.
  Register("fake",
           [](const BackendOptions& o) -> std::shared_ptr<ProcessGroup> {
             PADDLE_ENFORCE(o.size == 1, phi::errors::InvalidArgument(
                                             "The fake backend runs one rank, not %d.", o.size));
             auto local = std::make_shared<phi::distributed::HashStore>(std::chrono::seconds(30));
             return std::make_shared<ProcessGroupGloo>(local, 0, 1, o.gid, o.timeout);
           },
           {"cpu"});
#ifdef PADDLE_WITH_MPI
  // The processes of one mpirun job (see process_group_mpi.h).
  Register("mpi",
           [](const BackendOptions& o) -> std::shared_ptr<ProcessGroup> {
             return std::make_shared<ProcessGroupMPI>(o.store, o.rank, o.size, o.gid,
                                                      o.timeout, o.group_desc);
           },
           {"cpu"});
#endif
#ifdef PADDLE_WITH_NCCL
  Register("nccl",
           [](const BackendOptions& o) -> std::shared_ptr<ProcessGroup> {
             phi::distributed::NCCLCommOptions config;
             bool high_priority = false;
             if (const auto* n = o.OptionsFor<ProcessGroupNCCLOptions>("nccl")) {
               config.use_config = n->blocking >= 0 || n->cga_cluster_size >= 0 ||
                                   n->min_ctas >= 0 || n->max_ctas >= 0 ||
                                   !n->net_name.empty();
               config.blocking = n->blocking != 0;
               config.cga_cluster_size = n->cga_cluster_size;
               config.min_ctas = n->min_ctas;
               config.max_ctas = n->max_ctas;
               config.net_name = n->net_name;
               high_priority = n->is_high_priority_stream;
             }
             return std::make_shared<ProcessGroupNCCL>(o.store, o.rank, o.size, o.gid,
                                                       TimeoutFor(o, "nccl"), o.device_id,
                                                       config, high_priority, o.group_desc);
           },
           {"cuda"});
#endif
}

void BackendRegistry::Register(const std::string& name, BackendCreator creator,
                               std::vector<std::string> devices) {
  const std::string key = Lower(name);
  PADDLE_ENFORCE(!key.empty(), phi::errors::InvalidArgument("A backend needs a name."));
  PADDLE_ENFORCE(creator != nullptr,
                 phi::errors::InvalidArgument("Backend '%s' has no creator.", name.c_str()));
  PADDLE_ENFORCE(!devices.empty(), phi::errors::InvalidArgument(
                                       "Backend '%s' must serve at least one device type.",
                                       name.c_str()));
  for (auto& d : devices) d = Lower(d);
  std::lock_guard<std::mutex> lk(mu_);
  PADDLE_ENFORCE(backends_.count(key) == 0,
                 phi::errors::InvalidArgument("Backend '%s' is already registered.",
                                              name.c_str()));
  backends_[key] = Entry{std::move(creator), std::move(devices)};
}

const BackendRegistry::Entry& BackendRegistry::Find(const std::string& key) const {
  auto it = backends_.find(key);
  if (it == backends_.end()) {
    std::string known;
    for (const auto& kv : backends_) known += (known.empty() ? "" : ", ") + kv.first;
    PADDLE_THROW(phi::errors::NotFound(
        "No backend '%s' in this build; the registered backends are: %s.", key.c_str(),
        known.c_str()));
  }
  return it->second;
}

bool BackendRegistry::Has(const std::string& name) const {
  std::lock_guard<std::mutex> lk(mu_);
  return backends_.count(Lower(name)) > 0;
}

std::shared_ptr<ProcessGroup> BackendRegistry::Create(const std::string& name,
                                                      const BackendOptions& options) const {
  BackendCreator creator;
  {
    std::lock_guard<std::mutex> lk(mu_);
    creator = Find(Lower(name)).creator;
  }
  // Outside the lock: creating a group may connect (eager connection) and take a while.
  std::shared_ptr<ProcessGroup> group = creator(options);
  PADDLE_ENFORCE_NOT_NULL(group, phi::errors::External("Backend '%s' created no group.",
                                                       name.c_str()));
  return group;
}

std::vector<std::string> BackendRegistry::Devices(const std::string& name) const {
  std::lock_guard<std::mutex> lk(mu_);
  return Find(Lower(name)).devices;
}

std::vector<std::string> BackendRegistry::Names() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::string> names;
  for (const auto& kv : backends_) names.push_back(kv.first);
  return names;
}

}  // namespace distributed
}  // namespace paddle_like
