#include "distributed/process_group.h"

namespace paddle_like {
namespace distributed {

ProcessGroupIdMap& ProcessGroupIdMap::GetInstance() {
  static auto* map = new ProcessGroupIdMap();
  return *map;
}

void ProcessGroupIdMap::Insert(int gid, std::shared_ptr<ProcessGroup> group) {
  std::lock_guard<std::mutex> lk(mu_);
  groups_[gid] = std::move(group);
}

std::shared_ptr<ProcessGroup> ProcessGroupIdMap::Get(int gid) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = groups_.find(gid);
  return it == groups_.end() ? nullptr : it->second;
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
