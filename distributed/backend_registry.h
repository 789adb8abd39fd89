// The backend factory: a process-wide map from a backend name ("gloo", "nccl", a user's) to
// the function that creates its process group, with the device types it serves. Names are
// case-insensitive. The user-facing API creates every group through it, so it needs no
// #ifdef for the backends a build has: "nccl" is registered only where NCCL is built.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "distributed/process_group_options.h"
#include "phi/core/distributed/store/store.h"

namespace paddle_like {
namespace distributed {

struct BackendOptions {
  std::shared_ptr<phi::distributed::Store> store;
  int rank = 0;
  int size = 1;
  int gid = 0;
  std::chrono::milliseconds timeout = ProcessGroup::kUnsetTimeout;  // the default's
  int device_id = -1;  // device backends: -1 chooses from the rank
  // The group's pg_options (null: none), and the user's description of the group.
  std::shared_ptr<const ProcessGroupOptions> pg_options;
  std::string group_desc;
  // `pg_options` when they are for `backend` (lower case), else null.
  template <typename T>
  const T* OptionsFor(const std::string& backend) const {
    if (!pg_options || pg_options->backend() != backend) return nullptr;
    return dynamic_cast<const T*>(pg_options.get());
  }
};

using BackendCreator = std::function<std::shared_ptr<ProcessGroup>(const BackendOptions&)>;

class BackendRegistry {
 public:
  // The registry, with the built-in backends already in it.
  static BackendRegistry& Instance();

  // Adds `name` serving `devices` ("cpu", "cuda"). Raises InvalidArgument when the name is
  // empty or taken, or no device is given.
  void Register(const std::string& name, BackendCreator creator,
                std::vector<std::string> devices);
  bool Has(const std::string& name) const;
  // Creates a process group of backend `name`; NotFound naming the known backends when it
  // is not registered.
  std::shared_ptr<ProcessGroup> Create(const std::string& name,
                                       const BackendOptions& options) const;
  // The device types `name` serves; NotFound when unknown.
  std::vector<std::string> Devices(const std::string& name) const;
  // Every registered name, lower case, sorted.
  std::vector<std::string> Names() const;

 private:
  BackendRegistry();
  struct Entry {
    BackendCreator creator;
    std::vector<std::string> devices;
  };
  const Entry& Find(const std::string& lower_name) const;  // holds mu_
  mutable std::mutex mu_;
  std::map<std::string, Entry> backends_;
};

}  // namespace distributed
}  // namespace paddle_like
