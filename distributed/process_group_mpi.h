// ProcessGroupMPI: the MPI backend. CPU tensors; collectives run on the group's comm stream
// (a worker thread), or inline on the caller for a sync op when that stream is idle, through
// MPI (phi/core/distributed/mpi_comm_context.h). The processes are those of one mpirun job.
#pragma once

#include <chrono>
#include <memory>

#include "distributed/process_group_with_stream.h"

namespace paddle_like {
namespace distributed {

class ProcessGroupMPI : public ProcessGroupWithStream {
 public:
  // Collective over the group's members: creates the group's MPI communicator now
  // (MPI_Comm_create_group), waiting for the members through `store` within `timeout`.
  ProcessGroupMPI(std::shared_ptr<phi::distributed::Store> store, int rank, int size, int gid,
                  std::chrono::milliseconds timeout);
  ~ProcessGroupMPI() override;

  // Creates the group and registers it in ProcessGroupIdMap under gid. The default timeout
  // is FLAGS_default_group_timeout_s.
  static std::shared_ptr<ProcessGroupMPI> CreateProcessGroupMPI(
      std::shared_ptr<phi::distributed::Store> store, int rank, int size, int gid,
      std::chrono::milliseconds timeout = kUnsetTimeout);

  std::string GetBackendName() const override { return "MPI"; }

 protected:
  phi::distributed::CommContext* GetOrCreateCommContext(const phi::Place& place) override;
  void CheckPlace(const phi::Place& place) const override;
  phi::Place BarrierPlace(const BarrierOptions&) const override { return phi::CPUPlace(); }
};

}  // namespace distributed
}  // namespace paddle_like
