#include "phi/core/distributed/comm_context_manager.h"

#include "phi/core/errors.h"

namespace phi {
namespace distributed {

CommContextManager& CommContextManager::Instance() {
  static auto* manager = new CommContextManager();  // outlives static destructors
  return *manager;
}

CommContext* CommContextManager::GetOrCreate(
    const std::string& key, const void* owner, int rank, int size,
    const std::function<std::unique_ptr<CommContext>()>& create) {
  auto check = [&](const Entry& e) {
    PADDLE_ENFORCE(e.comm->GetRank() == rank && e.comm->GetSize() == size,
                   errors::PreconditionNotMet(
                       "The communicator '%s' is rank %d of %d, but the group asks for rank "
                       "%d of %d.",
                       key.c_str(), e.comm->GetRank(), e.comm->GetSize(), rank, size));
    PADDLE_ENFORCE(e.owner == owner,
                   errors::PreconditionNotMet(
                       "The communicator '%s' belongs to another live process group: two "
                       "groups of one backend cannot share a group id. Destroy that group "
                       "first, or use another gid.",
                       key.c_str()));
    return e.comm.get();
  };
  std::shared_ptr<std::mutex> creating;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = contexts_.find(key);
    if (it != contexts_.end()) return check(it->second);
    auto& slot = creating_[key];
    if (!slot) slot = std::make_shared<std::mutex>();
    creating = slot;
  }
  // One creator per key; the others wait here and then find its communicator. If create()
  // throws, the lock is released and the next caller tries again. (Not std::call_once: a
  // throwing callable leaves the flag taken under TSan's pthread_once, and the retry hangs.)
  std::lock_guard<std::mutex> one_creator(*creating);
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = contexts_.find(key);
    if (it != contexts_.end()) return check(it->second);
  }
  auto comm = create();
  PADDLE_ENFORCE_NOT_NULL(
      comm, errors::External("Creating communicator '%s' returned null", key.c_str()));
  std::lock_guard<std::mutex> lk(mu_);
  auto& entry = contexts_[key];
  entry = Entry{std::move(comm), owner};
  return check(entry);
}

CommContext* CommContextManager::Get(const std::string& key) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = contexts_.find(key);
  return it == contexts_.end() ? nullptr : it->second.comm.get();
}

bool CommContextManager::Has(const std::string& key) const { return Get(key) != nullptr; }

void CommContextManager::Set(const std::string& key, std::unique_ptr<CommContext> comm) {
  std::lock_guard<std::mutex> lk(mu_);
  contexts_[key] = Entry{std::move(comm), nullptr};
}

void CommContextManager::Erase(const std::string& key, const void* owner) {
  std::unique_ptr<CommContext> doomed;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = contexts_.find(key);
    if (it == contexts_.end()) return;
    if (owner != nullptr && it->second.owner != owner) return;  // another group's
    doomed = std::move(it->second.comm);
    contexts_.erase(it);
    creating_.erase(key);
  }
  // Destroyed outside the lock: closing an engine's connections can block briefly.
}

}  // namespace distributed
}  // namespace phi
