#include "phi/core/distributed/comm_context_manager.h"

#include "phi/core/errors.h"

namespace phi {
namespace distributed {

CommContextManager& CommContextManager::Instance() {
  static auto* manager = new CommContextManager();  // outlives static destructors
  return *manager;
}

CommContext* CommContextManager::GetOrCreate(
    const std::string& key, const std::function<std::unique_ptr<CommContext>()>& create) {
  std::shared_ptr<std::once_flag> once;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = contexts_.find(key);
    if (it != contexts_.end()) return it->second.get();
    auto& slot = creating_[key];
    if (!slot) slot = std::make_shared<std::once_flag>();
    once = slot;
  }
  // If create() throws, call_once lets the next caller try again.
  std::call_once(*once, [&] {
    auto comm = create();
    PADDLE_ENFORCE_NOT_NULL(comm, errors::External("Creating communicator '%s' returned null",
                                                   key.c_str()));
    std::lock_guard<std::mutex> lk(mu_);
    contexts_[key] = std::move(comm);
  });
  std::lock_guard<std::mutex> lk(mu_);
  return contexts_.at(key).get();
}

CommContext* CommContextManager::Get(const std::string& key) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = contexts_.find(key);
  return it == contexts_.end() ? nullptr : it->second.get();
}

bool CommContextManager::Has(const std::string& key) const { return Get(key) != nullptr; }

void CommContextManager::Set(const std::string& key, std::unique_ptr<CommContext> comm) {
  std::lock_guard<std::mutex> lk(mu_);
  contexts_[key] = std::move(comm);
}

void CommContextManager::Erase(const std::string& key) {
  std::unique_ptr<CommContext> doomed;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = contexts_.find(key);
    if (it == contexts_.end()) return;
    doomed = std::move(it->second);
    contexts_.erase(it);
    creating_.erase(key);
  }
  // Destroyed outside the lock: closing an engine's connections can block briefly.
}

}  // namespace distributed
}  // namespace phi
