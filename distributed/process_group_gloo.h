// ProcessGroupGloo: the Gloo backend. CPU tensors; collectives run on the group's comm
// stream (a worker thread), or inline on the caller for a sync op when that stream is idle.
#pragma once

#include <chrono>
#include <memory>

#include "distributed/process_group_cpu.h"

namespace paddle_like {
namespace distributed {

class ProcessGroupGloo : public ProcessGroupCpu {
 public:
  ProcessGroupGloo(std::shared_ptr<phi::distributed::Store> store, int rank, int size, int gid,
                   std::chrono::milliseconds timeout);

  // Creates the group and registers it in ProcessGroupIdMap under gid. The default timeout
  // is FLAGS_default_group_timeout_s.
  static std::shared_ptr<ProcessGroupGloo> CreateProcessGroupGloo(
      std::shared_ptr<phi::distributed::Store> store, int rank, int size, int gid,
      std::chrono::milliseconds timeout = kUnsetTimeout);

  std::string GetBackendName() const override { return "Gloo"; }

 protected:
  std::unique_ptr<phi::distributed::CommContext> CreateCommContext() override;
};

}  // namespace distributed
}  // namespace paddle_like
