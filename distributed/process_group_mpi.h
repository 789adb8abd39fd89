// ProcessGroupMPI: the MPI backend. CPU tensors; collectives run on the group's comm stream
// (a worker thread), or inline on the caller for a sync op when that stream is idle, through
// MPI (phi/core/distributed/mpi_comm_context.h). The processes are those of one mpirun job.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "distributed/process_group_cpu.h"

namespace paddle_like {
namespace distributed {

class ProcessGroupMPI : public ProcessGroupCpu {
 public:
  std::string GetBackendName() const override { return "MPI"; }

  // Collective over the group's members: creates the group's MPI communicator now
  // (MPI_Comm_create_group), waiting for the members through `store` within `timeout`.
  // Always eager: MPI creates a communicator collectively, so it cannot wait for the first
  // op, which may be a send between two of the members only.
  ProcessGroupMPI(std::shared_ptr<phi::distributed::Store> store, int rank, int size, int gid,
                  std::chrono::milliseconds timeout, std::string group_desc = {});

 protected:
  std::unique_ptr<phi::distributed::CommContext> CreateCommContext() override;
};

}  // namespace distributed
}  // namespace paddle_like
