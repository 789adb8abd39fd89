// The MPI engine as a CommContext: CPU collectives over MPI (OpenMPI's shared-memory and
// network transports), run on a comm stream's worker thread. Includes no MPI header (the
// implementation does), so a consumer of the installed headers needs no MPI include path.
//
// How it starts: the first communicator initializes MPI for the process with
// MPI_Init_thread(MPI_THREAD_MULTIPLE) unless the program already did (then the level it
// got must be MPI_THREAD_MULTIPLE: each group's comm stream and each point-to-point lane is
// a thread of its own). The library finalizes MPI at exit only when it initialized it.
#pragma once

#include <chrono>
#include <memory>

#include "phi/core/distributed/comm_context.h"
#include "phi/core/distributed/store/rendezvous.h"
#include "phi/core/distributed/store/store.h"

namespace phi {
namespace distributed {

struct MpiOptions {
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
};

// Initializes MPI once per process (see above). Raises PreconditionNotMet when MPI gives
// less than MPI_THREAD_MULTIPLE, External when MPI_Init_thread fails; the same error again
// on every later call.
void EnsureMpiInitialized();

// This process's rank and size in MPI_COMM_WORLD (initializing MPI first).
int MpiWorldRank();
int MpiWorldSize();

// Whether this is a process of an mpirun job (OMPI_COMM_WORLD_RANK set) whose environment
// names no store (MASTER_ADDR, MASTER_PORT and PADDLE_MASTER unset).
bool MpiJobWithoutStoreAddress();
// env:// for such a job: rank and size from MPI_COMM_WORLD; rank 0 hosts a TCPStore on a
// free port (on 127.0.0.1 when every rank is on its node, else on its host name) and sends
// host:port to the others with MPI_Bcast. Collective over MPI_COMM_WORLD.
RendezvousResult MpiRendezvous(std::chrono::milliseconds timeout);

// Creates the group's MPI communicator: the members publish their MPI_COMM_WORLD ranks under
// "mpi/<gid>/" in `store` (so a missing member is a store Timeout, not a hang), then
// MPI_Comm_create_group over them, in group-rank order. Collective over the group's members.
std::unique_ptr<CommContext> CreateMpiCommContext(const std::shared_ptr<Store>& store, int gid,
                                                  int rank, int size,
                                                  const MpiOptions& options);

}  // namespace distributed
}  // namespace phi
