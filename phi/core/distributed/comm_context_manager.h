// Process-wide registry of communicators: string key -> CommContext. A group's key is its
// backend and group id (the framework's ring id): "gloo/3", "nccl/3", so framework operators
// find their communicator by ring id and two backends on one gid never collide. Creation is
// backend-specific (see gloo_comm_context.h, nccl_comm_context.h); the manager owns, finds
// and checks: one communicator is never shared by two live process groups (each would run
// it from its own comm stream, and no engine allows two threads on one communicator), a
// found communicator must have the rank and size asked for, and a group erases only the
// communicator it registered.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "phi/core/distributed/comm_context.h"
#include "phi/core/errors.h"

namespace phi {
namespace distributed {

class CommContextManager {
 public:
  static CommContextManager& Instance();

  static std::string KeyOf(const std::string& backend, int gid) {
    return backend + "/" + std::to_string(gid);
  }

  // Returns the context at `key` for `owner` (the process group using it), creating it with
  // `create` when absent. Creation runs outside the registry lock (it may rendezvous through
  // a store), and concurrent calls for one key create it once. Raises PreconditionNotMet
  // when another live owner holds the key, or the context's rank/size differ from
  // `rank`/`size`.
  CommContext* GetOrCreate(const std::string& key, const void* owner, int rank, int size,
                           const std::function<std::unique_ptr<CommContext>()>& create);
  // nullptr when absent.
  CommContext* Get(const std::string& key) const;
  // The context at `key` as engine type T: nullptr when absent, InvalidArgument when it is
  // another engine's.
  template <typename T>
  T* GetAs(const std::string& key) const;
  bool Has(const std::string& key) const;
  // Registers a context created elsewhere (tests, framework glue); no owner.
  void Set(const std::string& key, std::unique_ptr<CommContext> comm);
  // Destroys the context at `key` if `owner` registered it (any context when owner is
  // nullptr): destroying one group never erases another group's communicator.
  void Erase(const std::string& key, const void* owner = nullptr);

 private:
  struct Entry {
    std::unique_ptr<CommContext> comm;
    const void* owner = nullptr;
  };
  mutable std::mutex mu_;
  std::map<std::string, Entry> contexts_;
  std::map<std::string, std::shared_ptr<std::mutex>> creating_;  // one creator per key
};

template <typename T>
T* CommContextManager::GetAs(const std::string& key) const {
  CommContext* comm = Get(key);
  if (comm == nullptr) return nullptr;
  T* typed = dynamic_cast<T*>(comm);
  PADDLE_ENFORCE_NOT_NULL(typed, errors::InvalidArgument(
                                     "The communicator at '%s' is a %s one, not the type "
                                     "asked for.",
                                     key.c_str(), comm->BackendName().c_str()));
  return typed;
}

}  // namespace distributed
}  // namespace phi
