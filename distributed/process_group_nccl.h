// ProcessGroupNCCL: the NCCL backend on the shared engine (process_group_with_stream.h).
// GPU tensors of this process's device; collectives run on the group's comm stream (a
// non-blocking cudaStream) after the calc stream's earlier work, or on the calc stream.
// Every op body is the engine's; this class only says how to make the communicator and
// which places it serves.
#pragma once

#include <chrono>
#include <memory>

#include "distributed/process_group_with_stream.h"
#include "phi/core/distributed/nccl_comm_context.h"

namespace paddle_like {
namespace distributed {

class ProcessGroupNCCL : public ProcessGroupWithStream {
 public:
  // device -1: LOCAL_RANK from the environment, else rank % (visible devices).
  // UnavailableError when no CUDA device is visible.
  // `high_priority_stream`: the comm stream takes the device's greatest priority.
  ProcessGroupNCCL(std::shared_ptr<phi::distributed::Store> store, int rank, int size, int gid,
                   std::chrono::milliseconds timeout, int device = -1,
                   phi::distributed::NCCLCommOptions options = {},
                   bool high_priority_stream = false, std::string group_desc = {});
  ~ProcessGroupNCCL() override;

  // Creates the group and registers it in ProcessGroupIdMap under gid.
  static std::shared_ptr<ProcessGroupNCCL> CreateProcessGroupNCCL(
      std::shared_ptr<phi::distributed::Store> store, int rank, int size, int gid,
      std::chrono::milliseconds timeout = kUnsetTimeout, int device = -1,
      phi::distributed::NCCLCommOptions options = {});

  std::string GetBackendName() const override { return "NCCL"; }
  // The device this process's collectives run on.
  const phi::Place& place() const { return place_; }
  phi::Place DefaultPlace() const override { return place_; }
  // The group's communicator (created on first use).
  phi::distributed::NCCLCommContext* GetCommContext();

 protected:
  phi::distributed::CommContext* GetOrCreateCommContext(const phi::Place& place) override;
  void CheckPlace(const phi::Place& place) const override;
  phi::Place BarrierPlace(const BarrierOptions& opts) const override;
  bool BlockingWait() const override;
  bool HighPriorityCommStream() const override { return high_priority_stream_; }

 private:
  static int DefaultDevice(int rank);

  phi::Place place_;
  phi::distributed::NCCLCommOptions options_;
  bool high_priority_stream_;
};

}  // namespace distributed
}  // namespace paddle_like
