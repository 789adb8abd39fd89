#include "distributed/process_group.h"

#include "phi/core/errors.h"

namespace paddle_like {
namespace distributed {

ProcessGroupIdMap& ProcessGroupIdMap::GetInstance() {
  static auto* map = new ProcessGroupIdMap();
  return *map;
}

namespace {
thread_local std::string tls_comm_name;
}  // namespace

CommNameScope::CommNameScope(std::string name) : previous_(std::move(tls_comm_name)) {
  tls_comm_name = std::move(name);
}
CommNameScope::~CommNameScope() { tls_comm_name = std::move(previous_); }
const std::string& CommNameScope::Current() { return tls_comm_name; }

void ProcessGroupIdMap::Insert(int gid, std::shared_ptr<ProcessGroup> group) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = groups_.find(gid);
  PADDLE_ENFORCE(it == groups_.end(),
                 phi::errors::PreconditionNotMet(
                     "Group id %d is already taken by a %s process group; erase it first "
                     "(ProcessGroupIdMap::Erase) or use another id.",
                     gid, it == groups_.end() ? "" : it->second->GetBackendName().c_str()));
  groups_[gid] = std::move(group);
}

std::shared_ptr<ProcessGroup> ProcessGroupIdMap::Get(int gid) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = groups_.find(gid);
  return it == groups_.end() ? nullptr : it->second;
}

std::vector<int> ProcessGroupIdMap::Ids() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<int> ids;
  ids.reserve(groups_.size());
  for (const auto& kv : groups_) ids.push_back(kv.first);
  return ids;
}

void ProcessGroupIdMap::Erase(int gid) {
  std::lock_guard<std::mutex> lk(mu_);
  groups_.erase(gid);
}

void ProcessGroupIdMap::Clear() {
  std::map<int, std::shared_ptr<ProcessGroup>> doomed;
  {
    std::lock_guard<std::mutex> lk(mu_);
    doomed.swap(groups_);
  }
}

}  // namespace distributed
}  // namespace paddle_like
