// ProcessGroupCpu: what a host-memory backend's group adds to the engine, once: CPU places
// only, barriers on the CPU, and the group's one communicator kept in CommContextManager
// under (backend key, gid). A backend derives from it and says how to create its
// communicator (ProcessGroupGloo, ProcessGroupMPI).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "distributed/process_group_with_stream.h"

namespace paddle_like {
namespace distributed {

class ProcessGroupCpu : public ProcessGroupWithStream {
 public:
  // `comm_key`: the backend's name in CommContextManager keys ("mpi").
  ProcessGroupCpu(std::shared_ptr<phi::distributed::Store> store, int rank, int size, int gid,
                  std::chrono::milliseconds timeout, std::string comm_key,
                  std::string group_desc = {});
  // Finishes the jobs still queued (they use the communicator), then drops the communicator.
  ~ProcessGroupCpu() override;

 protected:
  // Creates the group's communicator (called once, from GetOrCreateCommContext).
  virtual std::unique_ptr<phi::distributed::CommContext> CreateCommContext() = 0;
  // Creates the communicator now, from a derived constructor, and runs `then` on it (Gloo's
  // eager connection); on failure drops what was registered (no destructor runs for a
  // half-built group, and a later group with this gid must not find it) and rethrows.
  void CreateCommContextNow(
      const std::function<void(phi::distributed::CommContext*)>& then = nullptr);

  phi::distributed::CommContext* GetOrCreateCommContext(const phi::Place& place) final;
  // The one communicator, when it exists (Gloo creates it with the group).
  void SetCommTimeout(std::chrono::milliseconds timeout) final;
  void CheckPlace(const phi::Place& place) const final;
  phi::Place BarrierPlace(const BarrierOptions&) const final { return phi::CPUPlace(); }

 private:
  const std::string comm_key_;
  std::atomic<phi::distributed::CommContext*> comm_{nullptr};  // once created
};

}  // namespace distributed
}  // namespace paddle_like
