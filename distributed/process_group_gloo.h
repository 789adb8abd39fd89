// ProcessGroupGloo: the Gloo backend. CPU tensors; collectives run on the group's comm
// stream (a worker thread), or inline on the caller for a sync op when that stream is idle.
#pragma once

#include <chrono>
#include <memory>

#include "distributed/process_group_cpu.h"
#include "distributed/process_group_options.h"

namespace paddle_like {
namespace distributed {

class ProcessGroupGloo : public ProcessGroupCpu {
 public:
  // `options` (may be null): where Gloo listens and this backend's timeout.
  ProcessGroupGloo(std::shared_ptr<phi::distributed::Store> store, int rank, int size, int gid,
                   std::chrono::milliseconds timeout,
                   const ProcessGroupGlooOptions* options = nullptr,
                   std::string group_desc = {});

  // Creates the group and registers it in ProcessGroupIdMap under gid. The default timeout
  // is FLAGS_default_group_timeout_s.
  static std::shared_ptr<ProcessGroupGloo> CreateProcessGroupGloo(
      std::shared_ptr<phi::distributed::Store> store, int rank, int size, int gid,
      std::chrono::milliseconds timeout = kUnsetTimeout);

  std::string GetBackendName() const override { return "Gloo"; }

 protected:
  std::unique_ptr<phi::distributed::CommContext> CreateCommContext() override;

 private:
  std::string interface_, hostname_;  // ProcessGroupGlooOptions' (empty: the default rule)
};

}  // namespace distributed
}  // namespace paddle_like
