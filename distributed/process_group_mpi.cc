#include "distributed/process_group_mpi.h"

#include "phi/core/distributed/comm_context_manager.h"
#include "phi/core/distributed/mpi_comm_context.h"
#include "phi/core/errors.h"

namespace paddle_like {
namespace distributed {

using phi::distributed::CommContextManager;

ProcessGroupMPI::ProcessGroupMPI(std::shared_ptr<phi::distributed::Store> store, int rank,
                                 int size, int gid, std::chrono::milliseconds timeout)
    : ProcessGroupWithStream(std::move(store), rank, size, gid, timeout) {
  // Always eager: MPI creates a communicator collectively, so it cannot wait for the first
  // op, which may be a send between two of the members only.
  try {
    GetOrCreateCommContext(phi::CPUPlace());
  } catch (...) {
    // No destructor runs for a half-built group: drop its communicator here.
    CommContextManager::Instance().Erase(CommContextManager::KeyOf("mpi", GetGid()), this);
    throw;
  }
}

ProcessGroupMPI::~ProcessGroupMPI() {
  // Jobs still queued use the communicator: let them finish before it goes.
  ShutdownStreams();
  CommContextManager::Instance().Erase(CommContextManager::KeyOf("mpi", GetGid()), this);
}

std::shared_ptr<ProcessGroupMPI> ProcessGroupMPI::CreateProcessGroupMPI(
    std::shared_ptr<phi::distributed::Store> store, int rank, int size, int gid,
    std::chrono::milliseconds timeout) {
  auto pg = std::make_shared<ProcessGroupMPI>(std::move(store), rank, size, gid, timeout);
  ProcessGroupIdMap::GetInstance().Insert(gid, pg);
  return pg;
}

phi::distributed::CommContext* ProcessGroupMPI::GetOrCreateCommContext(const phi::Place&) {
  return CommContextManager::Instance().GetOrCreate(
      CommContextManager::KeyOf("mpi", GetGid()), this, GetRank(), GetSize(), [this] {
        phi::distributed::MpiOptions options;
        options.timeout = timeout();
        return phi::distributed::CreateMpiCommContext(store(), GetGid(), GetRank(), GetSize(),
                                                      options);
      });
}

void ProcessGroupMPI::CheckPlace(const phi::Place& place) const {
  PADDLE_ENFORCE(place.is_cpu(),
                 phi::errors::InvalidArgument(
                     "ProcessGroupMPI runs on CPU tensors, but the tensor is on %s.",
                     place.DebugString().c_str()));
}

}  // namespace distributed
}  // namespace paddle_like
