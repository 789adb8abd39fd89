// Process-wide registry of communicators: string key -> CommContext. A group's key is its
// group id (the framework's ring id), so framework operators find their communicator by
// ring id. Creation is backend-specific (see gloo_comm_context.h, nccl_comm_context.h);
// the manager only owns and finds.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "phi/core/distributed/comm_context.h"

namespace phi {
namespace distributed {

class CommContextManager {
 public:
  static CommContextManager& Instance();

  static std::string KeyOf(int gid) { return std::to_string(gid); }

  // Returns the context at `key`, creating it with `create` when absent. Creation runs
  // outside the registry lock (it rendezvouses through a store and may take seconds), and
  // concurrent calls for one key create it once.
  CommContext* GetOrCreate(const std::string& key,
                           const std::function<std::unique_ptr<CommContext>()>& create);
  // nullptr when absent.
  CommContext* Get(const std::string& key) const;
  bool Has(const std::string& key) const;
  void Set(const std::string& key, std::unique_ptr<CommContext> comm);
  // Destroys the context (process group destruction, tests).
  void Erase(const std::string& key);

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<CommContext>> contexts_;
  std::map<std::string, std::shared_ptr<std::once_flag>> creating_;
};

}  // namespace distributed
}  // namespace phi
