#include "distributed/process_group_mpi.h"

#include "phi/core/distributed/mpi_comm_context.h"

namespace paddle_like {
namespace distributed {

ProcessGroupMPI::ProcessGroupMPI(std::shared_ptr<phi::distributed::Store> store, int rank,
                                 int size, int gid, std::chrono::milliseconds timeout,
                                 std::string group_desc)
    : ProcessGroupCpu(std::move(store), rank, size, gid, timeout, "mpi",
                      std::move(group_desc)) {
  CreateCommContextNow();
}

std::unique_ptr<phi::distributed::CommContext> ProcessGroupMPI::CreateCommContext() {
  phi::distributed::MpiOptions options;
  options.timeout = timeout();
  return phi::distributed::CreateMpiCommContext(store(), GetGid(), GetRank(), GetSize(),
                                                options);
}

}  // namespace distributed
}  // namespace paddle_like
